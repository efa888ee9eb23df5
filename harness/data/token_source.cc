#include "harness/data/token_source.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness/common/error.h"

namespace mtp::data {

std::string sha256_hex(const uint8_t* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, size, digest, &len, EVP_sha256(), nullptr) != 1) {
    throw InfraError("SHA-256 computation failed (OpenSSL EVP_Digest)");
  }
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

TextFileSource::TextFileSource(const std::string& path) : path_(path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw InputError(fmt::format("data: text file '{}' does not exist", path));
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw InputError(fmt::format("data: '{}' is not a regular file (a directory, FIFO or device "
                                 "cannot be a corpus)", path));
  }
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{1} << 30;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxBytes) {
    throw InputError(fmt::format("data: text file '{}' has {} bytes, more than the 1 GiB a byte-level "
                                 "corpus may have here", path, size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(fmt::format("data: cannot open text file '{}': {}", path,
                                 std::strerror(errno)));
  }
  bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(fmt::format("data: error while reading '{}'", path));
  if (bytes_.empty()) throw InputError(fmt::format("data: text file '{}' is empty", path));
  sha256_ = sha256_hex(bytes_.data(), bytes_.size());
}

void TextFileSource::read(int64_t offset, int64_t count, int32_t* out) const {
  MTP_INTERNAL_ASSERT(offset >= 0 && count >= 0 && offset + count <= size(),
                      fmt::format("read [{}, {}) outside {} tokens", offset, offset + count, size()));
  for (int64_t i = 0; i < count; ++i) out[i] = bytes_[offset + i];
}

std::string TextFileSource::describe() const {
  return fmt::format("text:{} ({} bytes)", path_, bytes_.size());
}

std::unique_ptr<TokenSource> open_token_source(const DataConfig& cfg) {
  if (cfg.kind == "text") return std::make_unique<TextFileSource>(cfg.path);
  throw InputError(fmt::format("data: unknown kind '{}' (accepted: \"text\")", cfg.kind));
}

}  // namespace mtp::data
