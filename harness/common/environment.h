// File: harness/common/environment.h
//
// Facts about the machine and the libraries a process runs with that can change the bits of a
// CPU training step, for the records' environment fingerprint (engine/determinism.h) and the
// goldens (harness/golden), and the pinning of what can be pinned.
//
// What is pinned, and how: OpenBLAS's kernel set (OPENBLAS_CORETYPE=Haswell, read by OpenBLAS
// when the library loads, so the process re-executes itself once with it set), OpenBLAS's thread
// count (OPENBLAS_NUM_THREADS=1: every rank thread calls BLAS on its own), ATen's CPU capability
// (ATEN_CPU_CAPABILITY=avx2, read at the first dispatched kernel), oneDNN's ISA
// (DNNL_MAX_CPU_ISA=AVX2) and, for LibTorch builds whose BLAS is MKL, MKL's strict conditional
// numerical reproducibility (MKL_CBWR=AVX2,STRICT: GEMM bits independent of the operands'
// alignment; read when MKL loads). Each is set only when unset and when the CPU has AVX2 and FMA
// (the Haswell kernels need them); a value the user set is kept and recorded. What cannot be
// pinned: the BLAS library and its version, LibTorch's version, the C library's libm (glibc picks
// FMA variants of exp/log when the CPU has FMA), the compiler of this build; they are recorded.
//
// Example:
//   int main(int argc, char** argv) { mtp::pin_cpu_dispatch(argc, argv); ... }
#pragma once

#include <map>
#include <string>
#include <vector>

namespace mtp {

/// Sets the variables above (each only when unset and the CPU supports the pinned choice) and,
/// when OPENBLAS_CORETYPE was set here, re-executes /proc/self/exe with the same arguments so
/// that OpenBLAS loads with it (once: MTP_CPU_DISPATCH_PINNED marks the second start). Returns
/// normally when nothing needed setting or the re-exec failed (the fingerprint then shows what
/// OpenBLAS chose). Call first thing in main().
void pin_cpu_dispatch(int argc, char** argv);

/// Sets the variables above as pin_cpu_dispatch does, and MTP_CPU_DISPATCH_PINNED, without
/// re-executing: for a process that executes another binary next (the launcher, which runs the
/// engine binary with them set before it loads OpenBLAS or MKL). Returns true when a variable
/// read at library load (OPENBLAS_CORETYPE, MKL_CBWR) was set here.
bool set_cpu_dispatch_pins();

/// One BLAS thread per calling thread: openblas_set_num_threads(1) when the process's BLAS is
/// OpenBLAS (a no-op otherwise). For processes that did not start through pin_cpu_dispatch
/// (the test programs); engine::apply_determinism calls it.
void pin_blas_threads();

/// Whether the CPU has AVX2 and FMA (/proc/cpuinfo flags).
bool cpu_has_avx2_fma();

/// The environment's bit-relevant and informational facts, as record attributes:
///   blas (library file and OpenBLAS's config string), blas_core (OpenBLAS's kernel set, or
///   "n/a"), blas_threads, compiler, libc, cpu_model, cpu_flags (the SIMD flags dispatch may
///   use), cpu_fma, os, and the pinning variables' values (OPENBLAS_CORETYPE,
///   OPENBLAS_NUM_THREADS, ATEN_CPU_CAPABILITY, DNNL_MAX_CPU_ISA; "(unset)" when unset).
std::map<std::string, std::string> environment_fingerprint();

/// The fingerprint keys whose difference can change the bits of a CPU run (golden check refuses
/// to compare across them): blas, blas_core, blas_threads, compiler, libc, cpu_fma and the
/// pinning variables, plus torch_version, aten_cpu_capability, device, deterministic_algorithms
/// and intra_op_threads (written by engine/determinism.h and the step recorder). The others
/// (cpu_model, cpu_flags, os, hdf5) are informational: with the kernels pinned, another CPU
/// model of the same ISA gives the same bits.
bool fingerprint_key_changes_bits(const std::string& key);

/// Every key a record's environment fingerprint holds (environment_fingerprint()'s, the
/// engine's and the device), in name order: what goldens keep.
const std::vector<std::string>& fingerprint_keys();

}  // namespace mtp
