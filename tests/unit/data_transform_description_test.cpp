// The start-up line that says what the images get (data/transform_description.hpp), the network's
// input with data.train_size (data/dataset_geometry.hpp) and the RandomResizedCrop keys.
#include <gtest/gtest.h>

#include "ddp/data/dataset_geometry.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/data/transform_description.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

Normalization half() {
  return {{0.5f}, {0.25f}};
}

TEST(DescribeTransforms, FixedSizeAugmented) {
  Options o;
  o.augment = true;
  EXPECT_EQ(describe_transforms(o, half()),
            "transforms: train RandomCrop(padding=4), RandomHorizontalFlip(), "
            "Normalize(mean=(0.5), std=(0.25)); eval Normalize(mean=(0.5), std=(0.25))\n");
}

TEST(DescribeTransforms, TrainSizeTakesRandomResizedCropAndSaysCropPaddingIsUnused) {
  Options o;
  o.augment = true;
  o.train_size = 64;
  o.rrc_scale = {0.25, 1.0};
  const std::string text = describe_transforms(o, half());
  EXPECT_NE(text.find("train RandomResizedCrop(64, scale=(0.25, 1), ratio=(0.75, 1.3333334)), "
                      "RandomHorizontalFlip(), Normalize("),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("eval Resize(74), CenterCrop(64), Normalize("), std::string::npos) << text;
  EXPECT_NE(text.find("note: data.crop_padding (4) is not used"), std::string::npos) << text;
  EXPECT_EQ(describe_eval_transform(o), "Resize(74), CenterCrop(64)");
}

TEST(DescribeTransforms, TrainSizeWithoutAugmentTrainsOnTheEvalTransform) {
  Options o;
  o.train_size = 32;
  o.eval_resize = 40;
  o.normalize = "none";
  EXPECT_EQ(describe_transforms(o, {{0.0f}, {1.0f}}),
            "transforms: train Resize(40), CenterCrop(32); eval Resize(40), CenterCrop(32) "
            "(pixels / 255, not normalised)\n");
}

TEST(RandomResizedCropKeys, ReachTheTrainingAugmentationAndMustBeRanges) {
  Options o;
  o.augment = true;
  o.train_size = 32;
  o.rrc_scale = {0.5, 0.9};
  o.rrc_ratio = {0.5, 2.0};
  const Augmentation a = train_augmentation(o);
  EXPECT_DOUBLE_EQ(a.range.scale_min, 0.5);
  EXPECT_DOUBLE_EQ(a.range.scale_max, 0.9);
  EXPECT_DOUBLE_EQ(a.range.ratio_min, 0.5);
  EXPECT_DOUBLE_EQ(a.range.ratio_max, 2.0);
  o.rrc_scale = {0.9, 0.5};
  EXPECT_THROW(transform_output_side(o), ConfigError);
  // The defaults are torchvision's.
  const Options d;
  const Augmentation td = train_augmentation([] {
    Options x;
    x.augment = true;
    x.train_size = 8;
    return x;
  }());
  EXPECT_EQ(td.range.scale_min, ResizedCropRange{}.scale_min);
  EXPECT_EQ(td.range.ratio_max, ResizedCropRange{}.ratio_max);
  EXPECT_EQ(d.rrc_ratio.at(0), 3.0 / 4.0);
}

TEST(DatasetGeometry, TrainSizeIsTheNetworksInput) {
  Options o;
  o.dataset = "fashion_mnist";
  const Geometry plain = dataset_geometry(o);
  EXPECT_EQ(plain.channels, 1);
  EXPECT_EQ(plain.height, 28);
  EXPECT_EQ(plain.classes, 10);
  o.train_size = 40;
  const Geometry sized = dataset_geometry(o);
  EXPECT_EQ(sized.height, 40);
  EXPECT_EQ(sized.width, 40);
  EXPECT_EQ(sized.channels, 1);
}

}  // namespace
}  // namespace ddp::data
