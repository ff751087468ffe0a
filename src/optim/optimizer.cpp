#include "ddp/optim/optimizer.hpp"

#include <algorithm>

#include "ddp/error.hpp"

namespace ddp::optim {
namespace {

std::size_t state_size(const std::vector<UpdateRun>& runs) {
  return runs.empty() ? 0 : runs.back().state + (runs.back().end - runs.back().begin);
}

class Sgd final : public Optimizer {
 public:
  Sgd(const Options& c, backend::Backend& be, std::vector<UpdateRun> runs)
      : Optimizer(std::move(runs)), be_(be) {
    h_.momentum = static_cast<float>(c.momentum);
    h_.nesterov = c.nesterov;
    if (c.momentum > 0) momentum_ = add_state("momentum", be);
  }
  void step(std::span<float> params, std::span<const float> grads, double lr,
            const std::uint32_t* skip_if) override {
    h_.skip_if = skip_if;
    for (const UpdateRun& r : runs_) {
      auto h = h_;
      h.lr = static_cast<float>(lr * r.lr_mult);
      h.weight_decay = static_cast<float>(r.weight_decay);
      be_.sgd_step(static_cast<std::int64_t>(r.end - r.begin), h, params.data() + r.begin,
                   grads.data() + r.begin, momentum_ ? momentum_ + r.state : nullptr);
    }
    ++steps_;
  }

 private:
  backend::Backend& be_;
  backend::Backend::SgdHyper h_;
  float* momentum_ = nullptr;
};

class Adam final : public Optimizer {
 public:
  Adam(const Options& c, backend::Backend& be, std::vector<UpdateRun> runs, bool decoupled)
      : Optimizer(std::move(runs)),
        be_(be),
        m_(add_state("exp_avg", be)),
        v_(add_state("exp_avg_sq", be)) {
    h_.beta1 = static_cast<float>(c.beta1);
    h_.beta2 = static_cast<float>(c.beta2);
    h_.eps = static_cast<float>(c.eps);
    h_.decoupled = decoupled;
  }
  void step(std::span<float> params, std::span<const float> grads, double lr,
            const std::uint32_t* skip_if) override {
    h_.step = ++steps_;
    h_.skip_if = skip_if;
    for (const UpdateRun& r : runs_) {
      auto h = h_;
      h.lr = static_cast<float>(lr * r.lr_mult);
      h.weight_decay = static_cast<float>(r.weight_decay);
      be_.adam_step(static_cast<std::int64_t>(r.end - r.begin), h, params.data() + r.begin,
                    grads.data() + r.begin, m_ + r.state, v_ + r.state);
    }
  }

  bool needs_applied_step_count() const override { return true; }

 private:
  backend::Backend& be_;
  backend::Backend::AdamHyper h_;
  float* m_;
  float* v_;
};

}  // namespace

Optimizer::Optimizer(std::vector<UpdateRun> runs) : runs_(std::move(runs)) {
  std::size_t state = 0, end = 0;
  for (const UpdateRun& r : runs_) {
    if (r.begin < end || r.end <= r.begin || r.state != state)
      throw Error("internal: update run [" + std::to_string(r.begin) + ", " +
                  std::to_string(r.end) + ") overlaps, is empty or is not packed");
    end = r.end;
    state += r.end - r.begin;
  }
}

float* Optimizer::add_state(const std::string& name, backend::Backend& be) {
  state_.emplace_back(name, backend::Mirrored(be, static_cast<std::int64_t>(state_size(runs_))));
  return state_.back().second.device().data();
}

std::optional<std::size_t> Optimizer::state_offset(std::size_t param_offset) const {
  // The last run starting at or before the offset.
  auto it = std::upper_bound(runs_.begin(), runs_.end(), param_offset,
                             [](std::size_t off, const UpdateRun& r) { return off < r.begin; });
  if (it == runs_.begin()) return std::nullopt;
  --it;
  if (param_offset >= it->end) return std::nullopt;
  return it->state + (param_offset - it->begin);
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
                                             std::vector<UpdateRun> runs) {
  if (cfg.name == "sgd") return std::make_unique<Sgd>(cfg, be, std::move(runs));
  if (cfg.name == "adam") return std::make_unique<Adam>(cfg, be, std::move(runs), false);
  if (cfg.name == "adamw") return std::make_unique<Adam>(cfg, be, std::move(runs), true);
  throw ConfigError("optim.name = '" + cfg.name + "': unknown optimizer (sgd, adam, adamw)");
}

std::unique_ptr<Optimizer> Optimizer::create(const Options& cfg, backend::Backend& be,
                                             std::size_t count,
                                             const std::vector<ParamRange>& norm_and_bias) {
  return create(cfg, be, plain_update_runs(cfg, count, norm_and_bias));
}

}  // namespace ddp::optim
