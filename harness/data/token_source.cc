#include "harness/data/token_source.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include "harness/common/error.h"
#include "harness/data/file_bytes.h"

namespace mtp::data {

namespace {

/// SHA-256 over bytes given in parts (OpenSSL EVP).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    ok_ = ctx_ != nullptr && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
  }
  void update(const void* data, size_t size) {
    ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), data, size) == 1;
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ok_ = ok_ && EVP_DigestFinal_ex(ctx_.get(), digest, &len) == 1;
    if (!ok_) throw InfraError("SHA-256 computation failed (OpenSSL EVP_Digest)");
    std::string out;
    for (unsigned int i = 0; i < len; ++i) out += fmt::format("{:02x}", digest[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
  bool ok_ = false;
};

}  // namespace

std::string sha256_hex(const uint8_t* data, size_t size) { return sha256_hex({{data, size}}); }

std::string sha256_hex(const std::vector<std::pair<const uint8_t*, size_t>>& parts) {
  Sha256 sha;
  for (const auto& [data, size] : parts) sha.update(data, size);
  return sha.hex();
}

std::string sha256_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("data: {} '{}' cannot be opened", what, path));
  Sha256 sha;
  std::vector<char> block(1 << 20);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    sha.update(block.data(), static_cast<size_t>(in.gcount()));
  }
  if (!in.eof()) throw InputError(fmt::format("data: {} '{}' could not be read", what, path));
  return sha.hex();
}

TextFileSource::TextFileSource(const std::string& path)
    : path_(path), bytes_(read_file_bytes(path, "text file")) {
  if (bytes_.empty()) throw InputError(fmt::format("data: text file '{}' is empty", path));
  sha256_ = sha256_hex(bytes_.data(), bytes_.size());
}

void TextFileSource::read(int64_t offset, int64_t count, int32_t* out) const {
  MTP_INTERNAL_ASSERT(
      offset >= 0 && count >= 0 && offset + count <= size(),
      fmt::format("read [{}, {}) outside {} tokens", offset, offset + count, size()));
  for (int64_t i = 0; i < count; ++i) out[i] = bytes_[offset + i];
}

std::string TextFileSource::describe() const {
  return fmt::format("text:{} ({} bytes)", path_, bytes_.size());
}

MegatronSource::MegatronSource(const std::string& path_prefix)
    : ds_(open_indexed_dataset(path_prefix)), max_id_(ds_.max_token) {}

void MegatronSource::read(int64_t offset, int64_t count, int32_t* out) const {
  ds_.read_tokens(offset, count, out);
}

std::string MegatronSource::describe() const {
  return fmt::format("megatron:{} ({} documents, {} sequences, {} tokens, {})", ds_.prefix,
                     ds_.document_indices.size() - 1, ds_.sequence_lengths.size(), ds_.num_tokens(),
                     index_dtype_name(static_cast<int>(ds_.dtype)));
}

std::unique_ptr<TokenSource> open_token_source(const DataConfig& cfg) {
  if (cfg.kind == "text") return std::make_unique<TextFileSource>(cfg.path);
  if (cfg.kind == "megatron") {
    if (cfg.path_prefix.empty()) {
      throw InputError(
          "data: kind \"megatron\" needs path_prefix (PREFIX of PREFIX.idx and "
          "PREFIX.bin)");
    }
    return std::make_unique<MegatronSource>(cfg.path_prefix);
  }
  throw InputError(
      fmt::format("data: unknown kind '{}' (accepted: \"text\", \"megatron\")", cfg.kind));
}

}  // namespace mtp::data
