// add_config_options: one --section.key option per schema key, overrides in command-line order,
// --help documenting every key with its default.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "ddp/app/config.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/error.hpp"

namespace ddp::app {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Parses `args` (without the program name) with the configuration options registered.
Overrides parse(std::vector<std::string> args) {
  CLI::App app("test");
  Overrides out;
  add_config_options(app, out);
  args.insert(args.begin(), "ddp_train");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return out;
}

TEST(ConfigCli, OverridesInCommandLineOrder) {
  EXPECT_THAT(parse({"--train.epochs", "5", "--run-dir", "x"}),
              ElementsAre(Pair("train.epochs", "5"), Pair("run.dir", "x")));
  EXPECT_THAT(parse({"--optim.lr=0.1", "--train.epochs", "5", "--run.dir", "y", "--train.epochs",
                     "6", "--data.mean", "0.5,0.4,0.3"}),
              ElementsAre(Pair("optim.lr", "0.1"), Pair("train.epochs", "5"), Pair("run.dir", "y"),
                          Pair("train.epochs", "6"), Pair("data.mean", "0.5,0.4,0.3")));
}

TEST(ConfigCli, NegativeNumbersAreValues) {
  EXPECT_THAT(parse({"--optim.lr", "-1"}), ElementsAre(Pair("optim.lr", "-1")));
}

TEST(ConfigCli, UnknownOptionIsRejectedByCli11) {
  EXPECT_THROW(parse({"--train.epocs", "5"}), CLI::ParseError);
  EXPECT_THROW(parse({"--train.epochs"}), CLI::ParseError);
}

TEST(ConfigCli, ParsedOverridesLoad) {
  const Config c = load_config("", parse({"--train.epochs", "5", "--run-dir", "x"}));
  EXPECT_EQ(c.train.epochs, 5);
  EXPECT_EQ(c.run.dir, "x");
}

TEST(ConfigCli, HelpDocumentsEveryKeyWithTypeAndDefault) {
  CLI::App app("test");
  Overrides out;
  add_config_options(app, out);
  const std::string help = app.help();
  for (const auto& key : config_keys()) {
    EXPECT_THAT(help, HasSubstr("--" + std::string(key.name))) << key.name;
    EXPECT_THAT(help, HasSubstr("default: " + key.default_text() + "]")) << key.name;
  }
  EXPECT_THAT(help, HasSubstr("--run-dir"));
  EXPECT_THAT(help, HasSubstr("--train.epochs INT"));
  EXPECT_THAT(help, HasSubstr("passes over the training set [>= 1; default: 10]"));
  EXPECT_THAT(help, HasSubstr("optimizer [sgd|adam|adamw; default: sgd]"));
  EXPECT_THAT(help, HasSubstr("--data.std FLOATS"));
  EXPECT_THAT(help, HasSubstr("[1 or 3 values, each > 0; default: 0.5]"));
  EXPECT_THAT(help, HasSubstr("[\"\"|lenet|lenet_mnist|vgg_small|vgg_small_bn|resnet20|resnet56|"
                              "resnet18|resnet34|resnet50|mobilenet_v2; default: lenet]"));
}

}  // namespace
}  // namespace ddp::app
