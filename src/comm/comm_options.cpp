#include "ddp/comm/comm_options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "ddp/error.hpp"

namespace ddp::comm {
namespace {

std::optional<long long> parse_int(const char* text) {
  const std::string s(text);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<double> parse_timeout_s(const char* text, const char* what) {
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v) || v < 0)
    throw ConfigError(std::string(what) + " = '" + text +
                      "': expected a number of seconds >= 0 (0 waits forever)");
  return v;
}

CommOptions comm_options_from_env(double timeout_s) {
  CommOptions o;
  o.timeout_s = timeout_s;
  if (auto t = parse_timeout_s(std::getenv("DDP_COMM_TIMEOUT_S"), "DDP_COMM_TIMEOUT_S"))
    o.timeout_s = *t;
  return o;
}

std::optional<StallFault> parse_stall_fault(const char* rank, const char* at) {
  if (!rank || !*rank) return std::nullopt;
  StallFault f;
  const auto r = parse_int(rank);
  if (!r || *r < 0 || *r > 1 << 30)
    throw ConfigError(std::string("DDP_FAULT_STALL_RANK = '") + rank +
                      "': expected a rank number (test-only fault injection)");
  f.rank = static_cast<int>(*r);
  if (at && *at) {
    const auto k = parse_int(at);
    if (!k || *k < 1)
      throw ConfigError(std::string("DDP_FAULT_STALL_AT = '") + at +
                        "': expected a collective index >= 1 (test-only fault injection)");
    f.at = *k;
  }
  return f;
}

std::optional<StallFault> stall_fault_from_env() {
  return parse_stall_fault(std::getenv("DDP_FAULT_STALL_RANK"), std::getenv("DDP_FAULT_STALL_AT"));
}

}  // namespace ddp::comm
