// train.freeze below the trainer, on real models: frozen parameters get no gradient and no update,
// frozen batch norm runs in eval mode (its statistics stay), the layers that still train get the
// gradients an unfrozen model gives them, and a snapshot of such a run resumes bitwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/optim/param_groups.hpp"
#include "ddp/optim/param_pattern.hpp"
#include "ddp/rng.hpp"
#include "layer_spec_util.hpp"

namespace ddp::nn {
namespace {

using testutil::L;

const Shape kInput{2, 6, 6};
constexpr std::int64_t kClasses = 4;
constexpr std::int64_t kBatch = 4;

std::vector<LayerSpec> freeze_net() {
  return {L("conv2d", "conv1", 3, 3, 1), L("batchnorm", "bn1"),      L("relu", "relu1"),
          L("conv2d", "conv2", 4, 3, 1), L("batchnorm", "bn2"),      L("relu", "relu2"),
          L("flatten", "flat"),          L("linear", "fc", kClasses)};
}

// A model, its optimizer (SGD with momentum and weight decay, so that a parameter without a
// gradient would still move if it were updated) and training steps on seeded data.
struct Trial {
  explicit Trial(const std::vector<std::string>& freeze, bool bn_eval = true)
      : model(freeze_net(), kInput, kClasses, *be) {
    model.init_parameters(3);
    const auto infos = optim::param_infos(model);
    model.freeze(freeze.empty() ? std::vector<bool>(infos.size(), false)
                                : optim::select(freeze, infos, "train.freeze"),
                 bn_eval);
    cfg.momentum = 0.9;
    cfg.weight_decay = 0.01;
    opt =
        optim::Optimizer::create(cfg, *be, optim::plan_update_runs(cfg, optim::param_infos(model)));
    model.reserve(kBatch);
  }
  // Forward and backward of batch `step` (gradients in model.grads()).
  void forward_backward(int step) {
    std::vector<float> x(static_cast<std::size_t>(kBatch * kInput.numel())),
        dl(static_cast<std::size_t>(kBatch * kClasses));
    CounterRng rng(hash_words(21, static_cast<std::uint64_t>(step)));
    for (auto& v : x) v = rng.next_float() * 2 - 1;
    const std::vector<std::int32_t> y{0, 1, 2, 3};
    const Tensor& z = model.forward(Tensor::view(x.data(), kInput.with_batch(kBatch)),
                                    StepContext{Mode::train, 0, nullptr});
    be->softmax_xent(kBatch, kClasses, z.data(), y.data(), 0.0f, 1.0f / kBatch, dl.data());
    model.backward(Tensor::view(dl.data(), Shape{kBatch, kClasses}));
  }
  void train(int steps, int first = 0) {
    for (int s = first; s < first + steps; ++s) {
      forward_backward(s);
      opt->step(model.params(), model.grads(), 0.1);
    }
  }
  std::vector<float> tensor(const std::string& name) const {
    for (const auto* list : {&model.named_params(), &model.named_buffers()})
      for (const auto& t : *list)
        if (t.name == name) return {t.tensor.data(), t.tensor.data() + t.tensor.numel()};
    ADD_FAILURE() << "no tensor " << name;
    return {};
  }
  std::vector<float> grad(const std::string& name) {
    for (const auto& t : model.named_params())
      if (t.name == name)
        return {model.grads().data() + t.offset,
                model.grads().data() + t.offset + static_cast<std::size_t>(t.tensor.numel())};
    ADD_FAILURE() << "no parameter " << name;
    return {};
  }
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  Model model;
  optim::Options cfg;
  std::unique_ptr<optim::Optimizer> opt;
};

std::vector<std::string> all_tensors(const Model& m) {
  std::vector<std::string> out;
  for (const auto& t : m.named_params()) out.push_back(t.name);
  for (const auto& t : m.named_buffers()) out.push_back(t.name);
  return out;
}

// Everything but fc frozen: after training, every frozen tensor and every running statistic is
// bitwise as it was, fc has changed, frozen gradients are 0, only fc's backward runs and only fc
// has optimizer state.
TEST(ModelFreeze, EverythingButTheHeadStaysBitwise) {
  Trial run({"conv1", "bn1", "conv2", "bn2"});
  std::map<std::string, std::vector<float>> before;
  for (const auto& name : all_tensors(run.model)) before[name] = run.tensor(name);
  run.train(3);
  for (const auto& name : all_tensors(run.model)) {
    if (name.starts_with("fc."))
      EXPECT_NE(run.tensor(name), before[name]) << name << " did not train";
    else
      EXPECT_EQ(run.tensor(name), before[name]) << name << " changed";
  }
  for (const auto& p : run.model.named_params())
    if (!p.name.starts_with("fc.")) {
      const auto g = run.grad(p.name);
      EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; })) << p.name;
    }
  for (std::size_t i = 0; i < run.model.num_layers(); ++i) {
    const auto& name = run.model.layer(i).name();
    EXPECT_EQ(run.model.runs_backward(i), name == "fc") << name;
    EXPECT_EQ(run.model.eval_in_training(i), name == "bn1" || name == "bn2") << name;
  }
  ASSERT_EQ(run.opt->state().size(), 1u);
  std::size_t fc = 0;  // fc.weight's offset: fc is last, its state is all there is
  for (const auto& p : run.model.named_params())
    if (p.name == "fc.weight") fc = p.offset;
  EXPECT_EQ(run.opt->state()[0].second.numel(),
            static_cast<std::int64_t>(run.model.params().size() - fc));
}

