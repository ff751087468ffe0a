// The report's reading of a run directory and its page, on files written here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ddp/app/report.hpp"
#include "ddp/data/image_encode.hpp"
#include "ddp/error.hpp"

namespace ddp::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

class Report : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ddp_report_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
};

constexpr const char* kEpoch1 =
    R"({"epoch": 1, "segment": 1, "steps": 4, "train_loss": 2.0, "train_acc": 0.2, "test_loss": 1.9, "test_acc": 0.3, "test_samples": 10, "lr": 0.1, "images_per_s": 100, "epoch_s": 1, "eval_s": 0.1, "comm_wait_s": 0, "ranks": [{"rank": 0, "images_per_s": 50}, {"rank": 1, "images_per_s": 50}]})";

TEST_F(Report, ReadsEpochRowsAndTheNewestConfusionAndKeepsTheNewestRowOfAnEpoch) {
  write(
      "metrics.jsonl",
      std::string(kEpoch1) + "\n" +
          R"({"epoch": 2, "segment": 1, "steps": 8, "train_loss": 1.5, "train_acc": null, "lr": 0.05, "images_per_s": 110, "epoch_s": 1})" +
          "\n" +
          // A resumed segment trained epoch 2 again: its row is the one that counts.
          R"({"epoch": 2, "segment": 2, "steps": 8, "train_loss": 1.4, "test_loss": 1.2, "test_acc": 0.6, "test_samples": 10, "lr": 0.05, "images_per_s": 120, "epoch_s": 1, "per_class": [{"class": "cat", "accuracy": 0.5, "samples": 4}, {"class": "d<g", "accuracy": 0.67, "samples": 6}], "confusion": [[2, 2], [2, 4]]})" +
          "\n" + R"({"summary": true, "epochs": 2, "world_size": 2})" + "\n");
  const auto d = read_run_metrics(dir_);
  ASSERT_EQ(d.epochs.size(), 2u);
  EXPECT_EQ(d.epochs[0].rank_images_per_s, (std::vector<double>{50, 50}));
  EXPECT_DOUBLE_EQ(*d.epochs[1].train_loss, 1.4);
  EXPECT_FALSE(d.epochs[1].train_acc.has_value());
  EXPECT_EQ(d.classes, (std::vector<std::string>{"cat", "d<g"}));
  EXPECT_EQ(d.confusion, (std::vector<std::vector<std::int64_t>>{{2, 2}, {2, 4}}));
  EXPECT_THAT(d.summary, HasSubstr("2 epoch(s), 2 rank(s)"));

  const auto page = render_report_html(d);
  EXPECT_THAT(page, HasSubstr("id=\"loss-chart\""));
  EXPECT_THAT(page, HasSubstr("d&lt;g"));  // names are escaped
  EXPECT_THAT(page, Not(HasSubstr("d<g")));
  EXPECT_THAT(page, HasSubstr(">66.7%<"));  // the row accuracy of "d<g": 4 of 6
  EXPECT_THAT(page, Not(HasSubstr("<script")));
}

TEST_F(Report, ALastLineCutShortIsSkippedButABadLineInsideNamesFileAndLine) {
  write("metrics.jsonl", std::string(kEpoch1) + "\n{\"epoch\": 2, \"train_lo");
  EXPECT_EQ(read_run_metrics(dir_).epochs.size(), 1u);
  write("metrics.jsonl", "{\"epoch\": 2, \"train_lo\n" + std::string(kEpoch1) + "\n");
  try {
    read_run_metrics(dir_);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("metrics.jsonl:1"));
  }
}

TEST_F(Report, ADirectoryWithoutMetricsIsAnErrorNamingTheFile) {
  try {
    read_run_metrics(dir_);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir_ / "metrics.jsonl").string()));
  }
  EXPECT_THROW(read_run_metrics(dir_ / "nope"), Error);
}

TEST_F(Report, SamplesAreEmbeddedPngsAndMistakesAreMarked) {
  ReportData d;
  d.classes = {"a", "b"};
  data::Image img{3, 2, 2, std::vector<std::uint8_t>(12, 200)};
  d.samples.push_back({data::encode_png(img), 0, 0, 0.9});
  d.samples.push_back({data::encode_png(img), 1, 0, 0.6});
  const auto page = render_report_html(d);
  EXPECT_THAT(page, HasSubstr("1 of 2 wrong"));
  EXPECT_THAT(page, HasSubstr("class=\"sample wrong\""));
  EXPECT_THAT(page, HasSubstr("true: b"));
  EXPECT_THAT(page, HasSubstr("data:image/png;base64,iVBORw0KGgo"));  // the PNG signature
  EXPECT_THAT(page, HasSubstr("no values recorded"));                 // no epochs: said, not drawn
}

TEST(ImageEncode, PngRoundTripsThroughTheDecoder) {
  data::Image grey{1, 3, 5, {}}, rgb{3, 4, 2, {}};
  for (int i = 0; i < 15; ++i) grey.pixels.push_back(static_cast<std::uint8_t>(i * 17));
  for (int i = 0; i < 24; ++i) rgb.pixels.push_back(static_cast<std::uint8_t>(255 - i * 9));
  for (const auto* img : {&grey, &rgb}) {
    const auto png = data::encode_png(*img);
    const auto back = data::decode_image(png, "encoded", 0);
    EXPECT_EQ(back.channels, img->channels);
    EXPECT_EQ(back.height, img->height);
    EXPECT_EQ(back.width, img->width);
    EXPECT_EQ(back.pixels, img->pixels);
  }
  EXPECT_THROW(data::encode_png(data::Image{2, 1, 1, {0, 0}}), Error);
}

}  // namespace
}  // namespace ddp::app
