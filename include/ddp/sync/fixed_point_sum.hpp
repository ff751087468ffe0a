#pragma once
// An exact, order-independent sum of floating-point values contributed by many places (the chunks
// of a global batch, on any threads of any ranks): every value becomes a 64-bit fixed-point
// integer under a power-of-two scale that all contributors agree on, the integers are summed
// (integer addition is associative: any order and any split over threads and ranks give the same
// bits), and the sum is converted back once.
//
// The scale comes from the largest magnitude among all the values summed: each contributor
// describes its values by a magnitude code (magnitude_code), the max of the codes (an all-reduce
// MAX) describes them all, and shift_for(code, terms) turns it into the scale. With `terms`
// values per element (L = ceil(log2 terms) <= kMaxTermsLog2) every |value| < 2^e becomes an
// integer of magnitude at most 2^(62 - L), so a sum of `terms` of them stays within 2^62 < 2^63:
// overflow is impossible by construction, whatever the values. The quantum is 2^(e - 62 + L),
// at most 2^(L - 61) = 2^-50 of the largest value, and the sum's error at most terms / 2 quanta,
// 2^(2L - 62) <= 2^-40 of the largest value.
//
// NaN and inf have no fixed-point form: their magnitude code says so (and which chunk held them),
// and the max of the codes carries that to every contributor, who can then name the tensor.
#include <cstdint>
#include <span>
#include <string>

namespace ddp::sync::fixed {

// The most values summed into one element: 2^11 = 2048 (chunks of a global batch).
inline constexpr int kMaxTermsLog2 = 11;
inline constexpr std::int64_t kMaxTerms = std::int64_t{1} << kMaxTermsLog2;

// A magnitude code: kAllZero for values that are all zero (or none); e for finite values whose
// largest magnitude m satisfies 2^(e-1) <= m < 2^e; a non-finite code (nonfinite_code) for values
// that hold a NaN or an inf. The max of two codes is the code of the two sets together.
inline constexpr std::int64_t kAllZero = -4096;
std::int64_t magnitude_code(std::span<const float> values);
std::int64_t magnitude_code(std::span<const double> values);

// Non-finite codes: above every finite one, ordered so that the max names the lowest chunk (and,
// within a chunk, a NaN before an inf). chunk: 0 .. kMaxTerms - 1.
std::int64_t nonfinite_code(std::int64_t chunk, bool nan);
bool is_nonfinite(std::int64_t code);
// What a non-finite code says: the chunk, and whether it was a NaN ("NaN") or an inf ("inf").
std::int64_t nonfinite_chunk(std::int64_t code);
const char* nonfinite_kind(std::int64_t code);
// The code of values a local magnitude_code found non-finite, as chunk `chunk`'s: nan or inf by
// looking again (rare: only on the failure path).
std::int64_t nonfinite_code_of(std::span<const float> values, std::int64_t chunk);
std::int64_t nonfinite_code_of(std::span<const double> values, std::int64_t chunk);

// The scale of an agreed finite code for `terms` values per element (1 .. kMaxTerms): values are
// multiplied by 2^shift and rounded to the nearest integer (ties to even). Error for a non-finite
// code or a term count out of range. kAllZero gives 0 (every value is 0).
int shift_for(std::int64_t code, std::int64_t terms);

// acc[i] += round(values[i] * 2^shift). The values must be finite with a magnitude code no larger
// than the one the shift was made for (then no integer overflows).
void add_fixed(std::span<const float> values, int shift, std::span<std::int64_t> acc);
void add_fixed(std::span<const double> values, int shift, std::span<std::int64_t> acc);
// out[i] = acc[i] * 2^-shift, rounded once to the output type's precision (through double).
void from_fixed(std::span<const std::int64_t> acc, int shift, std::span<float> out);
void from_fixed(std::span<const std::int64_t> acc, int shift, std::span<double> out);

// ceil(log2(terms)) for terms >= 1.
int ceil_log2(std::int64_t terms);

}  // namespace ddp::sync::fixed
