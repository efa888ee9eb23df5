// File: harness/record/schema.h
//
// The naming rules of the step record (record.h): 6-digit step group names, the known groups of a
// step, and which dataset names are allowed. Shared by the writer and the reader.
#pragma once

#include <optional>
#include <string>

namespace mtp::record {

/// Largest step number a 6-digit step group name can hold.
inline constexpr int kMaxStep = 999999;

/// parse_step_group_name: the step of a 6-digit name ("000007" → 7), nullopt for anything else.
std::optional<int> parse_step_group_name(const std::string& name);

/// group_index: the position of `group` in record_groups(), or -1 when it is not a known group.
int group_index(const std::string& group);

/// dataset_name_problem: why `name` cannot be a dataset name (empty, ".", contains '/' or a NUL),
/// or "" when it can.
std::string dataset_name_problem(const std::string& name);

}  // namespace mtp::record
