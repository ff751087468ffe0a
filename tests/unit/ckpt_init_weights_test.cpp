// train.init on real snapshots: every tensor of the same model is loaded, a head of another class
// count keeps its initialisation (and the file's is left out), any other difference is an error
// naming each tensor; a weights file is refused by a resume.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ckpt_test_util.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/init_weights.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "layer_spec_util.hpp"

namespace ddp::ckpt {
namespace {

using testutil::L;

std::vector<nn::LayerSpec> net(std::int64_t classes, std::int64_t width = 3) {
  return {L("conv2d", "conv1", width, 3, 1), L("batchnorm", "bn1"), L("relu", "relu1"),
          L("flatten", "flat"), L("linear", "fc", classes)};
}

struct Net {
  Net(std::int64_t classes, std::uint64_t seed, std::int64_t width = 3)
      : model(net(classes, width), Shape{2, 4, 4}, classes, *be) {
    model.init_parameters(seed);
    // Running statistics that are not the initial 0 and 1.
    for (const auto& b : model.named_buffers())
      for (std::int64_t i = 0; i < b.tensor.numel(); ++i)
        b.tensor.data()[i] = 0.5f + 0.25f * static_cast<float>(i);
    model.push_state();
  }
  std::vector<float> tensor(const std::string& name) const {
    for (const auto* list : {&model.named_params(), &model.named_buffers()})
      for (const auto& t : *list)
        if (t.name == name) return {t.tensor.data(), t.tensor.data() + t.tensor.numel()};
    ADD_FAILURE() << name;
    return {};
  }
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  nn::Model model;
};

Snapshot saved(const test_util::ScratchDir& dir, const Net& net) {
  optim::Options c;
  c.momentum = 0.9;
  auto opt = optim::Optimizer::create(c, *net.be, net.model.host_params().size());
  SnapshotMeta meta;
  meta.config_toml = "[train]\n";
  const auto file = dir.path() / "snapshot_e0001.h5";
  write_snapshot(file, net.model, *opt, "sgd", meta);
  return read_snapshot(file);
}

TEST(InitWeights, TheSameModelLoadsEveryTensor) {
  test_util::ScratchDir dir;
  const Net source(4, 1);
  Net target(4, 2);
  const auto report = init_from(saved(dir, source), target.model);
  EXPECT_EQ(report.loaded, 8u);  // 6 parameters, 2 running statistics
  EXPECT_TRUE(report.reinitialised.empty());
  EXPECT_EQ(target.model.digest(), source.model.digest());
  EXPECT_NE(report.line().find("8 tensors loaded from"), std::string::npos) << report.line();
  EXPECT_NE(report.line().find("a ddp_train snapshot): every tensor of the model"),
            std::string::npos)
      << report.line();
}

TEST(InitWeights, AnotherClassCountReinitialisesTheHead) {
  test_util::ScratchDir dir;
  const Net source(10, 1);
  Net target(5, 2);
  const Net fresh(5, 2);  // what the head starts as
  const auto report = init_from(saved(dir, source), target.model);
  EXPECT_EQ(report.loaded, 6u);
  EXPECT_EQ(report.reinitialised, (std::vector<std::string>{"fc.weight [5, 48]", "fc.bias [5]"}));
  EXPECT_EQ(report.left_out, (std::vector<std::string>{"fc.weight [10, 48]", "fc.bias [10]"}));
  for (const auto* name : {"conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias",
                           "bn1.running_mean", "bn1.running_var"})
    EXPECT_EQ(target.tensor(name), source.tensor(name)) << name;
  EXPECT_EQ(target.tensor("fc.weight"), fresh.tensor("fc.weight"));
  EXPECT_EQ(target.tensor("fc.bias"), fresh.tensor("fc.bias"));
  EXPECT_NE(report.line().find("re-initialised (the classes differ): fc.weight [5, 48], fc.bias "
                               "[5]; left out of the file: fc.weight [10, 48], fc.bias [10]"),
            std::string::npos)
      << report.line();
}

TEST(InitWeights, AnyOtherDifferenceIsNamedAndChangesNothing) {
  test_util::ScratchDir dir;
  const Net source(4, 1, 3);
  Net target(4, 2, 5);  // conv1 of 5 channels: every tensor below the head differs
  const auto digest = target.model.digest();
  try {
    init_from(saved(dir, source), target.model);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("conv1.weight: the file has [3, 2, 3, 3], the model needs [5, 2, 3, 3]"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("bn1.running_var: the file has [3], the model needs [5]"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("only the classifier 'fc' may differ"), std::string::npos) << msg;
  }
  EXPECT_EQ(target.model.digest(), digest);

  // Names: a model with a layer the file lacks, and a file with one the model lacks.
  nn::Model renamed({L("conv2d", "stem", 3, 3, 1), L("batchnorm", "bn1"), L("relu", "relu1"),
                     L("flatten", "flat"), L("linear", "fc", 4)},
                    Shape{2, 4, 4}, 4, *target.be);
  try {
    init_from(saved(dir, source), renamed);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing from the file: stem.weight [3, 2, 3, 3]"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("not in the model: conv1.weight [3, 2, 3, 3]"), std::string::npos) << msg;
  }
}

TEST(InitWeights, AResumeRefusesAWeightsFile) {
  test_util::ScratchDir dir;
  const Net source(4, 1);
  Snapshot s = saved(dir, source);
  s.meta.kind = kWeightsKind;
  s.meta.imported_from = "/data/resnet.pth";
  Net target(4, 2);
  auto opt = optim::Optimizer::create({}, *target.be, target.model.params().size());
  try {
    restore(s, target.model, *opt);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("is a weights file (imported from /data/resnet.pth), "
                                         "not a run's snapshot"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(init_from(s, target.model).line().find("(weights imported from /data/resnet.pth)"),
            std::string::npos);
}

}  // namespace
}  // namespace ddp::ckpt
