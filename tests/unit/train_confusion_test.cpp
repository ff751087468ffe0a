// The confusion matrix and what is made of it: argmax as the loss takes it (the first largest
// logit), per-class accuracy, the metrics.jsonl fields (valid JSON, names escaped) and
// confusion.csv (names with commas or quotes quoted as RFC 4180 says). Also the class-name lists.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ddp/data/class_names.hpp"
#include "ddp/train/confusion.hpp"
#include "ddp/train/metrics.hpp"

namespace ddp::train {
namespace {

TEST(Confusion, CountsTruthAgainstTheFirstLargestLogit) {
  Confusion c(3);
  const float logits[] = {
      1, 5, 2,  // -> 1
      7, 7, 0,  // tie -> 0
      0, 0, 9,  // -> 2
      3, 1, 2,  // -> 0
  };
  const std::uint8_t labels[] = {1, 1, 2, 2};
  c.add(logits, labels, 4);
  EXPECT_EQ(c.count(1, 1), 1);
  EXPECT_EQ(c.count(1, 0), 1);
  EXPECT_EQ(c.count(2, 2), 1);
  EXPECT_EQ(c.count(2, 0), 1);
  EXPECT_EQ(c.samples(0), 0);
  EXPECT_EQ(c.samples(1), 2);
  EXPECT_DOUBLE_EQ(c.accuracy(1), 0.5);
  EXPECT_DOUBLE_EQ(c.accuracy(0), 0.0);  // no sample: 0, not NaN
}

TEST(Confusion, JsonFieldsAndCsvCarryTheNames) {
  Confusion c(2);
  const float logits[] = {0, 1, 1, 0, 0, 1};
  const std::uint8_t labels[] = {1, 0, 0};
  c.add(logits, labels, 3);
  const std::vector<std::string> names = {"T-shirt, \"top\"", "Bag"};
  const auto j = nlohmann::json::parse("{\"x\": 1" + c.json_fields(names) + "}");
  ASSERT_EQ(j["per_class"].size(), 2u);
  EXPECT_EQ(j["per_class"][0]["class"], names[0]);
  EXPECT_EQ(j["per_class"][0]["samples"], 2);
  EXPECT_DOUBLE_EQ(j["per_class"][0]["accuracy"].get<double>(), 0.5);
  EXPECT_EQ(j["confusion"], nlohmann::json::parse("[[1, 1], [0, 1]]"));
  EXPECT_EQ(c.csv(names),
            "true\\predicted,\"T-shirt, \"\"top\"\"\",Bag\n"
            "\"T-shirt, \"\"top\"\"\",1,1\n"
            "Bag,0,1\n");
}

TEST(Confusion, EvaluatedEpochRowsCarryPerClassResults) {
  EpochMetrics m;
  m.epoch = 1;
  EXPECT_EQ(to_json(m).find("per_class"), std::string::npos);
  m.evaluated = true;
  m.confusion = Confusion(2);
  m.class_names = {"a", "b"};
  const auto j = nlohmann::json::parse(to_json(m));
  EXPECT_EQ(j["per_class"][1]["class"], "b");
  EXPECT_EQ(j["confusion"].size(), 2u);
}

TEST(ClassNames, StandardListsAndNumbersOtherwise) {
  data::Options o;
  o.dataset = "cifar10";
  EXPECT_EQ(data::class_names(o, 10)[3], "cat");
  o.dataset = "cifar100";
  const auto c100 = data::class_names(o, 100);
  EXPECT_EQ(c100.front(), "apple");
  EXPECT_EQ(c100.back(), "worm");
  o.dataset = "fashion_mnist";
  EXPECT_EQ(data::class_names(o, 10)[9], "Ankle boot");
  o.dataset = "mnist";
  EXPECT_EQ(data::class_names(o, 10)[7], "7");
  o.dataset = "cifar10";  // a model with another class count gets numbers, not wrong names
  EXPECT_EQ(data::class_names(o, 3), (std::vector<std::string>{"0", "1", "2"}));
}

}  // namespace
}  // namespace ddp::train
