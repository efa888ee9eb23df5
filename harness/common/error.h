// File: harness/common/error.h
//
// Error types and process exit codes shared by every mtp-harness module.
// User mistakes (a bad scenario, layout string, HDF5 file or CLI flag) throw InputError with a
// message that names the file or string, the position and the rule broken; broken invariants of
// the harness itself throw InternalError. main() maps them to exit codes (determinism_anchors §3).
#pragma once

#include <stdexcept>
#include <string>

namespace mtp {

/// Process exit codes of every mtp-harness subcommand.
enum ExitCode : int {
  kExitOk = 0,        ///< all expectations hold / records equal
  kExitMismatch = 1,  ///< an expectation fails / records differ
  kExitUsage = 2,     ///< bad input: CLI flag, scenario, layout string, HDF5 file
  kExitInfra = 3,     ///< infrastructure: HDF5 I/O, transport timeout, torch error
};

/// Bad input from the user. what() is the complete message to print.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& msg) : std::runtime_error(msg) {}
};

/// An infrastructure failure (I/O, transport timeout, a library error).
class InfraError : public std::runtime_error {
 public:
  explicit InfraError(const std::string& msg) : std::runtime_error(msg) {}
};

/// A broken invariant of the harness itself (a bug).
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& msg) : std::logic_error(msg) {}
};

/// Throws InternalError with file:line when `cond` is false.
[[noreturn]] void internal_assert_fail(const char* cond, const char* file, int line,
                                       const std::string& msg);

}  // namespace mtp

/// Bad input unless `cond` holds: throws InputError(msg), `msg` (a std::string expression)
/// evaluated only then. The message names the file or string, the position and the rule broken.
///   MTP_CHECK(v >= 1, fmt::format("model: {} = {} must be >= 1", name, v));
#define MTP_CHECK(cond, msg) MTP_CHECK_AS(::mtp::InputError, cond, msg)

/// MTP_CHECK throwing `ErrorType`, an InputError of a module (RecordError, LayoutError,
/// ScheduleError), so that callers can catch the module's errors alone.
#define MTP_CHECK_AS(ErrorType, cond, msg) \
  do {                                     \
    if (!(cond)) throw ErrorType(msg);     \
  } while (0)

#define MTP_INTERNAL_ASSERT(cond, msg)                                          \
  do {                                                                          \
    if (!(cond)) ::mtp::internal_assert_fail(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
