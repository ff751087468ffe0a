#pragma once
// Start-up errors under mpirun/srun, agreed instead of aborted: a configuration or command-line
// error is usually the same on every rank, and each rank printing it and calling MPI_Abort gave
// the user N copies of the message after Open MPI's "MPI_ABORT was invoked" banner. Instead every
// rank reaches one exchange of "did this phase fail here, and why"; when any rank failed, rank 0
// prints each distinct message once (naming the ranks), and every rank exits 1 through
// MPI_Finalize. MPI_Abort stays for what an exchange cannot settle: a rank that never arrives
// (it hangs, died, or waits in another collective) ends the job after the timeout, and a rank
// that failed says its own message before it does.
#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

namespace ddp::runtime {

// One rank's outcome of a phase: nullopt = it went fine; otherwise its message ("" when the
// message is another rank's, e.g. "rank 0 could not start the run").
using PhaseFailure = std::optional<std::string>;

class ErrorAgreement {
 public:
  // Collective over MPI_COMM_WORLD (a private duplicate, so that its exchanges never pair with
  // anyone else's collectives), waiting at most timeout_s (<= 0: forever) for every rank.
  explicit ErrorAgreement(double timeout_s);
  ~ErrorAgreement();
  ErrorAgreement(const ErrorAgreement&) = delete;
  ErrorAgreement& operator=(const ErrorAgreement&) = delete;

  // Collective: every rank's outcome (index = rank). A rank that failed waits for the others at
  // most kFailedWaitS (they may be stuck in a collective it left), then prints its own message and
  // ends the job with MPI_Abort; a rank that did not fail waits timeout_s.
  std::vector<PhaseFailure> exchange(const PhaseFailure& mine);

  static constexpr double kFailedWaitS = 30.0;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  double timeout_s_;
  int rank_ = 0, size_ = 1;
};

// The report rank 0 prints for failed ranks (none failed: ""): each distinct message once, the
// first with the lowest failing rank's prefix, e.g.
//   "ddp_train: error (rank 1 of 2): command line: unknown option '--x'\n"
//   "ddp_train: error (rank 0 of 4; ranks 0-3 alike): config.toml:3: ...\n"
std::string describe_failures(const std::vector<PhaseFailure>& all);

}  // namespace ddp::runtime
