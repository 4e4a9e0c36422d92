// TG_AVX2_CLONES: compile a hot kernel twice (AVX2 and the x86-64 baseline) and let the loader
// pick one per process through an ifunc, so one binary uses wide vectors where the CPU has
// them (no -march=native). Both clones compute the same bits: the vector width changes how many
// elements one instruction handles, never an element's result. The codec kernels have their
// own, wider set (compress/simd.h, TG_VECTOR_CLONES).
//
// Defining TG_NO_VECTOR_CLONES gives plain functions, as it does for the codecs. The
// ThreadSanitizer build needs that: the loader runs an ifunc resolver while it relocates the
// program, before TSan's runtime is initialised, and GCC instruments the resolver it generates,
// so every instrumented binary crashed at load.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(TG_NO_VECTOR_CLONES)
#define TG_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TG_AVX2_CLONES
#endif
