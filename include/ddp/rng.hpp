#pragma once
// Counter-based random numbers: every draw is a pure function of (seed, stream, counter), so
// results never depend on thread timing, batch composition or world size (see ARCHITECTURE.md,
// Determinism).
#include <cmath>
#include <cstdint>

namespace ddp {

// SplitMix64 finaliser: a strong 64-bit mixing function.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Hash of a tuple of words, order-sensitive.
constexpr std::uint64_t hash_words(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0,
                                   std::uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

// Named streams keep the draws of different consumers independent for one seed.
enum class RngStream : std::uint64_t {
  init = 1,
  shuffle = 2,
  augment = 3,
  dropout = 4,
  subset = 5,  // data.train_limit / data.test_limit
  flip = 6,    // data.flip = "alternating": each sample's coin
};

// A small sequential generator seeded from a hash; used where a consumer needs several draws for
// one key (e.g. one sample's crop offsets and flip).
class CounterRng {
 public:
  constexpr explicit CounterRng(std::uint64_t key) : key_(key) {}
  constexpr std::uint64_t next_u64() { return mix64(key_ + 0x632be59bd9b4e019ULL * ++counter_); }
  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  constexpr float next_float() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  // Uniform in [0, 1) with 53 random bits.
  constexpr double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller; one draw per call, the second value is discarded so that every
  // value depends only on the counter).
  double next_normal() {
    const double u1 = 1.0 - next_double();  // (0, 1]: log stays finite
    const double u2 = next_double();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias < 2^-32 for our n).
  constexpr std::uint64_t next_below(std::uint64_t n) {
    __extension__ using u128 =
        unsigned __int128;  // __extension__: GCC/Clang builtin, no -Wpedantic
    return static_cast<std::uint64_t>((static_cast<u128>(next_u64()) * n) >> 64);
  }

 private:
  std::uint64_t key_;
  std::uint64_t counter_ = 0;
};

}  // namespace ddp
