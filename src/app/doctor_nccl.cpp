#include "ddp/app/doctor_nccl.hpp"

#include "ddp/comm/collective_check.hpp"
#include "ddp/error.hpp"
#include "ddp/runtime/gather.hpp"

namespace ddp::app {

NcclCheck check_nccl(comm::Communicator& control, int device, comm::NcclCommOptions requested) {
  NcclCheck out;
  std::string err;
  requested.abort_job_on_stall = false;  // a stall is this check's verdict, not the job's end
  try {
    out.comm = comm::make_nccl_comm(MPI_COMM_WORLD, device, nullptr, requested);
    err = comm::verify_collectives(*out.comm);
  } catch (const Error& e) {
    err = e.what();
  }
  // Every rank reaches this exchange, stalled bootstrap or not: each one's own timeout ended it.
  const auto errs = runtime::allgather_strings(err, control);
  for (std::size_t r = 0; r < errs.size(); ++r)
    if (!errs[r].empty()) out.errors[errs[r]].push_back(static_cast<int>(r));
  if (!out.errors.empty()) out.comm.reset();
  return out;
}

}  // namespace ddp::app
