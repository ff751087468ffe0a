// The in-memory SampleSet: construction checks and head() views.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data_test_util.hpp"
#include "ddp/data/sample_set.hpp"

namespace ddp::data {
namespace {

using test_util::Bytes;
using test_util::data_error_of;
using test_util::pattern_dataset;
using ::testing::HasSubstr;

using Labels = std::vector<data::Label>;

TEST(DataDataset, HoldsShapeAndSamples) {
  const SampleSet ds = pattern_dataset(5, 3, 2, 4);
  EXPECT_EQ(ds.size(), 5);
  EXPECT_EQ(ds.image_bytes(), 24);
  EXPECT_EQ(ds.pixels().size(), 120u);
  EXPECT_EQ(ds.image(2).data(), ds.pixels().data() + 48);
  EXPECT_EQ(ds.image(2)[0], test_util::pattern(2, 0, 0, 0));
  EXPECT_EQ(ds.label(3), 3);
  EXPECT_EQ(ds.origin(), "pattern dataset");
}

TEST(DataDataset, RejectsSizeMismatch) {
  const std::string msg = data_error_of([] {
    SampleSet("my.bin", 1, 2, 2, 10, Bytes(7), Labels{0, 1});
  });
  EXPECT_THAT(msg, HasSubstr("my.bin"));
  EXPECT_THAT(msg, HasSubstr("need 8 pixel bytes, but there are 7"));
}

TEST(DataDataset, RejectsLabelOutOfRange) {
  const std::string msg = data_error_of([] {
    SampleSet("my.bin", 1, 1, 1, 3, Bytes{0, 0, 0}, Labels{0, 2, 3});
  });
  EXPECT_THAT(msg, HasSubstr("my.bin: sample 2 has label 3, but labels must be in 0..2"));
}

TEST(DataDataset, RejectsBadShapeAndClassCount) {
  EXPECT_THAT(data_error_of([] { SampleSet("x", 0, 1, 1, 3, Bytes{}, Labels{}); }),
              HasSubstr("invalid image shape 0x1x1"));
  EXPECT_THAT(data_error_of([] { SampleSet("x", 1, 1, 1, 0, Bytes{}, Labels{}); }),
              HasSubstr("invalid number of classes 0"));
}

// Labels are int32: ImageNet's 1,000 classes (and more) fit, and a negative label is refused.
TEST(DataDataset, HoldsThousandsOfClasses) {
  const SampleSet ds("big.h5", 1, 1, 1, 21843, Bytes{0, 0, 0}, Labels{0, 999, 21842});
  EXPECT_EQ(ds.num_classes(), 21843);
  EXPECT_EQ(ds.label(1), 999);
  EXPECT_EQ(ds.label(2), 21842);
  EXPECT_EQ(ds.gather(std::vector<std::int64_t>{2, 1}, "g").label(0), 21842);
  EXPECT_THAT(data_error_of([] { SampleSet("neg.h5", 1, 1, 1, 5, Bytes{0}, Labels{-1}); }),
              HasSubstr("neg.h5: sample 0 has label -1, but labels must be in 0..4"));
}

TEST(DataDataset, HeadIsAViewThatOutlivesTheOriginal) {
  SampleSet head;
  const std::uint8_t* data = nullptr;
  {
    const SampleSet ds = pattern_dataset(10, 1, 3, 3);
    data = ds.pixels().data();
    head = ds.head(4);
  }
  EXPECT_EQ(head.size(), 4);
  EXPECT_EQ(head.pixels().size(), 36u);
  EXPECT_EQ(head.labels().size(), 4u);
  EXPECT_EQ(head.pixels().data(), data);  // shares storage, no copy
  EXPECT_EQ(head.image(3)[4], test_util::pattern(3, 0, 1, 1));
  EXPECT_EQ(head.label(3), 3);
  EXPECT_THAT(head.origin(), HasSubstr("first 4 of 10 samples"));
}

TEST(DataDataset, HeadBeyondSizeIsWholeDatasetAndNegativeIsAnError) {
  const SampleSet ds = pattern_dataset(3, 1, 2, 2);
  EXPECT_EQ(ds.head(100).size(), 3);
  EXPECT_EQ(ds.head(0).size(), 0);
  EXPECT_THAT(data_error_of([&] { (void)ds.head(-1); }), HasSubstr("must be >= 0"));
}

}  // namespace
}  // namespace ddp::data
