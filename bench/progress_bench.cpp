// progress_bench: how best to progress the gradient all-reduces that overlap backward, measured on
// the real training step (issue: MPI data parallelism asks "by MPI_Test between layers or a
// communication thread: measure which is better"). Every mode runs the same model, batch and
// buckets (sync::plan_buckets, the trainer's); a step is forward, loss, backward, all-reduce of
// every gradient bucket, SGD update:
//
//   blocking  backward first, then all buckets' all-reduces (nothing overlaps: the reference)
//   test      the trainer's way (sync::GradientSync over comm::MpiComm): a bucket's MPI_Iallreduce
//             starts when its last layer's backward is done; MPI_Test between layers progresses it
//   thread    buckets start the same way; a progress thread polls them with MPI_Testsome while
//             backward computes (MPI_THREAD_MULTIPLE), sleeping between steps
//
//   mpirun -np 2 --bind-to core build/bench/progress_bench --model vgg_small --steps 30
//
// Prints, per mode, the medians over --repeat rounds (which interleave the modes) of: the slowest
// rank's mean step time; images/s over all ranks; the time a step waited after its backward
// ("exposed"); the part of it after the slowest rank's backward had finished ("comm left": the
// communication nothing hid, free of the ranks' jitter; in blocking mode, the all-reduce time); and
// the share of the all-reduce hidden behind backward, 1 - comm left / blocking's comm left.
// Ranks must share a host (one clock for the jitter correction).
#include <mpi.h>
#include <sched.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/nn/presets.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/sync/gradient_sync.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using ddp::Shape;
using ddp::Tensor;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Polls the requests handed to it until they complete; sleeps on a condition variable when it has
// none, so that it takes no CPU outside the backward pass.
class ProgressThread {
 public:
  ProgressThread() : thread_([this] { loop(); }) {}
  ~ProgressThread() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void add(MPI_Request r) {
    {
      std::lock_guard<std::mutex> lock(m_);
      incoming_.push_back(r);
      outstanding_.fetch_add(1);
    }
    cv_.notify_one();
  }
  void wait_all() const {
    while (outstanding_.load() != 0) sched_yield();
  }

 private:
  void loop() {
    std::vector<MPI_Request> mine;
    std::vector<int> done_idx;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return stop_ || !incoming_.empty() || !mine.empty(); });
        if (stop_ && incoming_.empty() && mine.empty()) return;
        mine.insert(mine.end(), incoming_.begin(), incoming_.end());
        incoming_.clear();
      }
      int count = 0;
      done_idx.resize(mine.size());
      MPI_Testsome(static_cast<int>(mine.size()), mine.data(), &count, done_idx.data(),
                   MPI_STATUSES_IGNORE);
      if (count > 0 && count != MPI_UNDEFINED) {
        std::erase(mine, MPI_REQUEST_NULL);
        outstanding_.fetch_sub(count);
      }
      sched_yield();  // let the compute thread have the core when they share one
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::vector<MPI_Request> incoming_;
  std::atomic<int> outstanding_{0};
  bool stop_ = false;
  std::thread thread_;
};

struct ModeResult {
  double step_s = 0, exposed_s = 0;
  double after_last_s = 0;  // exposed wait minus the wait for the slowest rank's backward
};

