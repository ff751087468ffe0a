// [[model.layers]] and presets: default names, per-type validation with file and line, the model
// choice between a preset and explicit layers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ddp/app/config.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/presets.hpp"

namespace ddp::app {
namespace {

using nn::preset_layers;

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ConfigLayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("ddp_config_layers_test_" + std::to_string(::getpid()) + "_" + info->name() + ".toml");
  }
  void TearDown() override { fs::remove(path_); }

  Config load(const std::string& text, const Overrides& overrides = {}) {
    std::ofstream(path_) << text;
    return load_config(path_, overrides);
  }

  std::string error_for(const std::string& text, const Overrides& overrides = {}) {
    try {
      load(text, overrides);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "load_config accepted:\n" << text;
    return "";
  }

  std::string at(int line) const { return path_.string() + ":" + std::to_string(line); }

  fs::path path_;
};

std::vector<std::string> names(const std::vector<nn::LayerSpec>& layers) {
  std::vector<std::string> out;
  for (const auto& l : layers) out.push_back(l.name);
  return out;
}

std::vector<std::string> types(const std::vector<nn::LayerSpec>& layers) {
  std::vector<std::string> out;
  for (const auto& l : layers) out.push_back(l.type);
  return out;
}

TEST_F(ConfigLayersTest, ReadsLayersWithDefaultNamesAndLines) {
  const Config c = load(R"([[model.layers]]
type = "conv2d"
out_channels = 8
kernel = 3
stride = 2
padding = 1
bias = false
[[model.layers]]
type = "batchnorm"
momentum = 0.2
eps = 1e-3
[[model.layers]]
type = "relu"
[[model.layers]]
type = "maxpool"
kernel = 2
[[model.layers]]
type = "avgpool"
kernel = 3
padding = 1
[[model.layers]]
type = "conv2d"
name = "head_conv"
out_channels = 4
kernel = 1
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dropout"
p = 0.25
[[model.layers]]
type = "linear"
out_features = 10
)");
  EXPECT_EQ(c.model.preset, "");
  EXPECT_THAT(names(c.model.layers), ElementsAre("conv1", "bn1", "relu1", "pool1", "pool2",
                                                 "head_conv", "flatten1", "drop1", "fc1"));
  const auto& conv = c.model.layers[0];
  EXPECT_EQ(conv.line, 1);
  EXPECT_EQ(conv.out_channels, 8);
  EXPECT_EQ(conv.kernel, 3);
  EXPECT_EQ(conv.stride, 2);
  EXPECT_EQ(conv.padding, 1);
  EXPECT_FALSE(conv.bias);
  EXPECT_EQ(c.model.layers[1].line, 8);
  EXPECT_FLOAT_EQ(c.model.layers[1].momentum, 0.2f);
  EXPECT_FLOAT_EQ(c.model.layers[1].eps, 1e-3f);
  EXPECT_EQ(c.model.layers[4].padding, 1);
  EXPECT_FLOAT_EQ(c.model.layers[7].p, 0.25f);
  EXPECT_TRUE(c.model.layers[8].bias);
  EXPECT_EQ(c.model.layers[8].out_features, 10);
}

TEST_F(ConfigLayersTest, MissingRequiredKey) {
  EXPECT_THAT(error_for("[model]\n\n[[model.layers]]\ntype = \"conv2d\"\nout_channels = 6\n"),
              HasSubstr(at(3) + ": model.layers[0] (conv2d 'conv1'): missing key 'kernel'"));
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"relu\"\n[[model.layers]]\ntype = \"linear\"\n"),
              HasSubstr(at(3) + ": model.layers[1] (linear 'fc1'): missing key 'out_features'"));
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"maxpool\"\n"),
              HasSubstr(at(1) + ": model.layers[0] (maxpool 'pool1'): missing key 'kernel'"));
  EXPECT_THAT(error_for("[[model.layers]]\nkernel = 3\n"),
              HasSubstr(at(1) + ": model.layers[0]: missing key 'type'"));
}

TEST_F(ConfigLayersTest, KeyThatDoesNotApply) {
  EXPECT_THAT(error_for(R"([[model.layers]]
type = "flatten"
[[model.layers]]
type = "linear"
out_features = 10
kernel = 3
)"),
              HasSubstr(at(6) + ": model.layers[1] (linear 'fc1'): key 'kernel' does not apply to "
                                "linear"));
  EXPECT_THAT(
      error_for("[[model.layers]]\ntype = \"relu\"\np = 0.5\n"),
      HasSubstr(at(3) + ": model.layers[0] (relu 'relu1'): key 'p' does not apply to relu"));
}

