#include "ddp/optim/param_groups.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include "ddp/error.hpp"

namespace ddp::optim {
namespace {

// Appends [b, e) with these values, merged into the last run when it continues it.
void append(std::vector<UpdateRun>& runs, std::size_t b, std::size_t e, double lr_mult,
            double weight_decay) {
  if (b >= e) return;
  if (!runs.empty()) {
    UpdateRun& last = runs.back();
    if (last.end == b && last.lr_mult == lr_mult && last.weight_decay == weight_decay) {
      last.end = e;
      return;
    }
  }
  const std::size_t state =
      runs.empty() ? 0 : runs.back().state + (runs.back().end - runs.back().begin);
  runs.push_back({b, e, lr_mult, weight_decay, state});
}

std::string group_label(const GroupOptions& g, std::size_t index) {
  std::string out = "optim.groups[" + std::to_string(index + 1) + "]";
  if (g.line > 0) out += " (line " + std::to_string(g.line) + ")";
  return out;
}

}  // namespace

std::vector<UpdateRun> plan_update_runs(const Options& cfg, const std::vector<ParamInfo>& params) {
  // Which group each parameter takes: the first that matches. Every group must match something
  // (frozen parameters count), or its patterns hold a typo.
  std::vector<int> group(params.size(), -1);
  for (std::size_t g = 0; g < cfg.groups.size(); ++g) {
    const std::vector<bool> hit =
        select(cfg.groups[g].match, params, group_label(cfg.groups[g], g));
    for (std::size_t i = 0; i < params.size(); ++i)
      if (hit[i] && group[i] < 0) group[i] = static_cast<int>(g);
  }
  std::vector<UpdateRun> runs;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    if (i > 0 && p.begin < params[i - 1].end)
      throw Error("internal: parameter " + p.name + " overlaps " + params[i - 1].name);
    if (p.frozen) continue;
    double wd = cfg.weight_decay, lr_mult = 1.0;
    const bool exempt = p.kind == "batchnorm" || std::string_view(p.name).ends_with(".bias");
    if (cfg.no_decay_norm_bias && exempt) wd = 0.0;
    if (group[i] >= 0) {
      const GroupOptions& g = cfg.groups[static_cast<std::size_t>(group[i])];
      lr_mult = g.lr_mult;
      if (g.weight_decay) wd = *g.weight_decay;
    }
    append(runs, p.begin, p.end, lr_mult, wd);
  }
  return runs;
}

std::vector<UpdateRun> plain_update_runs(
    const Options& cfg, std::size_t count,
    std::vector<std::pair<std::size_t, std::size_t>> no_decay) {
  std::vector<UpdateRun> runs;
  if (!cfg.no_decay_norm_bias || cfg.weight_decay == 0.0) no_decay.clear();
  std::sort(no_decay.begin(), no_decay.end());
  std::size_t pos = 0;
  for (const auto& [b, e] : no_decay) {
    if (b < pos || e > count)
      throw Error("internal: no-decay parameter range [" + std::to_string(b) + ", " +
                  std::to_string(e) + ") overlaps another or lies outside the " +
                  std::to_string(count) + " parameters");
    append(runs, pos, b, 1.0, cfg.weight_decay);
    append(runs, b, e, 1.0, 0.0);
    pos = e;
  }
  append(runs, pos, count, 1.0, cfg.weight_decay);
  return runs;
}

}  // namespace ddp::optim
