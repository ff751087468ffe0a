// inspect: what a snapshot holds, for `ddp_train inspect FILE`: a summary, then every field of
// the field table as stored, the tensors and the metrics.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "ddp/ckpt/snapshot.hpp"
#include "snapshot_fields.hpp"

namespace ddp::ckpt {
namespace {

// 64-bit FNV-1a: standard, and a few lines to recompute anywhere.
std::uint64_t fnv1a64(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

}  // namespace

std::string inspect(const std::filesystem::path& file) {
  const Snapshot s = read_snapshot(file);
  const auto& m = s.meta;
  const auto& p = m.position;
  std::ostringstream os;
  char digest[24];
  std::snprintf(digest, sizeof digest, "%016llx",
                static_cast<unsigned long long>(fnv1a64(m.config_toml)));

  os << "snapshot      " << file.string() << "\n";
  if (m.kind == kWeightsKind)
    os << "weights file  imported from "
       << (m.imported_from.empty() ? std::string("(unknown)") : m.imported_from) << " by "
       << m.program_version
       << ": parameters and batch-norm statistics only (no optimizer state, training position or "
          "configuration); start a run from it with train.init, evaluate it with eval --config\n";
  os << "format        version " << m.format_version << ", written by ddp_train "
     << (m.program_version.empty() ? "(unknown version)" : m.program_version) << "\n";
  os << "position      epoch " << p.epoch << " completed";
  if (p.step_in_epoch > 0) os << " + step " << p.step_in_epoch << " of epoch " << p.epoch + 1;
  os << ", global step " << p.global_step << ", " << p.samples_seen << " samples seen\n";
  os << "seed          " << m.seed << "\n";
  os << "world size    " << m.world_size << " (resuming may use another)\n";
  if (!m.rank_shares.empty()) {
    os << "rank shares  ";
    for (const auto v : m.rank_shares) os << " " << v;
    os << " (samples of each global batch, rank 0 first)\n";
  }
  if (m.loss_scale > 0)
    os << "loss scale    " << m.loss_scale << " (" << m.loss_scale_good_steps
       << " good steps since it last changed)\n";
  os << "config        digest " << digest << " (FNV-1a 64 of " << m.config_toml.size()
     << " bytes of TOML; read it with h5dump -d /meta/config_toml)\n";
  os << "optimizer     " << (s.optimizer_name.empty() ? "(unnamed)" : s.optimizer_name) << ", "
     << s.optimizer_steps << " steps, state:";
  if (s.optimizer.empty()) os << " none";
  for (const auto& [name, tensors] : s.optimizer) os << " " << name;
  os << "\n";
  if (!s.ema.empty())
    os << "ema           " << s.ema.size() << " tensors under /ema, the moving average of the "
       << "weights after " << m.ema_updates << " updates (train.ema)\n";

  // Every field of the table as stored, so that a new field shows without a line here.
  const auto& fields = snapshot_fields();
  std::size_t width = 0;
  for (const Field& f : fields)
    width = std::max(width, std::strlen(f.group) + 1 + std::strlen(f.name));
  os << "fields        " << fields.size() << " in /meta and /optimizer\n";
  for (const Field& f : fields) {
    const std::string path = std::string(f.group) + "/" + f.name;
    os << "  " << path << std::string(width - path.size() + 2, ' ') << f.value_text(s) << "\n";
  }

  std::int64_t values = 0;
  width = 0;
  for (const auto& [name, shape] : s.shapes) {
    values += Shape(shape).numel();
    width = std::max(width, name.size());
  }
  os << "tensors       " << s.shapes.size() << " (" << values << " values)\n";
  for (const auto& [name, shape] : s.shapes)
    os << "  " << name << std::string(width - name.size() + 2, ' ') << Shape(shape).str() << "\n";

  std::istringstream lines(m.metrics_jsonl);
  std::vector<std::string> metrics;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) metrics.push_back(line);
  os << "metrics       " << metrics.size() << " line" << (metrics.size() == 1 ? "" : "s")
     << " of metrics.jsonl\n";
  for (const auto& line : metrics) os << "  " << line << "\n";
  return os.str();
}

}  // namespace ddp::ckpt
