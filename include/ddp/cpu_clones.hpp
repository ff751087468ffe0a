#pragma once
// DDP_ALSO_AVX2: builds a function for the x86-64 baseline and for AVX2, the one to run chosen when
// the program loads (GCC's target_clones, an ifunc). For the few hot byte loops that the compiler
// vectorises well only with AVX2; the binary still runs on any x86-64 CPU. Elsewhere (other
// architectures, other compilers), nothing.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define DDP_ALSO_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define DDP_ALSO_AVX2
#endif