TEST_F(ConfigLayersTest, UnknownTypeOrKey) {
  EXPECT_THAT(
      error_for("[[model.layers]]\ntype = \"conv\"\n"),
      HasSubstr(at(2) + ": model.layers[0]: type = \"conv\": must be one of conv2d, linear, "
                        "batchnorm, relu, relu6"));
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"conv\"\n"),
              HasSubstr("did you mean 'conv2d'?"));
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"maxpool\"\nkernal = 2\n"),
              HasSubstr(at(3) + ": model.layers[0] (maxpool 'pool1'): unknown key 'kernal'; did "
                                "you mean 'kernel'?"));
}

TEST_F(ConfigLayersTest, DuplicateNames) {
  EXPECT_THAT(error_for(R"([[model.layers]]
type = "relu"
name = "a"
[[model.layers]]
type = "flatten"
name = "a"
)"),
              HasSubstr(at(4) + ": model.layers[1] (flatten 'a'): duplicate layer name 'a' (also "
                                "model.layers[0] (relu 'a') on line 1)"));
  // A given name may collide with a default one.
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"relu\"\nname = \"relu2\"\n"
                        "[[model.layers]]\ntype = \"relu\"\n"),
              HasSubstr(at(4) + ": model.layers[1] (relu 'relu2'): duplicate layer name 'relu2'"));
}

TEST_F(ConfigLayersTest, ValueErrors) {
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"dropout\"\np = 1.0\n"),
              HasSubstr(at(3) + ": model.layers[0] (dropout 'drop1'): p = 1: must be in [0, 1)"));
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"conv2d\"\nout_channels = 0\nkernel = 3\n"),
              HasSubstr(at(3) + ": model.layers[0] (conv2d 'conv1'): out_channels = 0: must be "
                                ">= 1"));
  EXPECT_THAT(
      error_for("[[model.layers]]\ntype = \"conv2d\"\nout_channels = 6\nkernel = \"3\"\n"),
      HasSubstr(at(4) + ": model.layers[0] (conv2d 'conv1'): kernel: expected an integer or "
                        "[height, width], got string \"3\""));
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"relu\"\nname = \"a/b\"\n"),
              HasSubstr(at(3) + ": model.layers[0] (relu 'relu1'): name = \"a/b\": must be "
                                "non-empty"));
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"maxpool\"\nkernel = 2\npadding = 2\n"),
              HasSubstr(at(4) + ": model.layers[0] (maxpool 'pool1'): padding = 2: must be at most "
                                "kernel / 2"));
  EXPECT_THAT(error_for("[[model.layers]]\ntype = \"batchnorm\"\neps = 1e-60\n"),
              HasSubstr("representable as a 32-bit float"));
}

TEST_F(ConfigLayersTest, LayerListShape) {
  EXPECT_THAT(error_for("[model]\nlayers = 5\n"),
              HasSubstr(at(2) + ": model.layers: expected an array of tables ([[model.layers]]), "
                                "got integer 5"));
  EXPECT_THAT(error_for("[model]\nlayers = []\n"), HasSubstr(at(2) + ": model.layers: the list is "
                                                                     "empty"));
  EXPECT_THAT(error_for("[model]\nlayers = [1]\n"),
              HasSubstr(at(2) + ": model.layers[0]: expected a table, got integer 1"));
  EXPECT_THAT(error_for("[model]\nlayer = []\n"),
              HasSubstr(at(2) + ": unknown key 'model.layer'; did you mean 'model.layers'?"));
}

TEST_F(ConfigLayersTest, LastLinearMustMatchTheClasses) {
  EXPECT_THAT(error_for("[data]\ndataset = \"cifar100\"\n[[model.layers]]\ntype = \"flatten\"\n"
                        "[[model.layers]]\ntype = \"linear\"\nout_features = 10\n"),
              HasSubstr(at(5) + ": model.layers[1] (linear 'fc1'): out_features = 10, but "
                                "data.dataset = cifar100 has 100 classes"));
}

TEST_F(ConfigLayersTest, PresetOrLayersNotBoth) {
  EXPECT_THAT(error_for("[model]\npreset = \"vgg_small\"\n[[model.layers]]\ntype = \"flatten\"\n"
                        "[[model.layers]]\ntype = \"linear\"\nout_features = 10\n"),
              HasSubstr(at(2) + ": model.preset = \"vgg_small\": both a preset and "
                                "[[model.layers]] (line 3) describe the model"));
  EXPECT_THAT(error_for("[model]\npreset = \"\"\n"),
              HasSubstr(at(2) + ": model.preset = \"\": no model: name a preset (lenet, "
                                "lenet_mnist, vgg_small, vgg_small_bn, resnet20, resnet56, "
                                "resnet18, resnet34, resnet50, mobilenet_v2) or give "
                                "[[model.layers]]"));
  try {
    load_config("", {{"model.preset", ""}});
    ADD_FAILURE() << "accepted no model";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("command line: --model.preset '\"\"': no model"));
  }
}