// What still trains gets the gradient an unfrozen model computes, bit for bit, whether the frozen
// layers lie below it (no backward there) or between trained ones (backward passes through, their
// own gradients are dropped). Batch norm keeps training (bn_eval false) so that the forward is the
// same.
TEST(ModelFreeze, TrainedLayersGetTheUnfrozenGradients) {
  for (const std::vector<std::string>& freeze :
       {std::vector<std::string>{"conv1"}, std::vector<std::string>{"conv2", "bn1"},
        std::vector<std::string>{"*.bias"}}) {
    Trial frozen(freeze, false), plain({});
    frozen.forward_backward(0);
    plain.forward_backward(0);
    const auto infos = optim::param_infos(frozen.model);
    const auto hit = optim::select(freeze, infos, "train.freeze");
    for (std::size_t j = 0; j < infos.size(); ++j) {
      const auto g = frozen.grad(infos[j].name);
      if (hit[j])
        EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; }))
            << infos[j].name << " (freeze " << freeze[0] << ")";
      else
        EXPECT_EQ(g, plain.grad(infos[j].name)) << infos[j].name << " (freeze " << freeze[0] << ")";
    }
  }
}

TEST(ModelFreeze, EvalModeBatchNormAboveATrainedLayerIsRefused) {
  try {
    Trial run({"bn2"});  // conv2 below it trains
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("batch norm 'bn2' is frozen"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'conv2' below it trains"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train.frozen_bn = \"train\""), std::string::npos) << msg;
  }
  // Kept training: its parameters stay, its running statistics move.
  Trial run({"bn2"}, false);
  const auto mean = run.tensor("bn2.running_mean"), weight = run.tensor("bn2.weight");
  run.train(2);
  EXPECT_NE(run.tensor("bn2.running_mean"), mean);
  EXPECT_EQ(run.tensor("bn2.weight"), weight);
  EXPECT_NE(run.tensor("conv2.weight"), Trial({"bn2"}, false).tensor("conv2.weight"));
}

// A snapshot of a run with frozen parameters holds no optimizer state for them, and resumes
// bitwise into a run with the same freeze; a run that freezes otherwise is told what differs.
TEST(ModelFreeze, SnapshotResumesBitwise) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ddp_freeze_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "snapshot_e0001.h5";
  const std::vector<std::string> freeze = {"conv1", "bn1"};
  Trial a(freeze);
  a.train(2);
  ckpt::SnapshotMeta meta;
  meta.config_toml = "[train]\n";
  ckpt::write_snapshot(file, a.model, *a.opt, "sgd", meta);
  const ckpt::Snapshot s = ckpt::read_snapshot(file);
  ASSERT_EQ(s.optimizer.count("momentum"), 1u);
  for (const auto& p : a.model.named_params())
    EXPECT_EQ(s.optimizer.at("momentum").count(p.name),
              p.name.starts_with("conv1.") || p.name.starts_with("bn1.") ? 0u : 1u)
        << p.name;

  Trial b(freeze);
  ckpt::restore(s, b.model, *b.opt);
  a.train(2, 2);
  b.train(2, 2);
  EXPECT_EQ(a.model.digest(), b.model.digest());
  for (const auto& p : a.model.named_params()) EXPECT_EQ(a.tensor(p.name), b.tensor(p.name));

  Trial unfrozen({});
  try {
    ckpt::restore(s, unfrozen.model, *unfrozen.opt);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer state momentum of conv1.weight: missing"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(ModelFreeze, NothingFrozenIsTheUnfrozenModel) {
  Trial run({});
  EXPECT_FALSE(run.model.any_frozen());
  for (std::size_t i = 0; i < run.model.num_layers(); ++i) {
    EXPECT_TRUE(run.model.runs_backward(i));
    const auto r = run.model.grad_range(i);
    if (r.second > 0)
      EXPECT_EQ(run.model.trained_grad_ranges(i),
                (std::vector<std::pair<std::size_t, std::size_t>>{r}));
  }
  EXPECT_EQ(
      run.model.trained_buffer_ranges(),
      (std::vector<std::pair<std::size_t, std::size_t>>{{0, run.model.host_buffers().size()}}));
}

}  // namespace
}  // namespace ddp::nn
