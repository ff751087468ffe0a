#include "ddp/sync/fixed_point_sum.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ddp/error.hpp"

namespace ddp::sync::fixed {
namespace {

// Non-finite codes sit far above every finite exponent (|e| <= 1100).
constexpr std::int64_t kNonFiniteBase = std::int64_t{1} << 40;

// x rounded to the nearest integer, ties to even (the default rounding mode; |x| < 2^63). The SSE
// conversion is one instruction where std::llrint may be a library call.
inline std::int64_t round_to_int(double x) {
#if defined(__SSE2__)
  return _mm_cvtsd_si64(_mm_set_sd(x));
#else
  return std::llrint(x);
#endif
}

// The largest magnitude's bit pattern: for IEEE numbers, |x| orders as its bits without the sign
// (an inf is the all-ones exponent with a zero mantissa, a NaN anything above it).
std::uint32_t max_abs_bits(std::span<const float> v) {
  std::uint32_t m = 0;
  for (const float x : v) m = std::max(m, std::bit_cast<std::uint32_t>(x) & 0x7fffffffu);
  return m;
}

std::uint64_t max_abs_bits(std::span<const double> v) {
  std::uint64_t m = 0;
  for (const double x : v)
    m = std::max(m, std::bit_cast<std::uint64_t>(x) & ~(std::uint64_t{1} << 63));
  return m;
}

// The code of a finite magnitude m > 0: e with 2^(e-1) <= m < 2^e (frexp's exponent).
std::int64_t exponent_code(double m) {
  int e = 0;
  std::frexp(m, &e);
  return e;
}

}  // namespace

int ceil_log2(std::int64_t terms) {
  if (terms < 1) throw Error("internal: ceil_log2(" + std::to_string(terms) + ")");
  int l = 0;
  while ((std::int64_t{1} << l) < terms) ++l;
  return l;
}

std::int64_t magnitude_code(std::span<const float> values) {
  const std::uint32_t m = max_abs_bits(values);
  if (m == 0) return kAllZero;
  if (m >= 0x7f800000u) return kNonFiniteBase;  // the caller names the chunk (nonfinite_code_of)
  return exponent_code(static_cast<double>(std::bit_cast<float>(m)));
}

std::int64_t magnitude_code(std::span<const double> values) {
  const std::uint64_t m = max_abs_bits(values);
  if (m == 0) return kAllZero;
  if (m >= 0x7ff0000000000000ull) return kNonFiniteBase;
  return exponent_code(std::bit_cast<double>(m));
}

std::int64_t nonfinite_code(std::int64_t chunk, bool nan) {
  if (chunk < 0 || chunk >= kMaxTerms)
    throw Error("internal: nonfinite_code for chunk " + std::to_string(chunk));
  return kNonFiniteBase + 2 * (kMaxTerms - chunk) + (nan ? 1 : 0);
}

bool is_nonfinite(std::int64_t code) {
  return code >= kNonFiniteBase;
}

std::int64_t nonfinite_chunk(std::int64_t code) {
  return kMaxTerms - (code - kNonFiniteBase) / 2;
}

const char* nonfinite_kind(std::int64_t code) {
  return (code - kNonFiniteBase) % 2 == 1 ? "NaN" : "inf";
}

std::int64_t nonfinite_code_of(std::span<const float> values, std::int64_t chunk) {
  return nonfinite_code(chunk, max_abs_bits(values) > 0x7f800000u);
}

std::int64_t nonfinite_code_of(std::span<const double> values, std::int64_t chunk) {
  return nonfinite_code(chunk, max_abs_bits(values) > 0x7ff0000000000000ull);
}

int shift_for(std::int64_t code, std::int64_t terms) {
  if (terms < 1 || terms > kMaxTerms)
    throw Error("internal: a fixed-point sum of " + std::to_string(terms) + " terms (1.." +
                std::to_string(kMaxTerms) + ")");
  if (is_nonfinite(code)) throw Error("internal: a fixed-point scale for non-finite values");
  if (code == kAllZero) return 0;
  // |value| < 2^e becomes |value * 2^shift| < 2^(62 - L): rounding reaches at most 2^(62 - L),
  // and terms <= 2^L of those sum to at most 2^62.
  return static_cast<int>(62 - ceil_log2(terms) - code);
}

void add_fixed(std::span<const float> values, int shift, std::span<std::int64_t> acc) {
  if (values.size() != acc.size())
    throw Error("internal: add_fixed of " + std::to_string(values.size()) + " values into " +
                std::to_string(acc.size()));
  // A float times a power of two is exact in double for shifts up to 62 + 149 (the smallest float
  // is 2^-149), which the scale never exceeds.
  const double f = std::ldexp(1.0, shift);
  for (std::size_t i = 0; i < values.size(); ++i)
    acc[i] += round_to_int(static_cast<double>(values[i]) * f);
}

void add_fixed(std::span<const double> values, int shift, std::span<std::int64_t> acc) {
  if (values.size() != acc.size())
    throw Error("internal: add_fixed of " + std::to_string(values.size()) + " values into " +
                std::to_string(acc.size()));
  // Doubles reach 2^-1074, whose shift (up to 1136) has no double factor: ldexp scales exactly.
  for (std::size_t i = 0; i < values.size(); ++i)
    acc[i] += round_to_int(std::ldexp(values[i], shift));
}

void from_fixed(std::span<const std::int64_t> acc, int shift, std::span<float> out) {
  if (acc.size() != out.size())
    throw Error("internal: from_fixed of " + std::to_string(acc.size()) + " values into " +
                std::to_string(out.size()));
  const double f = std::ldexp(1.0, -shift);  // shift <= 211 here: a normal double
  for (std::size_t i = 0; i < acc.size(); ++i)
    out[i] = static_cast<float>(static_cast<double>(acc[i]) * f);
}

void from_fixed(std::span<const std::int64_t> acc, int shift, std::span<double> out) {
  if (acc.size() != out.size())
    throw Error("internal: from_fixed of " + std::to_string(acc.size()) + " values into " +
                std::to_string(out.size()));
  for (std::size_t i = 0; i < acc.size(); ++i)
    out[i] = std::ldexp(static_cast<double>(acc[i]), -shift);
}

}  // namespace ddp::sync::fixed