double clock_s() {
  // CLOCK_MONOTONIC (steady_clock) is one clock for every process of a host.
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  CLI::App app{"progress_bench: MPI_Test between layers vs a progress thread"};
  std::string model_name = "vgg_small";
  std::int64_t batch = 256;
  int steps = 30, warmup = 3, threads = 1, repeat = 3;
  double bucket_mb = 4.0, first_bucket_mb = 1.0;
  app.add_option("--model", model_name, "lenet | vgg_small | vgg_small_bn")->capture_default_str();
  app.add_option("--batch", batch, "samples per rank per step")->capture_default_str();
  app.add_option("--steps", steps, "timed steps per mode")->capture_default_str();
  app.add_option("--threads", threads, "compute threads per rank")->capture_default_str();
  app.add_option("--repeat", repeat, "rounds over the modes (interleaved); the median is printed")
      ->capture_default_str();
  app.add_option("--bucket-mb", bucket_mb)->capture_default_str();
  app.add_option("--first-bucket-mb", first_bucket_mb)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (provided < MPI_THREAD_MULTIPLE && rank == 0)
    std::printf("note: MPI provides thread level %d < MPI_THREAD_MULTIPLE; 'thread' is skipped\n",
                provided);

  ddp::backend::set_compute_threads(threads);
  auto be = ddp::backend::make_cpu_backend();
  const Shape input{3, 32, 32};
  ddp::nn::Model model(ddp::nn::preset_layers(model_name), input, 10, *be);
  model.reserve(batch);
  model.init_parameters(1);
  ddp::optim::Options oc;
  oc.lr = 1e-3;
  auto opt = ddp::optim::Optimizer::create(oc, *be, model.params().size());
  Tensor x = Tensor::zeros(input.with_batch(batch));
  std::mt19937_64 rng(static_cast<std::uint64_t>(rank) + 7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data()[i] = normal(rng);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch));
  for (auto& l : labels) l = static_cast<std::int32_t>(rng() % 10);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(batch));
  std::iota(ids.begin(), ids.end(), std::int64_t{0});
  Tensor dlogits = Tensor::zeros(Shape{batch, 10});
  ddp::nn::StepContext ctx;
  ctx.sample_ids = ids.data();

  ddp::comm::MpiComm comm(MPI_COMM_WORLD, ddp::comm::CommOptions{});
  const auto cap = static_cast<std::size_t>(bucket_mb * (1 << 20));
  const auto first_cap = static_cast<std::size_t>(first_bucket_mb * (1 << 20));
  ddp::sync::GradientSync sync(model, comm, ddp::sync::SyncOptions{cap, first_cap});
  const auto& buckets = sync.buckets();
  ProgressThread progress;

  auto forward_loss = [&](std::uint64_t s) {
    ctx.seed = s;
    const Tensor& logits = model.forward(x, ctx);
    be->softmax_xent(batch, 10, logits.data(), labels.data(), 0.0f, 1.0f / float(batch),
                     dlogits.data());
  };
  auto grads = model.grads();
  auto iallreduce = [&](const ddp::sync::Bucket& b) {
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, grads.data() + b.begin, static_cast<int>(b.end - b.begin),
                   MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    return r;
  };

  auto run_mode = [&](const std::string& mode) {
    ModeResult res;
    std::uint64_t s = 0;
    for (int i = 0; i < warmup + steps; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = Clock::now();
      forward_loss(++s);
      double exposed = 0, backward_end = 0;
      if (mode == "blocking") {
        model.backward(dlogits);
        backward_end = clock_s();
        const auto w = Clock::now();
        std::vector<MPI_Request> reqs;
        for (const auto& b : buckets) reqs.push_back(iallreduce(b));
        MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
        exposed = since(w);
      } else if (mode == "test") {
        sync.begin(1);
        model.backward(dlogits, sync.hook());
        sync.after_micro_batch();
        backward_end = clock_s();
        const auto w = Clock::now();
        sync.finish();
        exposed = since(w);
      } else {
        std::size_t next = 0;
        model.backward(dlogits, [&](std::size_t l) {
          while (next < buckets.size() && l <= buckets[next].lowest_layer)
            progress.add(iallreduce(buckets[next++]));
        });
        backward_end = clock_s();
        const auto w = Clock::now();
        while (next < buckets.size()) progress.add(iallreduce(buckets[next++]));
        progress.wait_all();
        exposed = since(w);
      }
      opt->step(model.params(), model.grads(), oc.lr);
      const double step_s = since(t0);
      // Part of the exposed wait is for the slowest rank to finish its backward (jitter, not
      // communication): subtract it, so that what remains is communication nobody overlapped.
      double last_end = backward_end;
      MPI_Allreduce(MPI_IN_PLACE, &last_end, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (i >= warmup) {
        res.step_s += step_s / steps;
        res.exposed_s += exposed / steps;
        res.after_last_s += std::max(0.0, exposed - (last_end - backward_end)) / steps;
      }
    }
    MPI_Allreduce(MPI_IN_PLACE, &res.step_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &res.exposed_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &res.after_last_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return res;
  };

  std::size_t grad_bytes = 0;
  for (const auto& b : buckets) grad_bytes += (b.end - b.begin) * sizeof(float);
  if (rank == 0)
    std::printf(
        "%s, %d rank(s) x %d thread(s), batch %lld per rank, %zu buckets, %.2f MB of "
        "gradients, %d steps per mode\n%-9s %10s %12s %12s %14s %8s\n",
        model_name.c_str(), size, threads, static_cast<long long>(batch), buckets.size(),
        double(grad_bytes) / 1e6, steps, "mode", "step (ms)", "images/s", "exposed (ms)",
        "comm left (ms)", "hidden");
  // Rounds interleave the modes, so that a slow spell of the machine does not land on one mode.
  std::vector<std::string> modes = {"blocking", "test"};
  if (provided >= MPI_THREAD_MULTIPLE) modes.push_back("thread");
  std::vector<std::vector<ModeResult>> results(modes.size());
  for (int rep = 0; rep < repeat; ++rep)
    for (std::size_t m = 0; m < modes.size(); ++m) results[m].push_back(run_mode(modes[m]));
  auto median = [](std::vector<ModeResult> r, double ModeResult::*field) {
    std::sort(r.begin(), r.end(),
              [&](const ModeResult& a, const ModeResult& b) { return a.*field < b.*field; });
    return r[r.size() / 2].*field;
  };
  // Blocking mode: everything after the slowest rank's backward is the all-reduce itself.
  const double comm_s = median(results[0], &ModeResult::after_last_s);
  for (std::size_t m = 0; m < modes.size(); ++m) {
    const auto& r = results[m];
    const double step = median(r, &ModeResult::step_s);
    const double left = median(r, &ModeResult::after_last_s);
    double lo = step, hi = step;
    for (const auto& one : r) lo = std::min(lo, one.step_s), hi = std::max(hi, one.step_s);
    char hidden[16] = "-";
    if (m > 0 && comm_s > 0)
      std::snprintf(hidden, sizeof hidden, "%.0f%%", 100 * (1 - left / comm_s));
    if (rank == 0)
      std::printf("%-9s %10.2f %12.0f %12.2f %14.2f %8s   (steps %.2f..%.2f ms, %d rounds)\n",
                  modes[m].c_str(), step * 1e3, double(batch) * size / step,
                  median(r, &ModeResult::exposed_s) * 1e3, left * 1e3, hidden, lo * 1e3, hi * 1e3,
                  repeat);
  }
  MPI_Finalize();
  return 0;
}
