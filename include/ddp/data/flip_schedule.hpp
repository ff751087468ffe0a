#pragma once
// data.flip = "alternating" (airbench's flip scheme): each sample's flip is drawn once, from the
// seed, and inverted every other epoch, so over any two consecutive epochs a sample is seen once
// as it is and once mirrored; random flips leave a quarter of the samples unmirrored (or mirrored)
// in both.
#include <cstdint>

namespace ddp::data {

// Whether sample `index` is flipped in `epoch`: a coin drawn from (seed, index) alone, inverted in
// odd epochs. A pure function of its arguments (no rank, thread or batch enters it).
bool alternating_flip(std::uint64_t seed, std::uint64_t epoch, std::int64_t index);

}  // namespace ddp::data
