// File: harness/record/schema.h
//
// The naming rules of the step record (record.h): 6-digit step group names, the known groups of a
// step, and which dataset names are allowed. Shared by the writer and the reader.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mtp::record {

/// Dataset attributes of the step record (record.h): the tensor digest, the block digests, the
/// storage of a digest-only tensor and its shape.
inline constexpr const char* kDigestAttr = "xxh3_128";
inline constexpr const char* kBlockDigestsAttr = "xxh3_128_blocks";
inline constexpr const char* kStorageAttr = "storage";
inline constexpr const char* kShapeAttr = "shape";
/// Group attribute: the JSON index of the group's datasets (record.h).
inline constexpr const char* kTensorIndexAttr = "tensor_index";

/// Largest step number a 6-digit step group name can hold.
inline constexpr int kMaxStep = 999999;

/// parse_step_group_name: the step of a 6-digit name ("000007" → 7), nullopt for anything else.
std::optional<int> parse_step_group_name(const std::string& name);

/// group_index: the position of `group` in record_groups(), or -1 when it is not a known group.
int group_index(const std::string& group);

/// parse_shape_attr: the dimensions of a `shape` attribute ("[8, 2, 32]", "[]"), nullopt when it
/// is not that form or a dimension is negative or over 2^62.
std::optional<std::vector<int64_t>> parse_shape_attr(const std::string& text);

/// dataset_name_problem: why `name` cannot be a dataset name (empty, ".", contains '/' or a NUL),
/// or "" when it can.
std::string dataset_name_problem(const std::string& name);

}  // namespace mtp::record
