// restore: checks the whole snapshot against the model and optimizer first (collecting every
// difference into one message), then copies; nothing changes unless everything fits.
#include <algorithm>
#include <optional>
#include <set>

#include "ddp/ckpt/init_weights.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "snapshot_layout.hpp"

namespace ddp::ckpt {
namespace {

// Internal misuse, not a user error: restoring straight into device memory is not supported.
void require_host_for_restore(const Tensor& t, const std::string& what) {
  if (t.device() != Device::cpu)
    throw Error("internal: restoring " + what + " on the GPU; restore on the host, then copy");
}

std::string shape_str(const std::vector<std::int64_t>& dims) {
  return Shape(dims).str();
}

std::string join_names(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

void check_model(const Snapshot& s, const std::vector<layout::Entry>& entries,
                 std::vector<std::string>& problems, std::set<std::string>& fitting) {
  std::map<std::string, const std::vector<std::int64_t>*> in_snapshot;
  for (const auto& [name, shape] : s.shapes) in_snapshot[name] = &shape;
  std::set<std::string> in_model;
  for (const auto& e : entries) {
    in_model.insert(e.name);
    const auto& model_shape = e.tensor->tensor.shape().dims();
    const auto it = in_snapshot.find(e.name);
    if (it == in_snapshot.end()) {
      problems.push_back("missing from the snapshot: " + e.name + " (" + shape_str(model_shape) +
                         ")");
    } else if (*it->second != model_shape) {
      problems.push_back(e.name + ": snapshot " + shape_str(*it->second) + ", model " +
                         shape_str(model_shape));
    } else if (const auto data = s.model.find(e.name);
               data == s.model.end() ||
               data->second.size() != static_cast<std::size_t>(e.tensor->tensor.numel())) {
      problems.push_back(e.name + ": the snapshot holds no data of that shape");
    } else {
      fitting.insert(e.name);
    }
  }
  for (const auto& [name, shape] : s.shapes)
    if (!in_model.count(name))
      problems.push_back("not in the model: " + name + " (" + shape_str(shape) + ")");
}

// Every parameter with state in this run's optimizer (not frozen) has it in the snapshot, and
// no other: the snapshot's run froze the same parameters.
void check_optimizer(const Snapshot& s, const std::vector<layout::Entry>& entries,
                     const optim::Optimizer& opt,
                     const std::vector<std::pair<std::string, Tensor>>& state,
                     const std::set<std::string>& fitting, std::vector<std::string>& problems) {
  std::set<std::string> ours, theirs;
  for (const auto& [name, t] : state) ours.insert(name);
  for (const auto& [name, tensors] : s.optimizer) theirs.insert(name);
  if (ours != theirs) {
    problems.push_back("optimizer state: the snapshot ('" + s.optimizer_name + "') holds " +
                       join_names(theirs) + ", this run's optimizer holds " + join_names(ours));
    return;
  }
  for (const auto& [name, t] : state) {
    const auto& tensors = s.optimizer.at(name);
    for (const auto& e : entries) {
      if (!e.is_param || !fitting.count(e.name)) continue;  // already reported for the model
      const auto at = opt.state_offset(e.tensor->offset);
      const auto it = tensors.find(e.name);
      if (!at) {
        if (it != tensors.end())
          problems.push_back("optimizer state " + name + " of " + e.name +
                             ": the snapshot has it, but this run freezes it (train.freeze must "
                             "stay as the run began)");
      } else if (it == tensors.end() ||
                 it->second.size() != static_cast<std::size_t>(e.tensor->tensor.numel())) {
        problems.push_back("optimizer state " + name + " of " + e.name +
                           ": missing (frozen in the run that wrote the snapshot? train.freeze "
                           "must stay as the run began)");
      } else if (*at + it->second.size() > static_cast<std::size_t>(t.numel())) {
        throw Error("internal: optimizer state '" + name + "' is shorter than the parameters");
      }
    }
  }
}

}  // namespace

void restore_average(const Snapshot& s, const nn::Model& model, std::span<float> params,
                     std::span<float> buffers) {
  if (params.size() != model.host_params().size() || buffers.size() != model.host_buffers().size())
    throw Error("internal: the moving average's buffers are not laid out as the model's");
  const auto entries = layout::model_entries(model);
  std::vector<std::string> problems;
  for (const auto& e : entries) {
    const auto it = s.ema.find(e.name);
    if (it == s.ema.end())
      problems.push_back("missing from /ema: " + e.name);
    else if (it->second.size() != static_cast<std::size_t>(e.tensor->tensor.numel()))
      problems.push_back(e.name + ": /ema holds " + std::to_string(it->second.size()) +
                         " values, the model " + std::to_string(e.tensor->tensor.numel()));
  }
  if (!problems.empty()) {
    std::string msg = "snapshot '" + s.source.string() +
                      "': its moving average of the weights (/ema) does not fit this model:";
    for (const auto& p : problems) msg += "\n  " + p;
    throw ConfigError(msg);
  }
  for (const auto& e : entries) {
    const auto& src = s.ema.at(e.name);
    float* dst = (e.is_param ? params : buffers).data() + e.tensor->offset;
    std::copy(src.begin(), src.end(), dst);
  }
}

void restore(const Snapshot& s, nn::Model& model, optim::Optimizer& opt) {
  if (s.meta.kind == kWeightsKind)
    throw ConfigError(weights_file_not_resumable(s.source.string(), s.meta));
  const auto entries = layout::model_entries(model);
  const auto state = opt.state();
  for (const auto& e : entries) require_host_for_restore(e.tensor->tensor, e.name);
  for (const auto& [name, t] : state) require_host_for_restore(t, "optimizer state '" + name + "'");
  std::vector<std::string> problems;
  std::set<std::string> fitting;
  check_model(s, entries, problems, fitting);
  check_optimizer(s, entries, opt, state, fitting, problems);
  if (!problems.empty()) {
    std::string msg = "snapshot '" + s.source.string() + "' does not fit this run (" +
                      std::to_string(problems.size()) + " difference" +
                      (problems.size() == 1 ? "" : "s") + "):";
    for (const auto& p : problems) msg += "\n  " + p;
    msg +=
        "\nresume with the model and optimizer the snapshot was written with (`ddp_train inspect "
        "FILE` shows them), or start in a new run directory";
    throw ConfigError(msg);
  }

  for (const auto& e : entries) {
    const auto& src = s.model.at(e.name);
    std::copy(src.begin(), src.end(), e.tensor->tensor.data());
  }
  for (const auto& [name, t] : state) {
    const auto& tensors = s.optimizer.at(name);
    for (const auto& e : entries) {
      const auto at = e.is_param ? opt.state_offset(e.tensor->offset) : std::nullopt;
      if (!at) continue;
      const auto& src = tensors.at(e.name);
      std::copy(src.begin(), src.end(), t.data() + *at);
    }
  }
  opt.set_steps_taken(s.optimizer_steps);
  // The snapshot went into the host mirrors: hand it to the backend (the GPU for a CUDA run).
  model.push_state();
  opt.push_state();
}

}  // namespace ddp::ckpt
