// The torchvision-family presets (resnet20/56, resnet18/34/50, mobilenet_v2): parameter counts and
// names as torchvision's, stems, zero_init_residual, initialisation statistics, class counts, the
// model.stem / model.zero_init_residual errors, and resolved configurations that read back.
// Numerical parity with PyTorch is tests/integration/test_torch_parity.sh.
#include "ddp/nn/presets.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "ddp/app/config.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"

namespace ddp::app {
namespace {

namespace fs = std::filesystem;
using nn::preset_description;
using nn::preset_layers;
using nn::PresetOptions;
using ::testing::HasSubstr;

PresetOptions opts(std::string stem, std::int64_t classes = 10, bool zero_init = false) {
  PresetOptions o;
  o.stem = std::move(stem);
  o.classes = classes;
  o.zero_init_residual = zero_init;
  return o;
}

struct Built {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  std::unique_ptr<nn::Model> model;
  std::map<std::string, const nn::NamedTensor*> tensors;  // parameters and buffers by name
};

std::unique_ptr<Built> build(const std::string& preset, const PresetOptions& o, bool init = true) {
  auto b = std::make_unique<Built>();
  b->model =
      std::make_unique<nn::Model>(preset_layers(preset, o), Shape{3, 32, 32}, o.classes, *b->be);
  if (init) b->model->init_parameters(7);
  for (const auto* list : {&b->model->named_params(), &b->model->named_buffers()})
    for (const auto& t : *list) b->tensors[t.name] = &t;
  return b;
}

const nn::LayerSpec* find(const std::vector<nn::LayerSpec>& layers, const std::string& name) {
  for (const auto& l : layers)
    if (l.name == name) return &l;
  return nullptr;
}

double stddev(const Tensor& t) {
  double s = 0, q = 0;
  const float* d = t.data();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    s += d[i];
    q += static_cast<double>(d[i]) * d[i];
  }
  const double n = static_cast<double>(t.numel());
  return std::sqrt(q / n - (s / n) * (s / n));
}

bool all_equal(const Tensor& t, float v) {
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (t.data()[i] != v) return false;
  return true;
}

// Trainable parameters and parameter tensors; state_dict entries (parameters and running
// statistics, without num_batches_tracked) as torchvision 0.14 counts them for 10 classes
// (snapshot_to_torch.build_model).
struct Counts {
  const char* preset;
  const char* stem;
  std::int64_t params, param_tensors, state_entries;
};
constexpr Counts kTorchvision[] = {
    {"resnet20", "auto", 272474, 65, 107},        {"resnet56", "auto", 855770, 173, 287},
    {"resnet18", "cifar", 11173962, 62, 102},     {"resnet18", "imagenet", 11181642, 62, 102},
    {"resnet34", "cifar", 21282122, 110, 182},    {"resnet50", "imagenet", 23528522, 161, 267},
    {"mobilenet_v2", "cifar", 2236682, 158, 262},
};

TEST(Presets, ParameterCountsAreTorchvisions) {
  for (const auto& c : kTorchvision) {
    SCOPED_TRACE(std::string(c.preset) + " " + c.stem);
    auto b = build(c.preset, opts(c.stem), false);
    EXPECT_EQ(b->model->num_parameters(), c.params);
    EXPECT_EQ(static_cast<std::int64_t>(b->model->named_params().size()), c.param_tensors);
    EXPECT_EQ(static_cast<std::int64_t>(b->tensors.size()), c.state_entries);
  }
}

TEST(Presets, ResNetNamesAreTorchvisionStateDictKeys) {
  auto b = build("resnet18", opts("imagenet"), false);
  for (const char* name :
       {"conv1.weight", "bn1.weight", "bn1.running_var", "layer1.0.conv1.weight",
        "layer1.1.bn2.bias", "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_mean",
        "layer4.1.conv2.weight", "fc.weight", "fc.bias"})
    EXPECT_TRUE(b->tensors.count(name)) << name;
  // No projection where the shape stays (layer1 of the BasicBlock nets); convolutions have no bias.
  EXPECT_FALSE(b->tensors.count("layer1.0.downsample.0.weight"));
  EXPECT_FALSE(b->tensors.count("conv1.bias"));
  EXPECT_EQ(b->tensors.at("layer3.0.downsample.0.weight")->tensor.shape(), (Shape{256, 128, 1, 1}));

  // Bottleneck (v1.5): the stride sits on the 3x3; layer1 projects 64 -> 256 at stride 1.
  const auto r50 = preset_layers("resnet50", opts("imagenet"));
  EXPECT_EQ(find(r50, "layer2.0.conv1")->stride, nn::Extent2(1));
  EXPECT_EQ(find(r50, "layer2.0.conv2")->stride, nn::Extent2(2));
  ASSERT_NE(find(r50, "layer1.0.downsample.0"), nullptr);
  EXPECT_EQ(find(r50, "layer1.0.downsample.0")->stride, nn::Extent2(1));
  EXPECT_EQ(find(r50, "layer1.0.downsample.0")->inputs, std::vector<std::string>{"maxpool"});
  EXPECT_EQ(find(r50, "layer1.0.add")->inputs,
            (std::vector<std::string>{"layer1.0.bn3", "layer1.0.downsample.1"}));
  EXPECT_EQ(find(r50, "layer1.1.add")->inputs,
            (std::vector<std::string>{"layer1.1.bn3", "layer1.0"}));
}

TEST(Presets, StemCifarOrImagenetOrChosenByImageSize) {
  const auto imagenet = preset_layers("resnet18", opts("imagenet"));
  EXPECT_EQ(find(imagenet, "conv1")->kernel, nn::Extent2(7));
  EXPECT_EQ(find(imagenet, "conv1")->stride, nn::Extent2(2));
  EXPECT_EQ(find(imagenet, "conv1")->padding, nn::Extent2(3));
  ASSERT_NE(find(imagenet, "maxpool"), nullptr);
  EXPECT_EQ(find(imagenet, "maxpool")->kernel, nn::Extent2(3));
  EXPECT_EQ(find(imagenet, "maxpool")->stride, nn::Extent2(2));
  EXPECT_EQ(find(imagenet, "maxpool")->padding, nn::Extent2(1));

  const auto cifar = preset_layers("resnet50", opts("cifar"));
  EXPECT_EQ(find(cifar, "conv1")->kernel, nn::Extent2(3));
  EXPECT_EQ(find(cifar, "conv1")->stride, nn::Extent2(1));
  EXPECT_EQ(find(cifar, "maxpool"), nullptr);
  EXPECT_EQ(find(cifar, "layer1.0.conv1")->inputs.size(), 0u);  // reads "relu", the layer above

  EXPECT_EQ(find(preset_layers("mobilenet_v2", opts("cifar")), "features.0.0")->stride,
            nn::Extent2(1));
  EXPECT_EQ(find(preset_layers("mobilenet_v2", opts("imagenet")), "features.0.0")->stride,
            nn::Extent2(2));

  PresetOptions automatic = opts("auto");
  automatic.image_side = 64;
  EXPECT_EQ(find(preset_layers("resnet34", automatic), "maxpool"), nullptr);
  automatic.image_side = 65;
  EXPECT_NE(find(preset_layers("resnet34", automatic), "maxpool"), nullptr);
  EXPECT_THAT(preset_description("resnet34", automatic),
              HasSubstr("imagenet stem (model.stem = auto: 65x65 images are larger than 64 px)"));
}

TEST(Presets, InitialisationIsTorchvisions) {
  auto b = build("resnet20", opts("auto"));
  // Kaiming-normal, fan-out: std sqrt(2 / (out x kh x kw)).
  for (const char* conv : {"layer3.1.conv2.weight", "layer2.2.conv1.weight", "conv1.weight"}) {
    const Tensor& w = b->tensors.at(conv)->tensor;
    const auto& s = w.shape();
    const double expected = std::sqrt(2.0 / static_cast<double>(s[0] * s[2] * s[3]));
    EXPECT_NEAR(stddev(w), expected, 0.1 * expected) << conv;
  }
  EXPECT_TRUE(all_equal(b->tensors.at("layer1.0.bn2.weight")->tensor, 1.0f));
  EXPECT_TRUE(all_equal(b->tensors.at("layer1.0.bn2.bias")->tensor, 0.0f));
  // fc: PyTorch's default, U(-1/sqrt(64), 1/sqrt(64)) for weight and bias.
  const Tensor& fc = b->tensors.at("fc.weight")->tensor;
  EXPECT_NEAR(stddev(fc), 0.125 / std::sqrt(3.0), 0.015);
  EXPECT_FALSE(all_equal(b->tensors.at("fc.bias")->tensor, 0.0f));

  auto m = build("mobilenet_v2", opts("cifar"));
  // Depthwise: weight [576, 1, 3, 3], fan-out 576 x 9 as torch computes it (not divided by groups).
  const Tensor& dw = m->tensors.at("features.13.conv.1.0.weight")->tensor;
  EXPECT_EQ(dw.shape(), (Shape{576, 1, 3, 3}));
  EXPECT_NEAR(stddev(dw), std::sqrt(2.0 / (576 * 9)), 0.1 * std::sqrt(2.0 / (576 * 9)));
  EXPECT_NEAR(stddev(m->tensors.at("classifier.1.weight")->tensor), 0.01, 0.001);
  EXPECT_TRUE(all_equal(m->tensors.at("classifier.1.bias")->tensor, 0.0f));
}

TEST(Presets, ZeroInitResidualZeroesTheLastBatchNormOfEachBlock) {
  auto b = build("resnet20", opts("auto", 10, true));
  int zeroed = 0;
  for (const auto& [name, t] : b->tensors) {
    if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0 ||
        name.find("bn") == std::string::npos)
      continue;
    const bool last = name.find(".bn2.") != std::string::npos;
    EXPECT_TRUE(all_equal(t->tensor, last ? 0.0f : 1.0f)) << name;
    zeroed += last;
  }
  EXPECT_EQ(zeroed, 9);
  const auto r50 = preset_layers("resnet50", opts("cifar", 10, true));
  EXPECT_EQ(find(r50, "layer3.5.bn3")->init, "zeros");
  EXPECT_EQ(find(r50, "layer3.5.bn2")->init, "");
  EXPECT_EQ(find(r50, "layer3.0.downsample.1")->init, "");
}

