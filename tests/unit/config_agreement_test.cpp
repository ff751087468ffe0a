// The ranks' configurations compared: what is compared (per-rank keys left out), which keys differ
// and how the difference is told, from real resolved configurations (load_config). The exchange
// itself runs over real MPI ranks in tests/integration/test_startup_errors.sh.
#include "ddp/app/config_agreement.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ddp/app/config.hpp"

namespace ddp::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string text_of(const Overrides& overrides,
                    const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  return agreement_text(load_config("", overrides).resolved_toml, extra);
}

TEST(ConfigAgreement, TextHoldsEveryKeyAndLayerButThePerRankOnes) {
  const std::string t = text_of({{"model.preset", "lenet_mnist"}, {"data.dataset", "mnist"}});
  EXPECT_THAT(t, HasSubstr("train.batch_size = 256\n"));
  EXPECT_THAT(t, HasSubstr("data.dataset = \"mnist\"\n"));
  EXPECT_THAT(t, HasSubstr("model.layers[0].type = \"conv2d\"\n"));
  EXPECT_THAT(t, HasSubstr("model.layers[0].out_channels = 6\n"));
  for (auto key : per_rank_keys()) EXPECT_THAT(t, Not(HasSubstr(std::string(key) + " = ")));
}

TEST(ConfigAgreement, PerRankKeysDoNotChangeTheHash) {
  const auto a = text_of({{"runtime.threads", "1"}, {"data.root", "/a"}, {"comm.timeout_s", "5"}});
  const auto b = text_of({{"runtime.threads", "2"}, {"data.root", "/b"}});
  EXPECT_EQ(a, b);
  EXPECT_EQ(agreement_hash(a), agreement_hash(b));
  EXPECT_NE(agreement_hash(a), agreement_hash(text_of({{"train.seed", "7"}})));
}

TEST(ConfigAgreement, HashIsFnv1a) {
  EXPECT_EQ(agreement_hash(""), 14695981039346656037ull);
  EXPECT_EQ(agreement_hash("a"), 0xaf63dc4c8601ec8cull);  // the published FNV-1a test vector
}

TEST(ConfigAgreement, DifferingKeysWithTheirValuePerRank) {
  const std::vector<std::string> texts = {
      text_of({{"train.batch_size", "64"}}),
      text_of({{"train.batch_size", "64"}}),
      text_of({{"train.batch_size", "32"}, {"train.seed", "7"}}),
  };
  const auto diffs = differing_keys(texts);
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_EQ(diffs[0].key, "train.batch_size");
  EXPECT_EQ(diffs[0].values, (std::vector<std::string>{"64", "64", "32"}));
  EXPECT_EQ(diffs[1].key, "train.seed");
  EXPECT_EQ(diffs[1].values, (std::vector<std::string>{"42", "42", "7"}));
  EXPECT_EQ(describe_differences(diffs),
            "\n  train.batch_size: 64 on ranks 0-1; 32 on rank 2"
            "\n  train.seed: 42 on ranks 0-1; 7 on rank 2");
}

TEST(ConfigAgreement, AnotherModelNamesTheLayerKeys) {
  const auto diffs = differing_keys(
      {text_of({{"model.preset", "lenet"}}), text_of({{"model.preset", "vgg_small"}})});
  bool preset = false, layer_key = false, absent = false;
  for (const auto& d : diffs) {
    preset |= d.key == "model.preset";
    layer_key |= d.key.rfind("model.layers[", 0) == 0;
    for (const auto& v : d.values) absent |= v == "(not set)";
  }
  EXPECT_TRUE(preset);
  EXPECT_TRUE(layer_key);
  EXPECT_TRUE(absent);  // the models have different numbers of layers
}

TEST(ConfigAgreement, TheCommandIsComparedToo) {
  const auto diffs =
      differing_keys({text_of({}, {{"command", "train"}}), text_of({}, {{"command", "eval"}})});
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_EQ(describe_differences(diffs), "\n  command: train on rank 0; eval on rank 1");
}

TEST(ConfigAgreement, ManyRanksAndManyKeysStayReadable) {
  std::vector<std::string> texts(8, text_of({}));
  texts[3] = text_of({{"train.epochs", "3"}});
  texts[5] = texts[3];
  const auto diffs = differing_keys(texts);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_EQ(describe_differences(diffs), "\n  train.epochs: 10 on ranks 0-2,4,6-7; 3 on ranks 3,5");

  std::vector<KeyDifference> many(25, KeyDifference{"k", {"1", "2"}});
  const std::string text = describe_differences(many, 20);
  EXPECT_THAT(text, HasSubstr("... and 5 more key(s)"));
}

TEST(ConfigAgreement, SameTextsNoDifference) {
  EXPECT_TRUE(differing_keys({text_of({}), text_of({})}).empty());
}

}  // namespace
}  // namespace ddp::app
