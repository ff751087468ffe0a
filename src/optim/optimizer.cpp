#include "ddp/optim/optimizer.hpp"

#include "ddp/error.hpp"

namespace ddp::optim {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const app::OptimConfig& c, backend::Backend& be, std::size_t count) : be_(be) {
    h_.momentum = static_cast<float>(c.momentum);
    h_.weight_decay = static_cast<float>(c.weight_decay);
    h_.nesterov = c.nesterov;
    if (c.momentum > 0) momentum_ = add_state("momentum", be, count);
  }
  void step(std::span<float> params, std::span<const float> grads, double lr) override {
    h_.lr = static_cast<float>(lr);
    be_.sgd_step(static_cast<std::int64_t>(params.size()), h_, params.data(), grads.data(),
                 momentum_);
    ++steps_;
  }

 private:
  backend::Backend& be_;
  backend::Backend::SgdHyper h_;
  float* momentum_ = nullptr;
};

class Adam final : public Optimizer {
 public:
  Adam(const app::OptimConfig& c, backend::Backend& be, std::size_t count, bool decoupled)
      : be_(be), m_(add_state("exp_avg", be, count)), v_(add_state("exp_avg_sq", be, count)) {
    h_.beta1 = static_cast<float>(c.beta1);
    h_.beta2 = static_cast<float>(c.beta2);
    h_.eps = static_cast<float>(c.eps);
    h_.weight_decay = static_cast<float>(c.weight_decay);
    h_.decoupled = decoupled;
  }
  void step(std::span<float> params, std::span<const float> grads, double lr) override {
    h_.lr = static_cast<float>(lr);
    h_.step = ++steps_;
    be_.adam_step(static_cast<std::int64_t>(params.size()), h_, params.data(), grads.data(), m_,
                  v_);
  }

 private:
  backend::Backend& be_;
  backend::Backend::AdamHyper h_;
  float* m_;
  float* v_;
};

}  // namespace

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

std::unique_ptr<Optimizer> Optimizer::create(const app::OptimConfig& cfg, backend::Backend& be,
                                             std::size_t count) {
  if (cfg.name == "sgd") return std::make_unique<Sgd>(cfg, be, count);
  if (cfg.name == "adam") return std::make_unique<Adam>(cfg, be, count, false);
  if (cfg.name == "adamw") return std::make_unique<Adam>(cfg, be, count, true);
  throw ConfigError("optim.name = '" + cfg.name + "': unknown optimizer (sgd, adam, adamw)");
}

}  // namespace ddp::optim
