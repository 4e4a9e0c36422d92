// Portable vectorisation hooks for the codec kernels.
//
// TG_VECTOR_CLONES makes GCC compile a kernel three times (AVX-512F, AVX2 and the x86-64
// baseline) and pick one at load time through an ifunc, so that one binary runs on any x86-64
// machine and still uses wide vectors where they exist (no -march=native). The clones name
// instruction sets, not "arch=" levels: GCC refuses to inline ordinary inline functions (the
// conversions in half.h, mix32, the bit packers) into a function compiled for another arch, and
// a kernel whose helpers are calls does not vectorise.
//
// Clones must give identical bytes: the kernels use no reassociation (no -ffast-math), and the
// codec sources are built with -ffp-contract=off, so every clone rounds exactly as the scalar
// code is written. Reductions use fixed-width vector types (lane_reduce.h), whose lane
// structure does not depend on the hardware vector width.
//
// Clang (the fuzz build) and other architectures get plain functions: same results, fewer
// vector instructions. Defining TG_NO_VECTOR_CLONES does the same for GCC, so that a build with
// an explicit -march (a test of one instruction set, a sanitizer build) runs exactly that code.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(TG_NO_VECTOR_CLONES)
#define TG_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TG_VECTOR_CLONES
#endif

#define TG_RESTRICT __restrict__

// For helpers of a TG_VECTOR_CLONES kernel: inlined into each clone, so they are compiled with
// that clone's instruction set (an out-of-line copy would be baseline code).
#define TG_INLINE inline __attribute__((always_inline))

namespace tidegate {

// Width of the lane arrays used by reductions: 16 floats = one AVX-512 register, two AVX2 ones.
inline constexpr int kLanes = 16;

}  // namespace tidegate
