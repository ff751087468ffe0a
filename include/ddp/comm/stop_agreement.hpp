#pragma once
// All ranks agree, once a step, whether any of them was asked to stop (a signal) or found its loss
// not finite, so that every rank stops at the same step. On several ranks the agreement is one
// step late: the flags of step k are summed by a non-blocking all-reduce while step k+1 computes,
// so agreeing costs no synchronisation point of its own (a blocking all-reduce after every step
// made each step wait for the slowest rank twice). One rank agrees with itself at once.
#include "ddp/comm/communicator.hpp"

namespace ddp::comm {

class StopAgreement {
 public:
  // What the ranks agreed on.
  struct Verdict {
    bool stop = false;        // at least one rank was asked to stop
    int nonfinite_ranks = 0;  // ranks whose loss was not finite
  };

  // Collective use only: every rank calls step() after each of its steps and finish() after the
  // last, in the same order.
  explicit StopAgreement(Communicator& comm) : comm_(comm) {}
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  // This rank's flags after a step. Returns the verdict to act on now: on one rank these flags;
  // on several, every rank's flags of the previous step (nothing before the first), whose sum it
  // waits for; this step's flags are then summed in the background.
  Verdict step(bool stop, bool nonfinite);
  // After the loop's last step: the verdict still being summed (the last step's flags: a request
  // that came with it), or one rank's last flags. Starts the next loop afresh.
  Verdict finish();

 private:
  Verdict verdict() const;

  Communicator& comm_;
  // [0]: a stop was asked for; [1]: the loss was not finite. A member: the buffer of a
  // non-blocking all-reduce must outlive it.
  float flags_[2] = {0.0f, 0.0f};
  Request request_;
};

}  // namespace ddp::comm
