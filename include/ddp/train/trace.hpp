#pragma once
// The per-rank timeline (run.trace): every rank's step phases in Chrome's trace-event JSON format
// (chrome://tracing, https://ui.perfetto.dev), one process per rank (pid = rank) so that a
// straggler shows at a glance, like Horovod's timeline but for every rank.
//
// Each rank appends complete events ("ph": "X") to run.dir/trace/rank_NNNN.json as it trains
// (written out at every epoch's end and every 1 MiB): thread 0 holds the step (args.step = global
// step) and inside it the data wait, forward, backward and optimizer phases, the evaluation and
// snapshot writes; thread 1 + N bucket N's all-reduce from its launch to the moment the rank saw
// it complete (args.step, args.bucket). A killed run leaves these files as JSON arrays
// without their closing bracket, which both viewers load. When the run ends (complete or stopped),
// rank 0 merges the files it can see into run.dir/trace.json (run.dir shared, as on a cluster's
// file system; ranks whose file is elsewhere are named).
//
// Times are microseconds from a barrier at the start of the segment, on each rank's steady
// clock: the ranks line up to within the barrier's skew. On a GPU the phases are the host's view
// (kernels are queued, the all-reduce completion is when the host observed it).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>

#include "ddp/comm/communicator.hpp"

namespace ddp::train {

class Trace {
 public:
  using Clock = std::chrono::steady_clock;
  // Collective: opens run_dir/trace/rank_NNNN.json on every rank, then a barrier sets time 0.
  Trace(const std::filesystem::path& run_dir, comm::Communicator& comm);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // A phase from t0 to t1 on thread tid (0: compute); bucket < 0: none.
  void complete(const char* name, int tid, Clock::time_point t0, Clock::time_point t1,
                std::int64_t step, std::int64_t bucket = -1);
  // A gradient bucket's all-reduce, on a thread of its own ("all-reduce bucket N"): the buckets'
  // all-reduces overlap without nesting, which one thread of a trace viewer cannot show.
  void all_reduce(std::size_t bucket, Clock::time_point t0, Clock::time_point t1,
                  std::int64_t step);
  void flush();
  // Collective: closes every rank's file; rank 0 writes run_dir/trace.json from the files it sees
  // and says so on `out`.
  void finish(std::ostream& out);

 private:
  std::filesystem::path run_dir_, path_;
  comm::Communicator& comm_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  Clock::time_point t0_;
  std::size_t named_buckets_ = 0;  // bucket threads named so far
};

// RAII: a phase of the trace from construction to destruction; nothing at all without a trace.
class TraceSpan {
 public:
  TraceSpan(Trace* trace, const char* name, std::int64_t step)
      : trace_(trace), name_(name), step_(step) {
    if (trace_) t0_ = Trace::Clock::now();
  }
  ~TraceSpan() {
    if (trace_) trace_->complete(name_, 0, t0_, Trace::Clock::now(), step_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Trace* trace_;
  const char* name_;
  std::int64_t step_;
  Trace::Clock::time_point t0_;
};

// RAII: one training step on thread 0, from `wait_from` (where the previous step ended, when the
// rank began waiting for this step's batch) to destruction; its start also ends the data wait.
// Sets wait_from to its end for the next step.
class TraceStep {
 public:
  TraceStep(Trace* trace, std::int64_t step, Trace::Clock::time_point& wait_from)
      : trace_(trace), step_(step), from_(wait_from) {
    if (trace_) trace_->complete("data wait", 0, from_, Trace::Clock::now(), step_);
  }
  ~TraceStep() {
    if (!trace_) return;
    const auto end = Trace::Clock::now();
    trace_->complete("step", 0, from_, end, step_);
    from_ = end;
  }
  TraceStep(const TraceStep&) = delete;
  TraceStep& operator=(const TraceStep&) = delete;

 private:
  Trace* trace_;
  std::int64_t step_;
  Trace::Clock::time_point& from_;
};

}  // namespace ddp::train
