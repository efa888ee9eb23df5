// File: harness/layout/test_util.h
//
// Helpers shared by the harness_layout tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "harness/layout/layout.h"

namespace mtp::layout::test_util {

/// Runs `fn`, which must throw LayoutError, and returns what(); records a test failure otherwise.
inline std::string layout_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const LayoutError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a LayoutError";
  return "";
}

}  // namespace mtp::layout::test_util
