// init_from: checks every tensor of the file against the model first (collecting every
// difference into one message), then copies; the head may differ and then keeps its
// initialisation.
#include "ddp/ckpt/init_weights.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "ddp/error.hpp"
#include "snapshot_layout.hpp"

namespace ddp::ckpt {
namespace {

// Shapes as torch prints them ([5, 512]), as the import script names them: the names are torch's.
std::string torch_shape(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string with_shape(const std::string& name, const std::vector<std::int64_t>& dims) {
  return name + " " + torch_shape(dims);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The layer the classifier is: the last one with parameters.
std::size_t head_layer(const nn::Model& model) {
  std::size_t head = 0;
  for (const auto& p : model.named_params()) head = std::max(head, p.layer);
  return head;
}

}  // namespace

std::string InitReport::line() const {
  std::string out = "init: " + std::to_string(loaded) + " tensors loaded from " + file + " (" +
                    (kind == kWeightsKind ? "weights imported from " + imported_from
                                          : std::string("a ddp_train snapshot")) +
                    ")";
  if (reinitialised.empty()) return out + ": every tensor of the model";
  return out + "; re-initialised (the classes differ): " + join(reinitialised) +
         "; left out of the file: " + join(left_out);
}

std::string weights_file_not_resumable(const std::string& file, const SnapshotMeta& meta) {
  return "'" + file + "' is a weights file (imported from " + meta.imported_from +
         "), not a run's snapshot: it holds no optimizer state or training position to resume "
         "from; start a new run from it with train.init = \"" +
         file + "\"";
}

InitReport init_from(const Snapshot& s, nn::Model& model) {
  const auto entries = layout::model_entries(model);
  const std::size_t head = head_layer(model);
  std::map<std::string, const std::vector<std::int64_t>*> in_file;
  for (const auto& [name, dims] : s.shapes) in_file[name] = &dims;

  std::vector<std::string> problems;
  std::set<std::string> in_model;
  bool head_differs = false;
  for (const auto& e : entries) {
    in_model.insert(e.name);
    const auto& dims = e.tensor->tensor.shape().dims();
    const auto it = in_file.find(e.name);
    if (it == in_file.end())
      problems.push_back("missing from the file: " + with_shape(e.name, dims));
    else if (*it->second == dims)
      continue;
    else if (e.tensor->layer == head)
      head_differs = true;
    else
      problems.push_back(e.name + ": the file has " + torch_shape(*it->second) +
                         ", the model needs " + torch_shape(dims));
  }
  for (const auto& [name, dims] : s.shapes)
    if (!in_model.count(name)) problems.push_back("not in the model: " + with_shape(name, dims));
  if (!problems.empty()) {
    std::string msg = "train.init = '" + s.source.string() + "' does not fit the model (" +
                      std::to_string(problems.size()) + " difference" +
                      (problems.size() == 1 ? "" : "s") + "):";
    for (const auto& p : problems) msg += "\n  " + p;
    msg +=
        "\nthe file must hold the same model (model.preset, model.stem, the input channels); only "
        "the classifier '" +
        model.layer(head).name() + "' may differ, and is then re-initialised";
    throw ConfigError(msg);
  }

  InitReport report;
  report.file = s.source.string();
  report.kind = s.meta.kind;
  report.imported_from = s.meta.imported_from;
  for (const auto& e : entries) {
    if (head_differs && e.tensor->layer == head) {
      report.reinitialised.push_back(with_shape(e.name, e.tensor->tensor.shape().dims()));
      report.left_out.push_back(with_shape(e.name, *in_file.at(e.name)));
      continue;
    }
    const auto& src = s.model.at(e.name);
    if (src.size() != static_cast<std::size_t>(e.tensor->tensor.numel()))
      throw Error("internal: " + e.name + " holds " + std::to_string(src.size()) + " values");
    std::copy(src.begin(), src.end(), e.tensor->tensor.data());
    ++report.loaded;
  }
  model.push_state();
  return report;
}

}  // namespace ddp::ckpt
