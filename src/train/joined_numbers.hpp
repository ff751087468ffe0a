#pragma once
// A list of integers as text ("2, 3, 4"; "64+64+32"), for the run's banner and messages.
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::train {

inline std::string joined_numbers(const std::vector<std::int64_t>& v, const char* sep = ", ") {
  std::string out;
  for (const auto x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
  return out;
}

}  // namespace ddp::train
