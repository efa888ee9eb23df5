#include "harness/data/token_source.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "harness/common/error.h"
#include "harness/common/utf8.h"

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
  constexpr uint64_t kMaxBytes = uint64_t{1} << 30;
  const std::string shown = printable(path);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    // The system's reason: missing, a symlink loop, a permission, a path component not a directory.
    throw InputError(fmt::format("data: text file '{}': {}", shown, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw InputError(
        fmt::format("data: '{}' is not a regular file (a directory, FIFO or device "
                    "cannot be a corpus)",
                    shown));
  }
  const InputError too_large(
      fmt::format("data: text file '{}' is larger than the 1 GiB a "
                  "byte-level corpus may have here",
                  shown));
  if (static_cast<uint64_t>(st.st_size) > kMaxBytes) throw too_large;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw InputError(
        fmt::format("data: cannot open text file '{}': {}", shown, std::strerror(errno)));
  }
  // Read to the end (files in /proc report size 0), at most 1 GiB + 1 byte.
  bytes_.resize(std::max<size_t>(static_cast<size_t>(st.st_size), 1) + 1);
  size_t got = 0;
  while (true) {
    if (got == bytes_.size()) {
      if (got > kMaxBytes) {
        ::close(fd);
        throw too_large;
      }
      bytes_.resize(std::min<size_t>(2 * got, kMaxBytes + 1));
    }
    const ssize_t n = ::read(fd, bytes_.data() + got, bytes_.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(
          fmt::format("data: cannot read text file '{}': {}", shown, std::strerror(err)));
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes_.resize(got);
  if (bytes_.empty()) throw InputError(fmt::format("data: text file '{}' is empty", shown));
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
