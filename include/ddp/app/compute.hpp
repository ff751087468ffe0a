#pragma once
// Where each rank computes. runtime.device ("auto" | "cpu" | "cuda") becomes one decision for the
// whole job: a job trains on one kind of device. On GPUs every rank takes its own (device_assign:
// local rank, CUDA_VISIBLE_DEVICES, Slurm's per-task binding; two ranks on one GPU is refused) and
// the gradients travel over NCCL, bootstrapped over MPI; MPI stays the control plane.
#include <memory>
#include <string>
#include <vector>

#include "ddp/app/config.hpp"
#include "ddp/backend/backend.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/runtime/runtime.hpp"

namespace ddp::app {

// What one rank can use, found locally (no communication).
struct DeviceChoice {
  int index = -1;                     // the GPU (index among the visible ones), -1: the CPU
  std::string uuid, name;             // of that GPU
  std::string error;                  // runtime.device = cuda and this rank cannot have a GPU
  std::string note;                   // why the CPU, for reports
  std::string device_string() const;  // "cpu" | "cuda:N"
};
// The GPUs this process sees, as their UUIDs in device order joined by ','; "" without any. Two
// ranks with the same text see the same GPUs (device_assign's visible-device sets).
std::string visible_device_set();
// Every rank's host name and visible_device_set(), in rank order, in one collective over `comm`.
struct HostDevices {
  std::vector<std::string> hosts, device_sets;
};
HostDevices gather_host_devices(const runtime::Runtime& rt, comm::Communicator& comm);
// hosts: every rank's host name, in rank order (to know the ranks sharing this rank's host);
// device_sets: every rank's visible_device_set(), in rank order.
DeviceChoice choose_device(const std::string& mode, const runtime::Runtime& rt,
                           const std::vector<std::string>& hosts,
                           const std::vector<std::string>& device_sets);

struct Compute {
  std::unique_ptr<backend::Backend> backend;
  // The gradients' all-reduce on GPUs (NcclComm; null on CPUs or with one rank: MPI does it).
  std::unique_ptr<comm::Communicator> grad_comm;
  std::string device = "cpu";  // this rank's, for the rank table
  std::string note;            // for the log: why the CPU under "auto", which GPU otherwise
};

// Collective over `comm` (the job's MPI communicator, under its timeout; NCCL is bootstrapped over
// MPI_COMM_WORLD). Throws ConfigError, the same on every rank, when runtime.device = cuda cannot be
// honoured on some rank (naming the ranks, hosts and why) or when two ranks would share a GPU.
Compute setup_compute(const Config& cfg, const runtime::Runtime& rt, comm::Communicator& comm);

}  // namespace ddp::app
