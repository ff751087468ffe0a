// The memory estimate from shape inference, and the check that refuses absurd sizes naming the key
// (instead of std::bad_alloc) while leaving ordinary ones alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ddp/app/config.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/memory_estimate.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/train/memory_check.hpp"
#include "layer_spec_util.hpp"

namespace ddp::nn {
namespace {

using ::testing::HasSubstr;
using testutil::L;
using testutil::small_net;

TEST(MemoryEstimate, CountsWhatTheModelHolds) {
  auto be = backend::make_cpu_backend();
  const Shape input{2, 6, 6};
  const auto est = estimate_memory(small_net(), input, *be);
  const Model model(small_net(), input, 4, *be);
  EXPECT_EQ(est.params(), static_cast<double>(model.num_parameters()));
  EXPECT_EQ(est.buffers(), 6.0);  // bn1's running mean and variance
  // Output and its gradient per layer: conv1 3x6x6, bn1 3x6x6, pool1 3x3x3, fc1 5, fc2 4. relu1
  // and relu2 run in place on the buffers below them, flatten is a view.
  EXPECT_EQ(est.activations_per_sample(), 2.0 * (108 + 108 + 27 + 5 + 4));
  EXPECT_EQ(est.layers[2].activations, 0.0);
  EXPECT_EQ(est.layers[4].activations, 0.0);
}

TEST(MemoryEstimate, AbsurdSizesNeedNoMemoryToEstimate) {
  auto be = backend::make_cpu_backend();
  auto layers = small_net();
  layers[5].out_features = 4'000'000'000;
  const auto est = estimate_memory(layers, Shape{2, 6, 6}, *be);
  EXPECT_EQ(est.layers[5].params, 4e9 * 27 + 4e9);
}

TEST(MemoryEstimate, ShapeErrorsAreThoseOfTheModel) {
  auto be = backend::make_cpu_backend();
  EXPECT_THROW(estimate_memory({L("conv2d", "c", 4, 9)}, Shape{1, 4, 4}, *be), ConfigError);
}

std::string check_error(const app::Config& cfg, std::int64_t rank_batch, std::int64_t micro) {
  auto be = backend::make_cpu_backend();
  try {
    train::check_memory_fits(cfg, Shape{1, 28, 28}, rank_batch, micro, *be);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryCheck, OrdinarySizesPass) {
  const auto cfg =
      app::load_config("", {{"model.preset", "lenet_mnist"}, {"data.dataset", "fashion_mnist"}});
  EXPECT_EQ(check_error(cfg, 256, 256), "");
  EXPECT_EQ(check_error(cfg, 20000, 20000), "");  // a third of the training set at once: 1.3 GiB
}

TEST(MemoryCheck, AHugeBatchNamesTheBatchKey) {
  auto cfg = app::load_config("", {{"model.preset", "lenet_mnist"},
                                   {"data.dataset", "fashion_mnist"},
                                   {"train.batch_size", "1000000000"}});
  std::string msg = check_error(cfg, 1'000'000'000, 1'000'000'000);
  EXPECT_THAT(msg, HasSubstr("train.batch_size = 1000000000"));
  EXPECT_THAT(msg, HasSubstr("TiB of memory per rank, more than this machine's"));
  cfg.train.global_batch = 3'000'000'000;
  cfg.train.accumulate = 2;
  msg = check_error(cfg, 1'000'000'000, 500'000'000);
  EXPECT_THAT(msg, HasSubstr("train.global_batch = 3000000000 (1000000000 samples per rank)"));
  EXPECT_THAT(msg, HasSubstr("train.accumulate = 2"));
}

TEST(MemoryCheck, AHugeLayerNamesTheLayerItsKeyAndLine) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ddp_memory_check_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "big.toml";
  std::ofstream(file) << "[data]\ndataset = \"fashion_mnist\"\n\n"
                         "[[model.layers]]\ntype = \"flatten\"\n\n"
                         "[[model.layers]]\ntype = \"linear\"\nname = \"hidden\"\n"
                         "out_features = 4000000000\n\n"
                         "[[model.layers]]\ntype = \"relu\"\n\n"
                         "[[model.layers]]\ntype = \"linear\"\nout_features = 10\n";
  const auto cfg = app::load_config(file, {});
  std::filesystem::remove_all(dir);
  const std::string msg = check_error(cfg, 64, 64);
  EXPECT_THAT(msg, HasSubstr("model.layers[1] (linear 'hidden')"));
  EXPECT_THAT(msg, HasSubstr("big.toml:7"));
  EXPECT_THAT(msg, HasSubstr("out_features = 4000000000"));
}

}  // namespace
}  // namespace ddp::nn
