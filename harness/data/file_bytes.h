// File: harness/data/file_bytes.h
//
// Whole-file reads and atomic writes for data files (text corpora, Megatron .idx/.bin), with
// errors that name the file and say what it was meant to be.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mtp::data {

/// Largest data file the harness reads into memory (1 GiB).
inline constexpr std::uintmax_t kMaxDataFileBytes = std::uintmax_t{1} << 30;

/// Every byte of `path`. `what` names the file's role in errors ("text file", "Megatron index").
/// Throws InputError "data: <what> '<path>' ..." when it does not exist, is not a regular file,
/// is larger than kMaxDataFileBytes or cannot be read. An empty file is returned empty.
std::vector<uint8_t> read_file_bytes(const std::string& path, const std::string& what);

/// Writes `bytes` to `path` through write_file_atomically (harness/common/output_file.h: a unique
/// temporary created exclusively, checked, fsync'ed, renamed), so that no half-written file is
/// left under either name. Throws InfraError naming the path when it cannot be written (callers
/// check the path first with check_output_file: a bad path is an InputError).
void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace mtp::data
