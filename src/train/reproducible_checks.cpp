#include "ddp/train/reproducible_checks.hpp"

#include <fstream>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/runtime/gather.hpp"

namespace ddp::train {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) break;
      const auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "";
}

std::string describe(int rank, const ComputeKind& k) {
  return "rank " + std::to_string(rank) + " " + k.isa +
         (k.cpu_model.empty() ? "" : " (" + k.cpu_model + ")");
}

}  // namespace

std::string compute_kind_mismatch(const std::vector<ComputeKind>& kinds) {
  std::string list;
  for (std::size_t r = 1; r < kinds.size(); ++r)
    if (kinds[r].isa != kinds[0].isa || kinds[r].cpu_model != kinds[0].cpu_model)
      list += ", " + describe(static_cast<int>(r), kinds[r]);
  if (list.empty()) return "";
  return "train.reproducible: the ranks run on different CPUs (" + describe(0, kinds[0]) + list +
         "): oneDNN chooses its kernels by the instruction set and tunes them to the CPU, so the "
         "same chunk would round differently on them and the weights would depend on which rank "
         "took it; run every rank on the same kind of CPU (a homogeneous partition), or leave "
         "train.reproducible off";
}

void check_reproducible(const backend::Backend& be, comm::Communicator& comm) {
  if (be.device() != Device::cpu)
    throw ConfigError(
        "train.reproducible: not supported on GPUs yet (the chunks' exact sums run on the CPU "
        "backend only); use runtime.device = \"cpu\", or leave train.reproducible off");
  runtime::RecordWriter w;
  w.put(backend::cpu_isa_name()).put(cpu_model_name());
  std::vector<ComputeKind> kinds;
  for (const auto& rec : runtime::allgather_strings(w.bytes(), comm)) {
    runtime::RecordReader in(rec);
    ComputeKind k;
    k.isa = in.get_str();
    k.cpu_model = in.get_str();
    kinds.push_back(std::move(k));
  }
  if (const std::string m = compute_kind_mismatch(kinds); !m.empty()) throw ConfigError(m);
}

}  // namespace ddp::train
