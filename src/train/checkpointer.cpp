#include "ddp/train/checkpointer.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <ostream>

#include "ddp/ckpt/resume_broadcast.hpp"
#include "ddp/error.hpp"
#include "ddp/sync/replica.hpp"
#include "ddp/version_info.hpp"
#include "joined_numbers.hpp"
#include "seconds_since.hpp"

namespace ddp::train {
using Clock = std::chrono::steady_clock;

double RunState::run_time_s() const {
  return run_train_s + seconds_since(segment_t0);
}

Checkpointer::Checkpointer(const Setup& cfg, comm::Communicator& comm, std::ostream& out,
                           nn::Model& model, optim::Optimizer& opt, LossScaler& scaler,
                           RunState& state)
    : cfg_(cfg), comm_(comm), out_(out), model_(model), opt_(opt), scaler_(scaler), state_(state) {}

void Checkpointer::save(std::int64_t epoch, std::int64_t step_in_epoch,
                        const std::vector<std::int64_t>& shares, std::int64_t global_batch,
                        Trace* trace) {
  if (comm_.rank() != 0) return;
  const TraceSpan traced(trace, "snapshot", state_.global_step);
  // The last update of an epoch can blow up after its loss was checked: a snapshot of NaN/inf
  // weights would become the newest, and pruning could remove the last good one.
  model_.pull_state();
  for (const float w : model_.host_params())
    if (!std::isfinite(w))
      throw Error("training diverged: weights are not finite (NaN or inf) after epoch " +
                  std::to_string(step_in_epoch > 0 ? epoch + 1 : epoch) + " (global step " +
                  std::to_string(state_.global_step) +
                  "); no snapshot of them is written, the newest snapshot in run.dir holds the "
                  "last finite ones. Lower optim.lr (or add warm-up) and resume from it");
  ckpt::SnapshotMeta meta;
  meta.position = {epoch, step_in_epoch, state_.samples_seen, state_.global_step};
  meta.seed = cfg_.train.seed;
  meta.world_size = comm_.size();
  meta.config_toml = cfg_.resolved_toml;
  meta.metrics_jsonl = state_.history;
  meta.program_version = DDP_VERSION_STRING;
  meta.run_id = state_.run_id;
  meta.global_batch = global_batch;
  meta.run_train_s = state_.run_time_s();
  if (step_in_epoch > 0) meta.epoch_progress = state_.progress;
  meta.rank_shares = shares;
  meta.chunk = cfg_.train.reproducible ? cfg_.train.chunk : 0;
  meta.init_from = state_.init_from;
  if (scaler_.enabled()) {
    meta.loss_scale = scaler_.scale();
    meta.loss_scale_good_steps = scaler_.good_steps();
  }
  const std::string name =
      step_in_epoch > 0 ? ckpt::snapshot_name(epoch, step_in_epoch) : ckpt::snapshot_name(epoch);
  const std::filesystem::path file = std::filesystem::path(cfg_.run.dir) / name;
  std::optional<ckpt::AveragedWeights> average;
  if (ema_ && ema_->started()) {
    ema_->pull();
    average = ckpt::AveragedWeights{ema_->host_params(), ema_->host_buffers()};
    meta.ema_updates = ema_->updates();
  }
  const auto t0 = Clock::now();
  ckpt::write_snapshot(file, model_, opt_, cfg_.optim.name, meta, average ? &*average : nullptr);
  ckpt::prune(cfg_.run.dir, static_cast<int>(cfg_.train.keep_last), state_.run_id, meta.position);
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%.3f s)", seconds_since(t0));
  out_ << "snapshot: " << file.string() << buf << "\n";
  out_.flush();
}

