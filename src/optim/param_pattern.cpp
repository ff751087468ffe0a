#include "ddp/optim/param_pattern.hpp"

#include <algorithm>

#include "ddp/error.hpp"

namespace ddp::optim {
namespace {

// Short words for layer types, as the configuration's users say them.
std::string_view kind_alias(std::string_view pattern) {
  if (pattern == "bn") return "batchnorm";
  if (pattern == "conv") return "conv2d";
  return pattern;
}

bool is_kind(std::string_view pattern) {
  const auto k = kind_alias(pattern);
  return k == "batchnorm" || k == "conv2d" || k == "linear";
}

// fnmatch-style: * any run of characters (dots included), ? one character.
bool glob(std::string_view p, std::string_view s) {
  std::size_t pi = 0, si = 0, star = std::string_view::npos, from = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi;
      ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      from = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++from;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace

std::vector<ParamInfo> param_infos(const nn::Model& model) {
  std::vector<ParamInfo> out;
  const auto& named = model.named_params();
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& p = named[i];
    out.push_back({p.name, model.layer(p.layer).spec().type, p.offset, 0, model.is_frozen(i)});
  }
  std::sort(out.begin(), out.end(),
            [](const ParamInfo& a, const ParamInfo& b) { return a.begin < b.begin; });
  const std::size_t total = model.host_params().size();
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i].end = i + 1 < out.size() ? out[i + 1].begin : total;
  return out;
}

bool matches(std::string_view pattern, const ParamInfo& p) {
  if (pattern.empty()) return false;
  if (is_kind(pattern) && p.kind == kind_alias(pattern)) return true;
  if (pattern.find_first_of("*?") != std::string_view::npos) return glob(pattern, p.name);
  const std::string_view name = p.name;
  return name == pattern || (name.starts_with(pattern) && name[pattern.size()] == '.');
}

std::vector<bool> select(const std::vector<std::string>& patterns,
                         const std::vector<ParamInfo>& params, const std::string& key) {
  std::vector<bool> out(params.size(), false);
  std::string unmatched;
  int count = 0;
  for (const auto& pattern : patterns) {
    bool any = false;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (matches(pattern, params[i])) out[i] = any = true;
    if (any) continue;
    unmatched += (unmatched.empty() ? "'" : ", '") + pattern + "'";
    ++count;
  }
  if (!unmatched.empty()) {
    std::string names;
    for (std::size_t i = 0; i < params.size() && i < 8; ++i)
      names += (i ? ", " : "") + params[i].name;
    if (params.size() > 8) names += ", ... (ddp_train inspect SNAPSHOT lists them all)";
    throw ConfigError(key + ": " + unmatched + " match" + (count == 1 ? "es" : "") +
                      " no parameter of the model (a pattern is a name or a prefix at a dot, a "
                      "glob with * or ?, or a kind: bn, conv, linear); its parameters: " +
                      names);
  }
  return out;
}

}  // namespace ddp::optim
