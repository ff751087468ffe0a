// The repository's configs/*.toml all load, say what their comments say, and round-trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ddp/app/config.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/data/packed_writer.hpp"
#include "ddp/nn/presets.hpp"

namespace ddp::app {
namespace {

using nn::preset_layers;

namespace fs = std::filesystem;

fs::path configs_dir() {
  return fs::path(DDP_SOURCE_DIR) / "configs";
}

Config load(const char* name) {
  return load_config(configs_dir() / name, {});
}

// Configs of data.dataset = "packed" read the class count and image size from their files: real
// packed files (one 3x64x64 image, 3 classes) stand in for the user's.
Overrides packed_files_for(const fs::path& config) {
  std::ifstream in(config);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.find("dataset = \"packed\"") == std::string::npos) return {};
  const fs::path file = fs::temp_directory_path() / "ddp_config_files_test_packed.h5";
  data::packed::Header h;
  h.channels = 3;
  h.height = h.width = 64;
  h.source = "config_files_test";
  h.classes = {"a", "b", "c"};
  data::PackedWriter w(file, h);
  w.add(std::vector<std::uint8_t>(3 * 64 * 64, 7), 0, 64, 64);
  w.commit();
  return {{"data.train_file", file.string()}, {"data.test_file", file.string()}};
}

TEST(ConfigFiles, EveryConfigLoadsAndRoundTrips) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(configs_dir())) {
    if (entry.path().extension() != ".toml") continue;
    ++count;
    SCOPED_TRACE(entry.path().string());
    Config c;
    const Overrides packed = packed_files_for(entry.path());
    ASSERT_NO_THROW(c = load_config(entry.path(), packed));
    const fs::path copy =
        fs::temp_directory_path() / ("ddp_config_files_test_" + entry.path().filename().string());
    std::ofstream(copy) << c.resolved_toml;
    const Config again = load_config(copy, {});
    fs::remove(copy);
    EXPECT_EQ(again.resolved_toml, c.resolved_toml);
  }
  EXPECT_GE(count, 4);
}

TEST(ConfigFiles, ImagefolderResnet18SizesItsHeadFromThePackedFile) {
  const fs::path path = configs_dir() / "imagefolder_resnet18.toml";
  const Config c = load_config(path, packed_files_for(path));
  EXPECT_EQ(c.data.dataset, "packed");
  EXPECT_EQ(c.model.preset, "resnet18");
  EXPECT_EQ(c.model.stem, "auto");
  EXPECT_EQ(c.model.layers.back().out_features, 3);  // the file's three classes
}

TEST(ConfigFiles, FashionMnist) {
  const Config c = load("fashion_mnist.toml");
  EXPECT_EQ(c.data.dataset, "fashion_mnist");
  EXPECT_EQ(c.data.root, "/usr/share/datasets/fashion-mnist");
  EXPECT_FALSE(c.data.augment);
  EXPECT_EQ(c.data.normalize, "config");
  EXPECT_EQ(c.data.mean, std::vector<double>{0.5});
  EXPECT_EQ(c.data.std, std::vector<double>{0.5});
  EXPECT_EQ(c.optim.name, "adam");
  EXPECT_DOUBLE_EQ(c.optim.lr, 1e-3);
  EXPECT_EQ(c.train.batch_size, 256);
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.train.seed, 42u);
  EXPECT_EQ(c.run.dir, "runs/fashion_mnist");
  EXPECT_EQ(c.model.preset, "");
  const auto preset = preset_layers("lenet_mnist");
  ASSERT_EQ(c.model.layers.size(), preset.size());
  for (std::size_t i = 0; i < preset.size(); ++i)
    for (const auto& key : layer_keys())
      EXPECT_EQ(key.get(c.model.layers[i]), key.get(preset[i])) << i << " " << key.name;
  EXPECT_GT(c.model.layers[0].line, 0);
}

TEST(ConfigFiles, Cifar) {
  const Config c = load("cifar.toml");
  EXPECT_EQ(c.data.dataset, "cifar10");
  EXPECT_EQ(c.data.root, "../shared/data/cifar-10-batches-bin");
  EXPECT_FALSE(c.data.augment);
  EXPECT_EQ(c.train.batch_size, 256);
  EXPECT_EQ(c.train.epochs, 50);
  EXPECT_EQ(c.train.save_every, 10);
  EXPECT_EQ(c.optim.name, "sgd");
  const auto preset = preset_layers("lenet");
  ASSERT_EQ(c.model.layers.size(), preset.size());
  for (std::size_t i = 0; i < preset.size(); ++i)
    for (const auto& key : layer_keys())
      EXPECT_EQ(key.get(c.model.layers[i]), key.get(preset[i])) << i << " " << key.name;
}

TEST(ConfigFiles, CifarVgg) {
  for (const char* name : {"cifar_vgg.toml", "cifar_vgg_bn.toml"}) {
    SCOPED_TRACE(name);
    const Config c = load(name);
    EXPECT_EQ(c.model.preset, std::string(name) == "cifar_vgg.toml" ? "vgg_small" : "vgg_small_bn");
    EXPECT_EQ(c.optim.name, "sgd");
    EXPECT_DOUBLE_EQ(c.optim.momentum, 0.9);
    EXPECT_TRUE(c.optim.nesterov);
    EXPECT_DOUBLE_EQ(c.optim.weight_decay, 5e-4);
    EXPECT_EQ(c.schedule.name, "cosine");
    EXPECT_TRUE(c.data.augment);
    EXPECT_EQ(c.train.epochs, 30);
    EXPECT_EQ(c.data.mean.size(), 3u);
    EXPECT_EQ(c.data.std.size(), 3u);
  }
}

}  // namespace
}  // namespace ddp::app
