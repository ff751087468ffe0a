#include "ddp/optim/optimizer.hpp"

#include <algorithm>

#include "ddp/error.hpp"

namespace ddp::optim {
namespace {

// Pointer into an optional state buffer.
float* at(float* p, std::size_t offset) {
  return p ? p + offset : nullptr;
}

class Sgd final : public Optimizer {
 public:
  Sgd(const Options& c, backend::Backend& be, std::size_t count,
      const std::vector<ParamRange>& norm_and_bias)
      : be_(be), runs_(decay_runs(c, count, norm_and_bias)) {
    h_.momentum = static_cast<float>(c.momentum);
    h_.weight_decay = static_cast<float>(c.weight_decay);
    h_.nesterov = c.nesterov;
    if (c.momentum > 0) momentum_ = add_state("momentum", be, count);
  }
  void step(std::span<float> params, std::span<const float> grads, double lr,
            const std::uint32_t* skip_if) override {
    h_.lr = static_cast<float>(lr);
    h_.skip_if = skip_if;
    for (const Run& r : runs_) {
      auto h = h_;
      if (!r.decay) h.weight_decay = 0.0f;
      be_.sgd_step(static_cast<std::int64_t>(r.end - r.begin), h, params.data() + r.begin,
                   grads.data() + r.begin, at(momentum_, r.begin));
    }
    ++steps_;
  }

 private:
  backend::Backend& be_;
  backend::Backend::SgdHyper h_;
  std::vector<Run> runs_;
  float* momentum_ = nullptr;
};

class Adam final : public Optimizer {
 public:
  Adam(const Options& c, backend::Backend& be, std::size_t count, bool decoupled,
       const std::vector<ParamRange>& norm_and_bias)
      : be_(be),
        runs_(decay_runs(c, count, norm_and_bias)),
        m_(add_state("exp_avg", be, count)),
        v_(add_state("exp_avg_sq", be, count)) {
    h_.beta1 = static_cast<float>(c.beta1);
    h_.beta2 = static_cast<float>(c.beta2);
    h_.eps = static_cast<float>(c.eps);
    h_.weight_decay = static_cast<float>(c.weight_decay);
    h_.decoupled = decoupled;
  }
  void step(std::span<float> params, std::span<const float> grads, double lr,
            const std::uint32_t* skip_if) override {
    h_.lr = static_cast<float>(lr);
    h_.step = ++steps_;
    h_.skip_if = skip_if;
    for (const Run& r : runs_) {
      auto h = h_;
      if (!r.decay) h.weight_decay = 0.0f;
      be_.adam_step(static_cast<std::int64_t>(r.end - r.begin), h, params.data() + r.begin,
                    grads.data() + r.begin, m_ + r.begin, v_ + r.begin);
    }
  }

  bool needs_applied_step_count() const override { return true; }

 private:
  backend::Backend& be_;
  backend::Backend::AdamHyper h_;
  std::vector<Run> runs_;
  float* m_;
  float* v_;
};

}  // namespace

std::vector<Optimizer::Run> Optimizer::decay_runs(const Options& cfg, std::size_t count,
                                                  std::vector<ParamRange> norm_and_bias) {
  if (!cfg.no_decay_norm_bias || cfg.weight_decay == 0.0) return {{0, count, true}};
  std::sort(norm_and_bias.begin(), norm_and_bias.end());
  std::vector<Run> runs;
  const auto append = [&](std::size_t b, std::size_t e, bool decay) {
    if (b >= e) return;
    if (!runs.empty() && runs.back().decay == decay && runs.back().end == b)
      runs.back().end = e;
    else
      runs.push_back({b, e, decay});
  };
  std::size_t pos = 0;
  for (const auto& [b, e] : norm_and_bias) {
    if (b < pos || e > count)
      throw Error("internal: no-decay parameter range [" + std::to_string(b) + ", " +
                  std::to_string(e) + ") overlaps another or lies outside the " +
                  std::to_string(count) + " parameters");
    append(pos, b, true);
    append(b, e, false);
    pos = e;
  }
  append(pos, count, true);
  return runs;
}

float* Optimizer::add_state(const std::string& name, backend::Backend& be, std::size_t count) {
  state_.emplace_back(name, backend::Mirrored(be, static_cast<std::int64_t>(count)));
  return state_.back().second.device().data();
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, m] : state_) out.emplace_back(name, m.host());
  return out;
}

void Optimizer::pull_state() const {
  for (const auto& [name, m] : state_) m.pull();
}

void Optimizer::push_state() {
  for (const auto& [name, m] : state_) m.push();
}

std::unique_ptr<Optimizer> Optimizer::create(const Options& cfg, backend::Backend& be,
                                             std::size_t count,
                                             const std::vector<ParamRange>& norm_and_bias) {
  if (cfg.name == "sgd") return std::make_unique<Sgd>(cfg, be, count, norm_and_bias);
  if (cfg.name == "adam") return std::make_unique<Adam>(cfg, be, count, false, norm_and_bias);
  if (cfg.name == "adamw") return std::make_unique<Adam>(cfg, be, count, true, norm_and_bias);
  throw ConfigError("optim.name = '" + cfg.name + "': unknown optimizer (sgd, adam, adamw)");
}

}  // namespace ddp::optim
