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
  const std::int32_t labels[] = {1, 1, 2, 2};
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
  const std::int32_t labels[] = {1, 0, 0};
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

// Beyond kMatrixClasses (ImageNet's 1,000): each class's correct and total counts, the same
// per-class accuracy, no matrix in the metrics, and a per-class CSV.
TEST(Confusion, ManyClassesKeepPerClassCountsOnly) {
  const std::int64_t k = 1000;
  Confusion c(k);
  EXPECT_FALSE(c.has_matrix());
  EXPECT_TRUE(Confusion(Confusion::kMatrixClasses).has_matrix());
  std::vector<float> logits(3 * k, 0.0f);
  logits[0 * k + 999] = 1;  // truth 999 -> 999
  logits[1 * k + 5] = 1;    // truth 999 -> 5
  logits[2 * k + 300] = 1;  // truth 300 -> 300
  const std::int32_t labels[] = {999, 999, 300};
  c.add(logits.data(), labels, 3);
  EXPECT_EQ(c.samples(999), 2);
  EXPECT_EQ(c.correct(999), 1);
  EXPECT_DOUBLE_EQ(c.accuracy(999), 0.5);
  EXPECT_DOUBLE_EQ(c.accuracy(300), 1.0);
  EXPECT_EQ(c.samples(5), 0);
  std::vector<std::string> names;
  for (std::int64_t i = 0; i < k; ++i) names.push_back("n" + std::to_string(i));
  const auto j = nlohmann::json::parse("{\"x\": 1" + c.json_fields(names) + "}");
  EXPECT_EQ(j["per_class"].size(), 1000u);
  EXPECT_FALSE(j.contains("confusion"));
  const std::string csv = c.csv(names);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "class,correct,samples,accuracy");
  EXPECT_NE(csv.find("\nn999,1,2,0.500000\n"), std::string::npos);
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