std::optional<ckpt::SnapshotState> Checkpointer::read_and_broadcast() {
  const auto& r = cfg_.train.resume;
  const std::filesystem::path dir = cfg_.run.dir;
  // Rank 0 reads the snapshot (the run directory need not be shared); the state travels over MPI.
  auto state = ckpt::broadcast_resume_state(comm_, [&]() -> std::optional<ckpt::SnapshotState> {
    std::optional<std::filesystem::path> file;
    if (r == "auto") {
      file = ckpt::find_latest(dir, [this](const std::string& w) {
        std::fprintf(stderr, "ddp_train: warning: %s\n", w.c_str());
        out_ << "warning: " << w << "\n";
      });
      if (!file) {
        out_ << "resume: no snapshot in " << dir.string() << ", starting from scratch\n";
        return std::nullopt;
      }
    } else {
      file = std::filesystem::path(r);
    }
    ckpt::Snapshot snap = ckpt::read_snapshot(*file);
    ckpt::restore(snap, model_, opt_);
    if (!ema_) {
      snap.meta.ema_updates = 0;  // not kept by this run: nothing to send
    } else if (snap.meta.ema_updates > 0) {
      ckpt::restore_average(snap, model_, ema_->host_params(), ema_->host_buffers());
    } else if (snap.meta.position.global_step > cfg_.train.ema_start) {
      out_ << "resume: the snapshot holds no moving average of the weights; train.ema starts "
              "one at the next update\n";
    }
    const auto& p = snap.meta.position;
    out_ << "resume: " << file->string() << " (epoch " << p.epoch << ", step " << p.step_in_epoch
         << ", written by " << snap.meta.world_size << " rank(s))\n";
    return ckpt::SnapshotState(std::move(snap));  // the state; the tensors are restored
  });
  // Rank 0 restored into its host mirrors; they travel over MPI and go to each backend.
  if (state && comm_.size() > 1) sync::broadcast_state(comm_, model_, &opt_);
  if (state && ema_) {
    ema_->set_updates(state->meta.ema_updates);
    if (state->meta.ema_updates > 0) {
      if (comm_.size() > 1) {
        comm_.broadcast(std::as_writable_bytes(ema_->host_params()), 0);
        comm_.broadcast(std::as_writable_bytes(ema_->host_buffers()), 0);
      }
      ema_->push();
    }
  }
  return state;
}

std::vector<std::int64_t> Checkpointer::resume(const BatchPlan& plan,
                                               std::int64_t steps_per_epoch) {
  if (cfg_.train.resume.empty()) return {};
  const std::optional<ckpt::SnapshotState> snapshot = read_and_broadcast();
  if (!snapshot) return {};
  const ckpt::SnapshotMeta& m = snapshot->meta;
  // A reproducible run's sums depend on its chunks: another chunk size cannot continue it bitwise.
  if (cfg_.train.reproducible && m.chunk > 0 && m.chunk != cfg_.train.chunk)
    throw ConfigError(
        "train.chunk = " + std::to_string(cfg_.train.chunk) +
        ": the snapshot was trained reproducibly with train.chunk = " + std::to_string(m.chunk) +
        ", and only the same chunks continue it bitwise; resume with train.chunk = " +
        std::to_string(m.chunk) + " (or leave train.reproducible off)");
  if (cfg_.train.reproducible && m.chunk == 0)
    out_ << "resume: the snapshot was not trained with train.reproducible; training is "
            "reproducible from here on\n";
  state_.start_epoch = m.position.epoch;
  state_.start_step = m.position.step_in_epoch;
  state_.samples_seen = m.position.samples_seen;
  state_.global_step = m.position.global_step;
  opt_.set_steps_taken(snapshot->optimizer_steps);
  // The scale the run had reached (a snapshot without one leaves the configured start).
  if (scaler_.enabled() && m.loss_scale > 0) scaler_.restore(m.loss_scale, m.loss_scale_good_steps);
  state_.run_train_s = m.run_train_s;
  state_.epoch_carry = m.epoch_progress;
  state_.history = m.metrics_jsonl;
  state_.init_from = m.init_from;
  const std::vector<std::int64_t>& shares = m.rank_shares;  // the run's measured shares, if kept
  // train.rank_shares = auto keeps the shares the run had measured, on as many ranks and with the
  // same global batch; otherwise it starts equal again (and a given list is the configuration's).
  std::vector<std::int64_t> kept;
  if (cfg_.train.rank_shares.word == "auto" && !shares.empty()) {
    if (plan.fits(shares)) {
      kept = plan.shares_for(shares);
      out_ << "resume: rank shares " << joined_numbers(shares, " + ")
           << " kept from the snapshot (train.rank_shares = auto)\n";
    } else {
      out_ << "resume: the snapshot's rank shares (" << joined_numbers(shares, " + ")
           << ") were for another world size or global batch; starting from equal shares\n";
    }
  }
  if (state_.start_step >= steps_per_epoch) {
    // A mid-epoch snapshot of a run with another global batch: its step count does not fit.
    throw ConfigError("snapshot position epoch " + std::to_string(state_.start_epoch) + " step " +
                      std::to_string(state_.start_step) + " does not fit " +
                      std::to_string(steps_per_epoch) +
                      " steps per epoch: resume with the global batch the run was started with");
  }
  return kept;
}

}  // namespace ddp::train
