// Environment facts and CPU dispatch pinning (environment.h).

#include "harness/common/environment.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace mtp {
namespace {

/// The first "key : value" line of /proc/cpuinfo with this key, or "".
std::string cpuinfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    k.erase(k.find_last_not_of(" \t") + 1);
    if (k == key) {
      std::string v = line.substr(colon + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

std::set<std::string> cpu_flag_set() {
  std::set<std::string> flags;
  std::istringstream in(cpuinfo("flags"));
  for (std::string f; in >> f;) flags.insert(f);
  return flags;
}

std::string env_or_unset(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "(unset)";
}

/// OS name (/etc/os-release PRETTY_NAME) and kernel release.
std::string os_description() {
  std::string pretty = "unknown";
  std::ifstream in("/etc/os-release");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      pretty = line.substr(12);
      if (pretty.size() >= 2 && pretty.front() == '"') pretty = pretty.substr(1, pretty.size() - 2);
    }
  }
  struct utsname u;
  return ::uname(&u) == 0 ? fmt::format("{}; kernel {}", pretty, u.release) : pretty;
}

struct BlasFacts {
  std::string blas = "unknown", core = "n/a", threads = "n/a";
};

/// The file of the first loaded library that defines `symbol`, or "" when none does.
std::string library_of(const char* symbol) {
  void* addr = ::dlsym(RTLD_DEFAULT, symbol);
  Dl_info info;
  if (addr == nullptr || ::dladdr(addr, &info) == 0 || info.dli_fname == nullptr) return "";
  char real[PATH_MAX];
  return ::realpath(info.dli_fname, real) ? real : info.dli_fname;
}

/// The BLAS the process resolved sgemm_ to, and OpenBLAS's own description when that library
/// is OpenBLAS (OpenBLAS's LAPACK also exports openblas_* functions, so they count only when
/// they come from sgemm_'s library).
BlasFacts blas_facts() {
  BlasFacts f;
  const std::string file = library_of("sgemm_");
  f.blas = file.empty() ? "sgemm_ not found" : file;
  // Look the OpenBLAS functions up in sgemm_'s own library (and what it depends on).
  void* lib = file.empty() ? nullptr : ::dlopen(file.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return f;
  using CharFn = char* (*)();
  using IntFn = int (*)();
  auto config = reinterpret_cast<CharFn>(::dlsym(lib, "openblas_get_config"));
  auto corename = reinterpret_cast<CharFn>(::dlsym(lib, "openblas_get_corename"));
  auto threads = reinterpret_cast<IntFn>(::dlsym(lib, "openblas_get_num_threads"));
  ::dlclose(lib);  // RTLD_NOLOAD took one more reference to a loaded library: give it back
  if (config == nullptr) return f;
  f.blas = fmt::format("{} ({})", config(), file);
  if (corename != nullptr) f.core = corename();
  if (threads != nullptr) f.threads = std::to_string(threads());
  return f;
}

/// The pinned variables, in the order they are set.
struct Pin {
  const char* name;
  const char* value;
};
constexpr Pin kPins[] = {{"OPENBLAS_CORETYPE", "Haswell"},
                         {"OPENBLAS_NUM_THREADS", "1"},
                         {"ATEN_CPU_CAPABILITY", "avx2"},
                         {"DNNL_MAX_CPU_ISA", "AVX2"},
                         // LibTorch wheels (the GPU machine's) take BLAS from MKL, whose GEMM
                         // results depend on the operands' alignment unless strict CNR is on.
                         {"MKL_CBWR", "AVX2,STRICT"}};
constexpr const char* kPinnedMarker = "MTP_CPU_DISPATCH_PINNED";

}  // namespace

bool cpu_has_avx2_fma() {
  const std::set<std::string> flags = cpu_flag_set();
  return flags.count("avx2") && flags.count("fma");
}

void pin_blas_threads() {
  using SetFn = void (*)(int);
  if (auto set = reinterpret_cast<SetFn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(1);
  }
}

bool set_cpu_dispatch_pins() {
  if (std::getenv(kPinnedMarker) != nullptr || !cpu_has_avx2_fma()) return false;
  bool set_at_load = false;
  for (const Pin& p : kPins) {
    if (std::getenv(p.name) != nullptr) continue;
    ::setenv(p.name, p.value, 1);
    set_at_load = set_at_load || std::strcmp(p.name, "OPENBLAS_CORETYPE") == 0 ||
                  std::strcmp(p.name, "MKL_CBWR") == 0;
  }
  ::setenv(kPinnedMarker, "1", 1);
  return set_at_load;
}

void pin_cpu_dispatch(int argc, char** argv) {
  (void)argc;
  if (set_cpu_dispatch_pins()) {
    // OpenBLAS and MKL read theirs when they load, before main: start again with them set.
    ::execv("/proc/self/exe", argv);
    // execv failed: carry on; the fingerprint records OpenBLAS's own choice.
  }
}

std::map<std::string, std::string> environment_fingerprint() {
  const BlasFacts b = blas_facts();
  const std::set<std::string> flags = cpu_flag_set();
  std::string simd;
  for (const char* f : {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                        "avx512_bf16", "amx_bf16"}) {
    if (flags.count(f)) simd += simd.empty() ? f : std::string(",") + f;
  }
#if defined(__clang__)
  const std::string compiler = fmt::format("clang {}", __clang_version__);
#elif defined(__GNUC__)
  const std::string compiler = fmt::format("g++ {}", __VERSION__);
#else
  const std::string compiler = "unknown";
#endif
  std::map<std::string, std::string> out{
      {"blas", b.blas},
      {"blas_core", b.core},
      {"blas_threads", b.threads},
      {"compiler", compiler},
      {"libc", fmt::format("glibc {}", gnu_get_libc_version())},
      {"cpu_model", cpuinfo("model name").empty() ? "unknown" : cpuinfo("model name")},
      {"cpu_flags", simd.empty() ? "none" : simd},
      {"cpu_fma", flags.count("fma") ? "yes" : "no"},
      {"os", os_description()},
  };
  for (const Pin& p : kPins) out[p.name] = env_or_unset(p.name);
  return out;
}

bool fingerprint_key_changes_bits(const std::string& key) {
  static const std::set<std::string> kBits{"blas",
                                           "blas_core",
                                           "blas_threads",
                                           "compiler",
                                           "libc",
                                           "cpu_fma",
                                           "torch_version",
                                           "aten_cpu_capability",
                                           "device",
                                           "deterministic_algorithms",
                                           "intra_op_threads",
                                           "OPENBLAS_CORETYPE",
                                           "OPENBLAS_NUM_THREADS",
                                           "ATEN_CPU_CAPABILITY",
                                           "DNNL_MAX_CPU_ISA",
                                           "MKL_CBWR"};
  return kBits.count(key) > 0;
}

const std::vector<std::string>& fingerprint_keys() {
  static const std::vector<std::string> keys = [] {
    std::set<std::string> k{"torch_version", "aten_cpu_capability",      "hdf5",
                            "device",        "deterministic_algorithms", "intra_op_threads"};
    for (const auto& [key, value] : environment_fingerprint()) k.insert(key);
    return std::vector<std::string>(k.begin(), k.end());
  }();
  return keys;
}

}  // namespace mtp
