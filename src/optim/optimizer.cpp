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
    if (c.momentum > 0) momentum_ = Tensor::zeros(Shape{static_cast<std::int64_t>(count)});
  }
  void step(std::span<float> params, std::span<const float> grads, double lr) override {
    h_.lr = static_cast<float>(lr);
    be_.sgd_step(static_cast<std::int64_t>(params.size()), h_, params.data(), grads.data(),
                 momentum_.data());
    ++steps_;
  }
  std::vector<std::pair<std::string, Tensor>> state() override {
    if (momentum_.empty()) return {};
    return {{"momentum", momentum_}};
  }

 private:
  backend::Backend& be_;
  backend::Backend::SgdHyper h_;
  Tensor momentum_;
};

class Adam final : public Optimizer {
 public:
  Adam(const app::OptimConfig& c, backend::Backend& be, std::size_t count, bool decoupled)
      : be_(be),
        m_(Tensor::zeros(Shape{static_cast<std::int64_t>(count)})),
        v_(Tensor::zeros(Shape{static_cast<std::int64_t>(count)})) {
    h_.beta1 = static_cast<float>(c.beta1);
    h_.beta2 = static_cast<float>(c.beta2);
    h_.eps = static_cast<float>(c.eps);
    h_.weight_decay = static_cast<float>(c.weight_decay);
    h_.decoupled = decoupled;
  }
  void step(std::span<float> params, std::span<const float> grads, double lr) override {
    h_.lr = static_cast<float>(lr);
    h_.step = ++steps_;
    be_.adam_step(static_cast<std::int64_t>(params.size()), h_, params.data(), grads.data(),
                  m_.data(), v_.data());
  }
  std::vector<std::pair<std::string, Tensor>> state() override {
    return {{"exp_avg", m_}, {"exp_avg_sq", v_}};
  }

 private:
  backend::Backend& be_;
  backend::Backend::AdamHyper h_;
  Tensor m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> Optimizer::create(const app::OptimConfig& cfg, backend::Backend& be,
                                             std::size_t count) {
  if (cfg.name == "sgd") return std::make_unique<Sgd>(cfg, be, count);
  if (cfg.name == "adam") return std::make_unique<Adam>(cfg, be, count, false);
  if (cfg.name == "adamw") return std::make_unique<Adam>(cfg, be, count, true);
  throw ConfigError("optim.name = '" + cfg.name + "': unknown optimizer (sgd, adam, adamw)");
}

}  // namespace ddp::optim
