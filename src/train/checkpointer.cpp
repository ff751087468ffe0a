#include "ddp/train/checkpointer.hpp"

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <ostream>
#include <span>

#include "ddp/error.hpp"
#include "ddp/sync/replica.hpp"
#include "ddp/version_info.hpp"

namespace ddp::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string join(const std::vector<std::int64_t>& v, const char* sep) {
  std::string out;
  for (const auto x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
  return out;
}

}  // namespace

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
  if (scaler_.enabled()) {
    meta.loss_scale = scaler_.scale();
    meta.loss_scale_good_steps = scaler_.good_steps();
  }
  const std::string name =
      step_in_epoch > 0 ? ckpt::snapshot_name(epoch, step_in_epoch) : ckpt::snapshot_name(epoch);
  const std::filesystem::path file = std::filesystem::path(cfg_.run.dir) / name;
  const auto t0 = Clock::now();
  ckpt::write_snapshot(file, model_, opt_, cfg_.optim.name, meta);
  ckpt::prune(cfg_.run.dir, static_cast<int>(cfg_.train.keep_last), state_.run_id, meta.position);
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%.3f s)", seconds_since(t0));
  out_ << "snapshot: " << file.string() << buf << "\n";
  out_.flush();
}

Checkpointer::Resumed Checkpointer::read_and_broadcast() {
  const auto& r = cfg_.train.resume;
  const std::filesystem::path dir = cfg_.run.dir;
  // found, epoch, step, samples, global step, opt steps, loss-scale good steps, and the resumed
  // epoch's totals so far: correct, samples, steps
  std::vector<std::int64_t> pos(10, 0);
  // loss scale, the run's training time, the epoch's loss sum, training and waiting time
  std::vector<double> reals(5, 0.0);
  std::string history;
  std::vector<std::int64_t> shares;  // the snapshot's rank shares (empty: none kept)
  std::exception_ptr error;
  if (comm_.rank() == 0) try {
      std::optional<std::filesystem::path> file;
      if (r == "auto") {
        file = ckpt::find_latest(dir, [this](const std::string& w) {
          std::fprintf(stderr, "ddp_train: warning: %s\n", w.c_str());
          out_ << "warning: " << w << "\n";
        });
        if (!file) out_ << "resume: no snapshot in " << dir.string() << ", starting from scratch\n";
      } else {
        file = std::filesystem::path(r);
      }
      if (file) {
        const ckpt::Snapshot snap = ckpt::read_snapshot(*file);
        ckpt::restore(snap, model_, opt_);
        const auto& p = snap.meta.position;
        const auto& e = snap.meta.epoch_progress;
        pos = {1,
               p.epoch,
               p.step_in_epoch,
               p.samples_seen,
               p.global_step,
               snap.optimizer_steps,
               snap.meta.loss_scale_good_steps,
               e.correct,
               e.samples,
               e.steps};
        reals = {snap.meta.loss_scale, snap.meta.run_train_s, e.loss_sum, e.train_s, e.comm_wait_s};
        history = snap.meta.metrics_jsonl;
        shares = snap.meta.rank_shares;
        out_ << "resume: " << file->string() << " (epoch " << p.epoch << ", step "
             << p.step_in_epoch << ", written by " << snap.meta.world_size << " rank(s))\n";
      }
    } catch (const Error&) {
      error = std::current_exception();
      pos[0] = -1;
    }
  // The other ranks learn that rank 0 failed instead of waiting for state that never comes.
  if (comm_.size() > 1) {
    std::int64_t status = pos[0];
    comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(&status, 1)), 0);
    if (status < 0 && comm_.rank() != 0)
      throw Error("rank 0 could not resume from its snapshot (see its error)");
  }
  if (error) std::rethrow_exception(error);
  if (comm_.size() > 1) {
    comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(pos)), 0);
    comm_.broadcast(std::as_writable_bytes(std::span<double>(reals)), 0);
    if (pos[0]) {
      // Rank 0 restored into its host mirrors; they travel over MPI and go to each backend.
      sync::broadcast_state(comm_, model_, &opt_);
      std::int64_t len[2] = {static_cast<std::int64_t>(history.size()),
                             static_cast<std::int64_t>(shares.size())};
      comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(len, 2)), 0);
      history.resize(static_cast<std::size_t>(len[0]));
      comm_.broadcast(std::as_writable_bytes(std::span<char>(history.data(), history.size())), 0);
      shares.resize(static_cast<std::size_t>(len[1]));
      comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(shares)), 0);
    }
  }
  Resumed out;
  out.found = pos[0] != 0;
  out.position = {pos[1], pos[2], pos[3], pos[4]};
  out.optimizer_steps = pos[5];
  out.loss_scale = reals[0];
  out.loss_scale_good_steps = pos[6];
  out.run_train_s = reals[1];
  out.epoch_progress = {reals[2], pos[7], pos[8], pos[9], reals[3], reals[4]};
  out.history = std::move(history);
  out.shares = std::move(shares);
  return out;
}

std::vector<std::int64_t> Checkpointer::resume(const BatchPlan& plan,
                                               std::int64_t steps_per_epoch) {
  if (cfg_.train.resume.empty()) return {};
  const Resumed r = read_and_broadcast();
  if (!r.found) return {};
  state_.start_epoch = r.position.epoch;
  state_.start_step = r.position.step_in_epoch;
  state_.samples_seen = r.position.samples_seen;
  state_.global_step = r.position.global_step;
  opt_.set_steps_taken(r.optimizer_steps);
  // The scale the run had reached (a snapshot without one leaves the configured start).
  if (scaler_.enabled() && r.loss_scale > 0) scaler_.restore(r.loss_scale, r.loss_scale_good_steps);
  state_.run_train_s = r.run_train_s;
  state_.epoch_carry = r.epoch_progress;
  state_.history = r.history;
  // train.rank_shares = auto keeps the shares the run had measured, on as many ranks and with the
  // same global batch; otherwise it starts equal again (and a given list is the configuration's).
  std::vector<std::int64_t> kept;
  if (cfg_.train.rank_shares.word == "auto" && !r.shares.empty()) {
    if (plan.fits(r.shares)) {
      kept = plan.shares_for(r.shares);
      out_ << "resume: rank shares " << join(r.shares, " + ")
           << " kept from the snapshot (train.rank_shares = auto)\n";
    } else {
      out_ << "resume: the snapshot's rank shares (" << join(r.shares, " + ")
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
