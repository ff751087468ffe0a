#pragma once
// doctor's NCCL check: every rank sets up an NCCL communicator on its GPU and runs the collective
// checks over it. A stalled bootstrap (a firewall, the wrong NCCL_SOCKET_IFNAME) is what doctor
// exists to diagnose, so a stall here fails the check on every rank and the report is still
// printed: the communicator is made with abort_job_on_stall = false, never ending the job.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/comm/nccl_comm.hpp"

namespace ddp::app {

struct NcclCheck {
  std::map<std::string, std::vector<int>> errors;  // what went wrong -> the ranks it happened on
  std::unique_ptr<comm::NcclComm> comm;            // the working communicator (no errors)
};

// Collective over `control` (the MPI control plane, whose exchanges outlive the NCCL failure).
// `requested`: the options training would use (timeout, fault injection); the stall policy is
// doctor's own.
NcclCheck check_nccl(comm::Communicator& control, int device, comm::NcclCommOptions requested);

}  // namespace ddp::app
