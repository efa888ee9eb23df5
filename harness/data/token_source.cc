#include "harness/data/token_source.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <memory>

#include "harness/common/error.h"
#include "harness/data/file_bytes.h"

namespace mtp::data {

std::string sha256_hex(const uint8_t* data, size_t size) {
  return sha256_hex({{data, size}});
}

std::string sha256_hex(const std::vector<std::pair<const uint8_t*, size_t>>& parts) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1;
  for (const auto& [data, size] : parts) {
    ok = ok && EVP_DigestUpdate(ctx.get(), data, size) == 1;
  }
  ok = ok && EVP_DigestFinal_ex(ctx.get(), digest, &len) == 1;
  if (!ok) throw InfraError("SHA-256 computation failed (OpenSSL EVP_Digest)");
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

TextFileSource::TextFileSource(const std::string& path)
    : path_(path), bytes_(read_file_bytes(path, "text file")) {
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

MegatronSource::MegatronSource(const std::string& path_prefix)
    : ds_(read_indexed_dataset(path_prefix)) {
  for (int32_t id : ds_.tokens) max_id_ = std::max<int64_t>(max_id_, id);
}

void MegatronSource::read(int64_t offset, int64_t count, int32_t* out) const {
  MTP_INTERNAL_ASSERT(offset >= 0 && count >= 0 && offset + count <= size(),
                      fmt::format("read [{}, {}) outside {} tokens", offset, offset + count,
                                  size()));
  std::copy_n(ds_.tokens.begin() + offset, count, out);
}

std::string MegatronSource::describe() const {
  return fmt::format("megatron:{} ({} documents, {} sequences, {} tokens, {})", ds_.prefix,
                     ds_.document_indices.size() - 1, ds_.sequence_lengths.size(),
                     ds_.tokens.size(), index_dtype_name(static_cast<int>(ds_.dtype)));
}

std::unique_ptr<TokenSource> open_token_source(const DataConfig& cfg) {
  if (cfg.kind == "text") return std::make_unique<TextFileSource>(cfg.path);
  if (cfg.kind == "megatron") {
    if (cfg.path_prefix.empty()) {
      throw InputError("data: kind \"megatron\" needs path_prefix (PREFIX of PREFIX.idx and "
                       "PREFIX.bin)");
    }
    return std::make_unique<MegatronSource>(cfg.path_prefix);
  }
  throw InputError(fmt::format("data: unknown kind '{}' (accepted: \"text\", \"megatron\")",
                               cfg.kind));
}

}  // namespace mtp::data
