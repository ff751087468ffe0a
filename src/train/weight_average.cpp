#include "ddp/train/weight_average.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ddp/error.hpp"
#include "ddp/sync/replica.hpp"

namespace ddp::train {

WeightAverage::WeightAverage(const Options& opt, nn::Model& model, std::int64_t total_steps)
    : model_(model),
      be_(model.backend()),
      decay_(opt.ema),
      every_(std::max<std::int64_t>(1, opt.ema_every)),
      start_(opt.ema_start),
      total_(std::max<std::int64_t>(1, total_steps)),
      ramp_(opt.ema_ramp),
      lookahead_(opt.ema_mode == "lookahead"),
      params_(be_, static_cast<std::int64_t>(model.params().size())),
      buffers_(be_, static_cast<std::int64_t>(model.buffers().size())) {
  if (opt.ema_mode != "average" && opt.ema_mode != "lookahead")
    throw ConfigError("train.ema_mode = '" + opt.ema_mode + "': unknown (average, lookahead)");
  if (!(decay_ > 0.0 && decay_ < 1.0))
    throw ConfigError("train.ema = " + std::to_string(decay_) + ": a decay in (0, 1) keeps one");
}

bool WeightAverage::due(std::int64_t t) const {
  return t > start_ && t % every_ == 0;
}

double WeightAverage::decay_at(std::int64_t t) const {
  double d = std::pow(decay_, static_cast<double>(every_));
  if (ramp_ > 0.0)
    d *= std::pow(std::min(1.0, static_cast<double>(t) / static_cast<double>(total_)), ramp_);
  return d;
}

void WeightAverage::copy_into(bool model_to_average) {
  const auto copy = [&](std::span<float> model, const backend::Mirrored& avg) {
    if (model.empty()) return;
    if (model_to_average)
      be_.copy(static_cast<std::int64_t>(model.size()), model.data(), avg.device().data());
    else
      be_.copy(static_cast<std::int64_t>(model.size()), avg.device().data(), model.data());
  };
  copy(model_.params(), params_);
  copy(model_.buffers(), buffers_);
}

void WeightAverage::after_step(std::int64_t t) {
  if (!due(t)) return;
  if (updates_ == 0) {
    copy_into(true);  // the average starts as the weights
  } else {
    const auto w = static_cast<float>(1.0 - decay_at(t));
    const auto lerp = [&](std::span<float> model, const backend::Mirrored& avg) {
      if (!model.empty())
        be_.lerp(static_cast<std::int64_t>(model.size()), model.data(), w, avg.device().data());
    };
    lerp(model_.params(), params_);
    lerp(model_.buffers(), buffers_);
    if (lookahead_) copy_into(false);
  }
  ++updates_;
}

void WeightAverage::after_epoch(comm::Communicator* comm, std::int64_t samples) {
  if (!started()) return;
  if (comm && comm->size() > 1 && !buffers_.host_span().empty()) {
    buffers_.pull();
    const auto parts = sync::trained_buffers(model_, buffers_.host_span());
    if (!parts.empty() && sync::average_over_ranks(*comm, parts, samples)) buffers_.push();
  }
  if (lookahead_) copy_into(false);  // airbench's update(decay = 1) after every epoch
}

void WeightAverage::swap_with_model() {
  const auto swap = [&](std::span<float> model, const backend::Mirrored& avg) {
    if (model.empty()) return;
    const auto n = static_cast<std::int64_t>(model.size());
    if (scratch_.numel() < n)
      scratch_ = be_.alloc(Shape{std::max<std::int64_t>(
          n,
          static_cast<std::int64_t>(std::max(model_.params().size(), model_.buffers().size())))});
    be_.copy(n, model.data(), scratch_.data());
    be_.copy(n, avg.device().data(), model.data());
    be_.copy(n, scratch_.data(), avg.device().data());
  };
  swap(model_.params(), params_);
  swap(model_.buffers(), buffers_);
}

void WeightAverage::pull() const {
  params_.pull();
  buffers_.pull();
}

void WeightAverage::push() {
  params_.push();
  buffers_.push();
}

std::string WeightAverage::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "ema: decay %g per step, updated every %lld step(s) after step %lld", decay_,
                static_cast<long long>(every_), static_cast<long long>(start_));
  std::string out = buf;
  if (ramp_ > 0.0) {
    std::snprintf(buf, sizeof buf, ", ramped by (step / %lld)^%g", static_cast<long long>(total_),
                  ramp_);
    out += buf;
  }
  out += lookahead_ ? ", lookahead (copied into the weights)" : ", kept beside the weights";
  return out;
}

}  // namespace ddp::train