TEST_F(ConfigLayersTest, CommandLinePresetReplacesFileLayers) {
  const Config c = load(
      "[[model.layers]]\ntype = \"flatten\"\n[[model.layers]]\ntype = "
      "\"linear\"\nout_features = 10\n",
      {{"model.preset", "vgg_small"}});
  EXPECT_EQ(c.model.preset, "vgg_small");
  EXPECT_EQ(c.model.layers.size(), preset_layers("vgg_small").size());
  // An empty preset on the command line keeps the file's layers.
  const Config d = load(
      "[model]\npreset = \"lenet\"\n[[model.layers]]\ntype = \"flatten\"\n"
      "[[model.layers]]\ntype = \"linear\"\nout_features = 10\n",
      {{"model.preset", ""}});
  EXPECT_EQ(d.model.preset, "");
  EXPECT_EQ(d.model.layers.size(), 2u);
}

TEST_F(ConfigLayersTest, PresetFromFile) {
  const Config c = load("[model]\npreset = \"vgg_small_bn\"\n");
  EXPECT_EQ(c.model.preset, "vgg_small_bn");
  EXPECT_EQ(names(c.model.layers), names(preset_layers("vgg_small_bn")));
  EXPECT_EQ(c.model.layers.front().line, 0);  // built in code
}

TEST_F(ConfigLayersTest, PresetClassifierFollowsTheDataset) {
  const Config c = load("[data]\ndataset = \"cifar100\"\n[model]\npreset = \"lenet\"\n");
  EXPECT_EQ(c.model.layers.back().out_features, 100);
  EXPECT_EQ(load("").model.layers.back().out_features, 10);
}

TEST(ConfigPresets, Lenet) {
  const auto l = preset_layers("lenet");
  EXPECT_THAT(types(l), ElementsAre("conv2d", "relu", "maxpool", "conv2d", "relu", "maxpool",
                                    "flatten", "linear", "relu", "linear", "relu", "linear"));
  EXPECT_THAT(names(l), ElementsAre("conv1", "relu1", "pool1", "conv2", "relu2", "pool2",
                                    "flatten1", "fc1", "relu3", "fc2", "relu4", "fc3"));
  EXPECT_EQ(l[0].out_channels, 6);
  EXPECT_EQ(l[0].kernel, 5);
  EXPECT_EQ(l[0].padding, 0);
  EXPECT_EQ(l[2].kernel, 2);
  EXPECT_EQ(l[3].out_channels, 16);
  EXPECT_EQ(l[3].kernel, 5);
  EXPECT_EQ(l[7].out_features, 120);
  EXPECT_EQ(l[9].out_features, 84);
  EXPECT_EQ(l[11].out_features, 10);
  for (const auto& s : l) EXPECT_EQ(s.line, 0);
}

TEST(ConfigPresets, LenetMnistPadsTheFirstConvolution) {
  const auto l = preset_layers("lenet_mnist");
  const auto base = preset_layers("lenet");
  ASSERT_EQ(l.size(), base.size());
  EXPECT_EQ(l[0].padding, 2);
  EXPECT_EQ(names(l), names(base));
  EXPECT_EQ(l[3].padding, 0);
}

TEST(ConfigPresets, VggSmall) {
  const auto l = preset_layers("vgg_small");
  EXPECT_THAT(types(l), ElementsAre("conv2d", "relu", "maxpool", "conv2d", "relu", "maxpool",
                                    "flatten", "linear", "relu", "linear"));
  EXPECT_THAT(names(l), ElementsAre("conv1", "relu1", "pool1", "conv2", "relu2", "pool2",
                                    "flatten1", "fc1", "relu3", "fc2"));
  EXPECT_EQ(l[0].out_channels, 32);
  EXPECT_EQ(l[0].kernel, 3);
  EXPECT_EQ(l[0].padding, 1);
  EXPECT_EQ(l[3].out_channels, 64);
  EXPECT_EQ(l[3].padding, 1);
  EXPECT_EQ(l[7].out_features, 512);
  EXPECT_EQ(l[9].out_features, 10);
}

TEST(ConfigPresets, VggSmallBnNormalisesBeforeEachRelu) {
  EXPECT_THAT(names(preset_layers("vgg_small_bn")),
              ElementsAre("conv1", "bn1", "relu1", "pool1", "conv2", "bn2", "relu2", "pool2",
                          "flatten1", "fc1", "relu3", "fc2"));
}

TEST(ConfigPresets, UnknownPresetListsTheKnownOnes) {
  try {
    preset_layers("vgg");
    ADD_FAILURE() << "accepted an unknown preset";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown model preset 'vgg' (known presets: lenet, "
                                    "lenet_mnist, vgg_small, vgg_small_bn, resnet20, "
                                    "resnet56, resnet18, resnet34, resnet50, mobilenet_v2)"));
  }
}

}  // namespace
}  // namespace ddp::app
