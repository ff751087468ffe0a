// Device assignment: see include/ddp/backend/device_assign.hpp. Pure functions, no CUDA.
#include "ddp/backend/device_assign.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

#include "ddp/error.hpp"

namespace ddp::backend {
namespace {

std::string visible_note(const std::optional<std::string>& env) {
  if (!env) return " (CUDA_VISIBLE_DEVICES is not set)";
  return " (CUDA_VISIBLE_DEVICES='" + *env + "')";
}

// "ranks 4-7" / "rank 4"
std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_rank_ranges(ranks);
}

}  // namespace

std::string format_rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string cuda_device_string(int device) {
  return "cuda:" + std::to_string(device);
}

int assign_device(const DeviceRequest& r) {
  if (r.local_size < 1 || r.local_rank < 0 || r.local_rank >= r.local_size)
    throw Error("internal: device assignment for local rank " + std::to_string(r.local_rank) +
                " of " + std::to_string(r.local_size));
  const std::vector<int> host_ranks =
      r.host_ranks.empty() ? std::vector<int>{r.rank} : r.host_ranks;
  if (r.visible_devices <= 0)
    throw ConfigError("host " + r.host + ": rank " + std::to_string(r.rank) + " sees no GPU" +
                      visible_note(r.cuda_visible_devices) +
                      "; make the GPUs visible to it (srun --gpus-per-task=1 or --gpus-per-node, "
                      "CUDA_VISIBLE_DEVICES) or set runtime.device = \"cpu\"");
  // The host's ranks that see the same GPUs as this one compete for them; ranks bound to other
  // GPUs (srun --gpus-per-task=2: each task its own pair, numbered 0 and 1 in each) do not.
  int position = r.local_rank, sharing = r.local_size;
  std::vector<int> sharing_ranks = host_ranks;
  const bool sets_known = !r.host_device_sets.empty();
  if (sets_known) {
    if (std::ssize(r.host_device_sets) != r.local_size)
      throw Error("internal: " + std::to_string(r.host_device_sets.size()) +
                  " visible-device sets for " + std::to_string(r.local_size) + " local ranks");
    const std::string& mine = r.host_device_sets[static_cast<std::size_t>(r.local_rank)];
    position = 0;
    sharing = 0;
    sharing_ranks.clear();
    for (int i = 0; i < r.local_size; ++i) {
      if (r.host_device_sets[static_cast<std::size_t>(i)] != mine) continue;
      if (i < r.local_rank) ++position;
      ++sharing;
      if (i < std::ssize(r.host_ranks))
        sharing_ranks.push_back(r.host_ranks[static_cast<std::size_t>(i)]);
    }
    if (sharing_ranks.empty()) sharing_ranks.push_back(r.rank);
  }
  // Bound to one GPU (Slurm binding or a per-rank CUDA_VISIBLE_DEVICES): that one. Whether
  // another rank got the same GPU is check_distinct_devices' question.
  if (r.visible_devices == 1) return 0;
  if (position < r.visible_devices) return position;
  const std::string n_gpus = std::to_string(r.visible_devices);
  const bool subset = sets_known && sharing < r.local_size;
  throw ConfigError("host " + r.host + " runs " + std::to_string(sharing) + " ranks (" +
                    ranks_phrase(sharing_ranks) + ")" +
                    (subset ? " that see the same " + n_gpus + " GPUs"
                            : " but they see only " + n_gpus + " GPUs") +
                    visible_note(r.cuda_visible_devices) + ": one GPU per rank is needed (rank " +
                    std::to_string(r.rank) + " has none); start at most " + n_gpus +
                    " ranks on this host (srun --ntasks-per-node=" + n_gpus +
                    ", mpirun --map-by ppr:" + n_gpus +
                    ":node), make more GPUs visible, or set runtime.device = \"cpu\"");
}

void check_distinct_devices(const std::vector<DeviceClaim>& claims) {
  // host -> uuid -> claims, hosts in order of first appearance.
  std::vector<std::string> hosts;
  std::map<std::string, std::map<std::string, std::vector<const DeviceClaim*>>> by_host;
  for (const auto& c : claims) {
    if (!by_host.count(c.host)) hosts.push_back(c.host);
    by_host[c.host][c.uuid].push_back(&c);
  }
  std::string problems;
  for (const auto& host : hosts) {
    for (const auto& [uuid, group] : by_host[host]) {
      if (group.size() < 2) continue;
      std::vector<int> ranks;
      std::string devices;
      for (const auto* c : group) {
        ranks.push_back(c->rank);
        const std::string d = cuda_device_string(c->device);
        if (devices.find(d) == std::string::npos) devices += (devices.empty() ? "" : "/") + d;
      }
      const std::string name = group.front()->name.empty() ? "" : group.front()->name + ", ";
      if (!problems.empty()) problems += "; ";
      problems += "host " + host + ": " + ranks_phrase(ranks) + " would share one GPU (" + name +
                  uuid + ", " + devices + " as they see it)";
    }
  }
  if (!problems.empty())
    throw ConfigError(problems +
                      ". Each rank needs a GPU of its own: give every rank its own GPU (srun "
                      "--gpus-per-task=1, or CUDA_VISIBLE_DEVICES per rank), make all of the "
                      "host's GPUs visible to every rank, or start fewer ranks per host");
}

}  // namespace ddp::backend
