#include "ddp/data/flip_schedule.hpp"

// rng.hpp uses unsigned __int128, which -Wpedantic flags; it is a GCC/Clang extension we rely on.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include "ddp/rng.hpp"
#pragma GCC diagnostic pop

namespace ddp::data {

bool alternating_flip(std::uint64_t seed, std::uint64_t epoch, std::int64_t index) {
  const bool coin = (hash_words(seed, static_cast<std::uint64_t>(RngStream::flip),
                                static_cast<std::uint64_t>(index)) >>
                     63) != 0;
  return coin != ((epoch & 1u) != 0);
}

}  // namespace ddp::data