TEST(Presets, OutputLayerHasTheClassCount) {
  EXPECT_EQ(preset_layers("resnet18", opts("cifar", 100)).back().out_features, 100);
  EXPECT_EQ(preset_layers("mobilenet_v2", opts("cifar", 7)).back().name, "classifier.1");
  EXPECT_EQ(preset_layers("mobilenet_v2", opts("cifar", 7)).back().out_features, 7);
  const Config c = load_config("", {{"model.preset", "resnet56"}, {"data.dataset", "cifar100"}});
  EXPECT_EQ(c.model.layers.back().out_features, 100);
}

class PresetConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("ddp_presets_test_" + std::to_string(::getpid()) + "_" + info->name() + ".toml");
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
    return "(no error)";
  }
  std::string at(int line) const { return path_.string() + ":" + std::to_string(line); }
  fs::path path_;
};

TEST_F(PresetConfigTest, StemAndZeroInitResidualOnlyWhereTheyApply) {
  EXPECT_THAT(error_for("[model]\npreset = \"resnet20\"\nstem = \"imagenet\"\n"),
              HasSubstr(at(3) + ": model.stem = \"imagenet\": resnet20 is a CIFAR net"));
  EXPECT_THAT(error_for("[model]\npreset = \"lenet\"\nstem = \"cifar\"\n"),
              HasSubstr(at(3) + ": model.stem = \"cifar\": applies to the presets resnet18, "
                                "resnet34, resnet50, mobilenet_v2, not to model.preset = lenet"));
  EXPECT_THAT(error_for("[model]\npreset = \"mobilenet_v2\"\nzero_init_residual = true\n"),
              HasSubstr(at(3) + ": model.zero_init_residual = true: applies to the presets with "
                                "residual blocks (resnet20, resnet56, resnet18, resnet34, "
                                "resnet50), not to model.preset = mobilenet_v2"));
  EXPECT_THAT(error_for("[model]\nstem = \"cifar\"\n[[model.layers]]\ntype = \"linear\"\n"
                        "out_features = 10\n"),
              HasSubstr(at(2) + ": model.stem = \"cifar\": applies to the presets resnet18, "
                                "resnet34, resnet50, mobilenet_v2, not to a model given by "
                                "[[model.layers]]"));
  EXPECT_THAT(error_for("", {{"model.preset", "resnet56"}, {"model.stem", "imagenet"}}),
              HasSubstr("command line: --model.stem 'imagenet': resnet56 is a CIFAR net"));
  EXPECT_EQ(load("[model]\npreset = \"resnet20\"\nstem = \"cifar\"\n").model.preset, "resnet20");
}

// A run's resolved configuration (config.toml, a snapshot's /meta/config_toml) names the preset
// and lists its layers; reading it back must give the same model, not "both a preset and layers".
TEST_F(PresetConfigTest, ResolvedConfigurationReadsBack) {
  for (const char* preset : {"resnet20", "resnet50", "mobilenet_v2"}) {
    SCOPED_TRACE(preset);
    const Config c = load_config("", {{"model.preset", preset},
                                      {"model.stem", "cifar"},
                                      {"model.zero_init_residual", preset[0] == 'r' ? "1" : "0"}});
    const Config again = load(c.resolved_toml);
    EXPECT_EQ(again.resolved_toml, c.resolved_toml);
    EXPECT_EQ(again.model.layers.size(), c.model.layers.size());
  }
}

}  // namespace
}  // namespace ddp::app
