// Values that used to be taken silently (issue 33): numeric keys past what can work, a crop
// padding larger than the image, RandomResizedCrop ranges; doctor's configuration that loads as
// far as it can; a changed float printed as the shortest text that reads back the same.
#include <gtest/gtest.h>

#include "config_file_fixture.hpp"
#include "ddp/app/config.hpp"
#include "ddp/train/config_changes.hpp"

namespace ddp::testing {
namespace {

using ConfigBounds = ConfigFileTest;

TEST_F(ConfigBounds, KeysBeyondTheirRangeAreRefusedNamingTheKey) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"data.workers", "100"},
                                                        {"data.crop_padding", "100000"},
                                                        {"data.train_size", "1000000"},
                                                        {"data.eval_resize", "1000000"},
                                                        {"data.cache_mb", "9000000000000"},
                                                        {"comm.bucket_mb", "1e300"},
                                                        {"train.batch_size", "10000000000000"},
                                                        {"train.accumulate", "100000000000"},
                                                        {"data.rrc_scale", "0,1"},
                                                        {"data.rrc_ratio", "0.5"}}) {
    const std::string e = error_of("", {{key, value}});
    EXPECT_NE(e.find("--" + key), std::string::npos) << key << ": " << e;
  }
}

TEST_F(ConfigBounds, EpochsAreBoundedWhereTheScheduleStillCounts) {
  const std::string e = error_of("", {{"train.epochs", "4611686018427387904"}});
  EXPECT_NE(e.find("train.epochs"), std::string::npos) << e;
  EXPECT_NO_THROW(app::load_config("", {{"train.epochs", "1000000000"}}));
}

TEST_F(ConfigBounds, CropPaddingIsAtMostHalfTheImage) {
  const std::string e = error_of(
      "",
      {{"data.dataset", "fashion_mnist"}, {"data.augment", "true"}, {"data.crop_padding", "15"}});
  EXPECT_NE(e.find("data.crop_padding"), std::string::npos) << e;
  EXPECT_NE(e.find("at most half the image side (28 px"), std::string::npos) << e;
  EXPECT_NO_THROW(app::load_config(
      "",
      {{"data.dataset", "fashion_mnist"}, {"data.augment", "true"}, {"data.crop_padding", "14"}}));
  // Not used with data.train_size (random-resized crops instead): not checked against the image.
  EXPECT_NO_THROW(app::load_config(
      "", {{"data.augment", "true"}, {"data.crop_padding", "30"}, {"data.train_size", "32"}}));
}

TEST_F(ConfigBounds, RandomResizedCropRangesMustBeOrdered) {
  const std::string e = error_of("", {{"data.rrc_scale", "0.9,0.2"}});
  EXPECT_NE(e.find("data.rrc_scale"), std::string::npos) << e;
  const auto cfg =
      app::load_config("", {{"data.rrc_scale", "0.2,0.9"}, {"data.rrc_ratio", "0.5,2"}});
  EXPECT_EQ(cfg.data.rrc_scale, (std::vector<double>{0.2, 0.9}));
  EXPECT_NE(cfg.resolved_toml.find("rrc_ratio = [ 0.5, 2"), std::string::npos) << cfg.resolved_toml;
}

TEST_F(ConfigBounds, DoctorLoadsWhatItCanAndSaysWhatFailed) {
  const auto path = write("[comm]\ntimeout_s = 12\n[model]\npreset = \"nonet\"\n");
  std::string problem;
  const auto cfg = app::load_config_for_doctor(path, {}, problem);
  EXPECT_NE(problem.find("model.preset"), std::string::npos) << problem;
  EXPECT_EQ(cfg.comm.timeout_s, 12.0);
  EXPECT_FALSE(cfg.resolved_toml.empty());
  const auto good = app::load_config_for_doctor("", {}, problem);
  EXPECT_EQ(problem, "");
  const auto broken = write("this is not toml [", "broken.toml");
  EXPECT_NO_THROW(app::load_config_for_doctor(broken, {}, problem));
  EXPECT_NE(problem.find("broken.toml"), std::string::npos) << problem;
}

TEST(ConfigChangeText, FloatsPrintShortest) {
  const auto changes = train::config_changes("[optim]\nlr = 0.2\n[data]\nmean = [0.485, 0.456]\n",
                                             "[optim]\nlr = 0.1\n[data]\nmean = [0.5, 0.456]\n");
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(train::describe(changes[0]), "data.mean: [0.485, 0.456] -> [0.5, 0.456]");
  EXPECT_EQ(train::describe(changes[1]), "optim.lr: 0.2 -> 0.1");
}

}  // namespace
}  // namespace ddp::testing
