// `ddp_train layers` / --help's footer: every registered layer type with its keys.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ddp/app/config_schema.hpp"
#include "ddp/nn/layer_registry.hpp"

namespace ddp::app {
namespace {

using ::testing::HasSubstr;

TEST(LayersHelp, ListsEveryTypeWithItsKeys) {
  const std::string text = layers_help();
  for (const auto& t : nn::layer_registry()) {
    EXPECT_THAT(text, HasSubstr("\n  " + std::string(t.type) + ": " + std::string(t.doc)));
    for (const auto& key : t.keys)
      EXPECT_NE(find_layer_key(key.name), nullptr) << t.type << "." << key.name;
  }
  EXPECT_THAT(text, HasSubstr("    groups INT = 1: "));
  EXPECT_THAT(text, HasSubstr("    kernel INT|[H,W] (required): "));
  EXPECT_THAT(text, HasSubstr("    momentum FLOAT = 0.1: "));
  EXPECT_THAT(text, HasSubstr("    inputs [NAMES]: "));
}

TEST(LayersHelp, EveryKeyBelongsToSomeType) {
  for (const auto& key : layer_keys()) {
    bool used = key.every_type;
    for (const auto& t : nn::layer_registry()) used = used || key.applies(t.type);
    EXPECT_TRUE(used) << key.name;
  }
}

}  // namespace
}  // namespace ddp::app
