// The fixed-point sum of reproducible mode: against a long-double reference (the error at most
// 2^-40 of the largest magnitude), independent of the order and grouping of the terms to the bit,
// no overflow whatever the magnitudes (adversarial ones included), NaN and inf detected and named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ddp/error.hpp"
#include "ddp/rng.hpp"
#include "ddp/sync/fixed_point_sum.hpp"

namespace ddp::sync::fixed {
namespace {

// `terms` vectors of `n` values each.
using Terms = std::vector<std::vector<float>>;

std::int64_t agreed_code(const Terms& t) {
  std::int64_t code = kAllZero;
  for (const auto& v : t) code = std::max(code, magnitude_code(v));
  return code;
}

// The fixed-point sum of the terms, element by element, exactly (long double holds an int64), and
// as from_fixed converts it back.
struct Sums {
  std::vector<long double> exact;
  std::vector<double> converted;
};
Sums fixed_sum(const Terms& t) {
  const std::size_t n = t.at(0).size();
  const int shift = shift_for(agreed_code(t), static_cast<std::int64_t>(t.size()));
  std::vector<std::int64_t> acc(n, 0);
  for (const auto& v : t) add_fixed(v, shift, acc);
  Sums s{std::vector<long double>(n), std::vector<double>(n)};
  for (std::size_t i = 0; i < n; ++i)
    s.exact[i] = std::ldexp(static_cast<long double>(acc[i]), -shift);
  from_fixed(acc, shift, s.converted);
  return s;
}

// Checks the fixed-point sum against long double: |error| <= 2^-40 * the largest magnitude.
void expect_close_to_reference(const Terms& t) {
  const std::size_t n = t.at(0).size();
  long double largest = 0;
  for (const auto& v : t)
    for (const float x : v) largest = std::max(largest, std::fabs(static_cast<long double>(x)));
  const Sums got = fixed_sum(t);
  for (std::size_t i = 0; i < n; ++i) {
    long double ref = 0;
    for (const auto& v : t) ref += static_cast<long double>(v[i]);
    ASSERT_LE(std::fabs(got.exact[i] - ref), std::ldexp(largest, -40))
        << "element " << i << " of " << t.size() << " terms: " << static_cast<double>(got.exact[i])
        << " vs " << static_cast<double>(ref);
    // Converting back rounds once more, to double's precision of the sum.
    ASSERT_LE(std::fabs(static_cast<long double>(got.converted[i]) - got.exact[i]),
              std::ldexp(std::fabs(got.exact[i]), -52));
  }
}

Terms random_terms(std::size_t terms, std::size_t n, std::uint64_t seed, int spread) {
  CounterRng rng(seed);
  Terms t(terms, std::vector<float>(n));
  for (auto& v : t)
    for (float& x : v) {
      // Magnitudes over 2^-spread .. 2^spread, both signs, some exact zeros.
      const int e =
          static_cast<int>(rng.next_below(static_cast<std::uint64_t>(2 * spread + 1))) - spread;
      const float m = static_cast<float>(std::ldexp(rng.next_double(), e));
      x = rng.next_below(10) == 0 ? 0.0f : (rng.next_below(2) ? m : -m);
    }
  return t;
}

TEST(FixedPointSum, CeilLog2) {
  EXPECT_EQ(ceil_log2(1), 0);
  EXPECT_EQ(ceil_log2(2), 1);
  EXPECT_EQ(ceil_log2(3), 2);
  EXPECT_EQ(ceil_log2(2048), 11);
  EXPECT_EQ(ceil_log2(2049), 12);
  EXPECT_THROW(ceil_log2(0), Error);
}

TEST(FixedPointSum, MagnitudeCodes) {
  EXPECT_EQ(magnitude_code(std::vector<float>{}), kAllZero);
  EXPECT_EQ(magnitude_code(std::vector<float>{0.0f, -0.0f}), kAllZero);
  EXPECT_EQ(magnitude_code(std::vector<float>{0.5f}), 0);   // 2^-1 <= 0.5 < 2^0
  EXPECT_EQ(magnitude_code(std::vector<float>{-1.0f}), 1);  // 2^0 <= 1 < 2^1
  EXPECT_EQ(magnitude_code(std::vector<float>{3.0f, -0.1f}), 2);
  EXPECT_EQ(magnitude_code(std::vector<float>{FLT_MAX}), 128);
  EXPECT_EQ(magnitude_code(std::vector<float>{std::numeric_limits<float>::denorm_min()}), -148);
  EXPECT_EQ(magnitude_code(std::vector<double>{std::numeric_limits<double>::denorm_min()}), -1073);
  EXPECT_EQ(magnitude_code(std::vector<double>{DBL_MAX}), 1024);
}

TEST(FixedPointSum, MatchesLongDoubleWithin2ToTheMinus40OfTheLargest) {
  for (const std::size_t terms : {1u, 2u, 3u, 7u, 64u, 500u, 2048u})
    for (const int spread : {0, 10, 60}) {
      SCOPED_TRACE(::testing::Message() << terms << " terms, spread 2^" << spread);
      expect_close_to_reference(
          random_terms(terms, 64, terms * 131 + static_cast<std::size_t>(spread), spread));
    }
}

TEST(FixedPointSum, TheSameBitsInAnyOrderAndGrouping) {
  const Terms t = random_terms(24, 100, 7, 20);
  const int shift = shift_for(agreed_code(t), 24);
  // One place adds all 24 in order; another adds them backwards; "ranks" add groups of 5, 11 and
  // 8 on their own and then sum their integers.
  std::vector<std::int64_t> all(100, 0), back(100, 0), g1(100, 0), g2(100, 0), g3(100, 0);
  for (const auto& v : t) add_fixed(v, shift, all);
  for (auto it = t.rbegin(); it != t.rend(); ++it) add_fixed(*it, shift, back);
  for (std::size_t k = 0; k < t.size(); ++k) add_fixed(t[k], shift, k < 5 ? g1 : k < 16 ? g2 : g3);
  for (std::size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(all[i], back[i]);
    EXPECT_EQ(all[i], g3[i] + g1[i] + g2[i]);
  }
}

TEST(FixedPointSum, AdversarialMagnitudesCannotOverflow) {
  // The largest double below a power of two rounds up to 2^(62 - L) exactly: 2048 of them, all
  // of one sign, reach 2^62 and no further.
  for (const double sign : {1.0, -1.0}) {
    const std::vector<double> v{sign * std::nextafter(1.0, 0.0)};
    const int shift = shift_for(magnitude_code(v), kMaxTerms);
    std::vector<std::int64_t> acc(1, 0);
    for (std::int64_t k = 0; k < kMaxTerms; ++k) add_fixed(v, shift, acc);
    EXPECT_EQ(acc[0], static_cast<std::int64_t>(sign) * (std::int64_t{1} << 62));
  }
  // The largest floats, all of one sign, over every term.
  for (const float big : {FLT_MAX, std::nextafter(1.0f, 0.0f), std::nextafter(0x1p-100f, 0.0f)}) {
    SCOPED_TRACE(big);
    for (const float sign : {1.0f, -1.0f}) {
      Terms t(static_cast<std::size_t>(kMaxTerms), std::vector<float>{sign * big, 0x1p-149f});
      const int shift = shift_for(agreed_code(t), kMaxTerms);
      std::vector<std::int64_t> acc(2, 0);
      for (const auto& v : t) add_fixed(v, shift, acc);
      EXPECT_LE(std::abs(acc[0]), std::int64_t{1} << 62);
      std::vector<double> out(2);
      from_fixed(acc, shift, out);
      const long double ref = static_cast<long double>(kMaxTerms) * (sign * big);
      EXPECT_LE(std::fabs(static_cast<long double>(out[0]) - ref),
                std::ldexp(static_cast<long double>(big), -40));
    }
  }
  // The smallest doubles and the largest: the scale reaches them too.
  const std::vector<double> tiny(3, std::numeric_limits<double>::denorm_min());
  const std::vector<double> huge(3, DBL_MAX);
  for (const auto* v : {&tiny, &huge}) {
    const int shift = shift_for(magnitude_code(*v), kMaxTerms);
    std::vector<std::int64_t> acc(3, 0);
    for (std::int64_t k = 0; k < kMaxTerms; ++k) add_fixed(*v, shift, acc);
    std::vector<double> out(3);
    from_fixed(acc, shift, out);
    EXPECT_EQ(out[0], (*v)[0] * static_cast<double>(kMaxTerms)) << (*v)[0];
  }
  // A mix over the whole float range: the tiny ones vanish below the quantum, the sum holds.
  Terms mixed = random_terms(kMaxTerms, 16, 99, 120);
  mixed[5][3] = FLT_MAX;
  expect_close_to_reference(mixed);
}

TEST(FixedPointSum, TermCountsBeyondTheBoundAreRefused) {
  EXPECT_THROW(shift_for(0, kMaxTerms + 1), Error);
  EXPECT_THROW(shift_for(0, 0), Error);
  EXPECT_EQ(shift_for(kAllZero, 5), 0);
}

TEST(FixedPointSum, NanAndInfAreDetectedAndNamed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> with_nan{1.0f, nan}, with_inf{-inf, 2.0f};
  EXPECT_TRUE(is_nonfinite(magnitude_code(with_nan)));
  EXPECT_TRUE(is_nonfinite(magnitude_code(with_inf)));
  EXPECT_TRUE(
      is_nonfinite(magnitude_code(std::vector<double>{-std::numeric_limits<double>::infinity()})));
  const std::int64_t a = nonfinite_code_of(with_nan, 7), b = nonfinite_code_of(with_inf, 3);
  EXPECT_EQ(nonfinite_chunk(a), 7);
  EXPECT_STREQ(nonfinite_kind(a), "NaN");
  EXPECT_EQ(nonfinite_chunk(b), 3);
  EXPECT_STREQ(nonfinite_kind(b), "inf");
  // The max over every contributor's codes is non-finite and names the lowest chunk that held one.
  const std::int64_t agreed = std::max({magnitude_code(std::vector<float>{FLT_MAX}), a, b});
  EXPECT_TRUE(is_nonfinite(agreed));
  EXPECT_EQ(nonfinite_chunk(agreed), 3);
  EXPECT_THROW(shift_for(agreed, 4), Error);
  // Within one chunk a NaN outranks an inf.
  EXPECT_STREQ(nonfinite_kind(std::max(nonfinite_code(2, false), nonfinite_code(2, true))), "NaN");
}

}  // namespace
}  // namespace ddp::sync::fixed
