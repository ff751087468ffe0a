#include "ddp/train/rank_speed.hpp"

#include "ddp/error.hpp"
#include "ddp/runtime/gather.hpp"

namespace ddp::train {

double RankSpeed::compute_per_sample_s() const {
  return timed_samples > 0 ? timed_compute_s / static_cast<double>(timed_samples) : 0.0;
}

double RankSpeed::images_per_s() const {
  return train_s > 0.0 ? static_cast<double>(samples) / train_s : 0.0;
}

void StepMeter::add_step(double compute_s, double wait_s, std::int64_t samples) {
  ++epoch_.steps;
  epoch_.samples += samples;
  epoch_.compute_s += compute_s;
  epoch_.wait_s += wait_s;
  if (!warmed_up_) {
    warmed_up_ = true;
    warmup_compute_s_ = compute_s;
    warmup_samples_ = samples;
    return;
  }
  epoch_.timed_samples += samples;
  epoch_.timed_compute_s += compute_s;
}

RankSpeed StepMeter::take_epoch(double train_s) {
  RankSpeed out = epoch_;
  out.train_s = train_s;
  // An epoch of one step (or a segment that trained only one): the warm-up step is all there is.
  if (out.timed_samples == 0) {
    out.timed_samples = warmup_samples_;
    out.timed_compute_s = warmup_compute_s_;
  }
  epoch_ = RankSpeed{};
  warmup_compute_s_ = 0.0;
  warmup_samples_ = 0;
  return out;
}

std::vector<RankSpeed> gather_rank_speeds(const RankSpeed& mine,
                                          const std::vector<runtime::RankInfo>& startup,
                                          comm::Communicator& comm) {
  runtime::RecordWriter w;
  w.put(std::int64_t{mine.rank})
      .put(mine.share)
      .put(mine.steps)
      .put(mine.samples)
      .put(mine.compute_s)
      .put(mine.wait_s)
      .put(mine.train_s)
      .put(mine.timed_samples)
      .put(mine.timed_compute_s);
  const auto records = runtime::allgather_strings(w.bytes(), comm);
  std::vector<RankSpeed> table;
  table.reserve(records.size());
  for (std::size_t r = 0; r < records.size(); ++r) {
    runtime::RecordReader in(records[r]);
    RankSpeed s;
    s.rank = static_cast<int>(in.get_int());
    if (s.rank != static_cast<int>(r))
      throw Error("internal: rank " + std::to_string(r) + " sent the speed record of rank " +
                  std::to_string(s.rank));
    s.share = in.get_int();
    s.steps = in.get_int();
    s.samples = in.get_int();
    s.compute_s = in.get_double();
    s.wait_s = in.get_double();
    s.train_s = in.get_double();
    s.timed_samples = in.get_int();
    s.timed_compute_s = in.get_double();
    if (r < startup.size()) {
      s.host = startup[r].host;
      s.threads = startup[r].threads;
      s.cpus = startup[r].affinity;
    }
    table.push_back(std::move(s));
  }
  return table;
}

}  // namespace ddp::train
