#pragma once
// Which GPU each rank uses, as pure functions (unit-tested without a GPU). One GPU per rank:
//
//  1. Every rank calls assign_device() with its host, its place among the ranks on that host
//     (runtime::Runtime::local_rank/local_size, from the host-name allgather), how many GPUs it
//     sees (cuda_device_count(), after CUDA_VISIBLE_DEVICES or Slurm's per-task GPU binding have
//     taken effect) and, gathered from the host's ranks, which GPUs each of them sees (their
//     UUIDs): ranks bound to different GPU sets (srun --gpus-per-task=2) do not compete.
//  2. Every rank looks up the UUID of the GPU it chose (cuda_device_info(d).uuid), the ranks
//     allgather (rank, host, device, uuid), and check_distinct_devices() rejects two ranks on one
//     physical GPU, which step 1 cannot see (two ranks that each see "one GPU" may see the same
//     one).
//
// Errors are ddp::ConfigError: the job is set up wrongly, and the message names the host, the
// ranks and what to change.
#include <optional>
#include <string>
#include <vector>

namespace ddp::backend {

struct DeviceRequest {
  std::string host;             // this rank's host name
  int rank = 0;                 // global rank
  int local_rank = 0;           // position among the ranks on `host`, 0-based
  int local_size = 1;           // number of ranks on `host`
  std::vector<int> host_ranks;  // global ranks on `host` in local-rank order (empty: unknown)
  int visible_devices = 0;      // GPUs this rank sees
  // The visible-device set of each rank on `host` (its GPUs' UUIDs in its device order, joined),
  // in local-rank order; empty: unknown, every rank on the host is taken to see the same GPUs.
  std::vector<std::string> host_device_sets;
  std::optional<std::string> cuda_visible_devices;  // CUDA_VISIBLE_DEVICES when set (messages)
};

// The device index (among the rank's visible devices) the rank uses:
//  - a rank that sees exactly one GPU uses it, device 0 (Slurm --gpus-per-task / --gpu-bind, or
//    CUDA_VISIBLE_DEVICES set per rank by a wrapper);
//  - otherwise the rank's position among the host's ranks that see the same set of GPUs picks
//    the device (all of the host's ranks when every rank sees all GPUs; only itself when Slurm
//    gives each task its own GPUs), which needs as many visible GPUs as such ranks.
// Throws ConfigError when the rank sees no GPU, or when the host has more ranks than GPUs.
int assign_device(const DeviceRequest& r);

// What one rank chose, as gathered from every rank.
struct DeviceClaim {
  int rank = 0;
  std::string host;
  int device = 0;    // index among that rank's visible devices
  std::string uuid;  // the GPU's UUID: the same physical GPU has the same UUID in every process
  std::string name;  // the GPU's name, for messages ("" when unknown)
};

// Throws ConfigError when two or more ranks on one host use the same GPU (same UUID), naming the
// host, the GPU and the ranks (all such groups, host by host).
void check_distinct_devices(const std::vector<DeviceClaim>& claims);

// Compact, sorted rank list: {4,5,6,7,9} -> "4-7, 9"; {2} -> "2"; {} -> "".
std::string format_rank_ranges(std::vector<int> ranks);

// "cuda:<device>", the device string of the rank table.
std::string cuda_device_string(int device);

}  // namespace ddp::backend
