// Unknown command-line arguments: the same nearest-key suggestion as a config file gives for the
// same typo, and the nearest option or subcommand otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "ddp/app/config_schema.hpp"

namespace ddp::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// What ddp_train would say about `args`: parsed as main() does (extras collected, not refused).
std::string message_for(std::vector<std::string> args) {
  CLI::App app("test");
  app.fallthrough();
  app.allow_extras();
  std::string config;
  app.add_option("-c,--config", config);
  Overrides out;
  add_config_options(app, out);
  auto* doctor = app.add_subcommand("doctor", "");
  double mb = 0;
  doctor->add_option("--sweep-max-mb", mb);
  app.add_subcommand("inspect", "");
  args.insert(args.begin(), "ddp_train");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return app.remaining().empty() ? "" : unexpected_arguments(app.remaining(), app);
}

TEST(ConfigCliTypos, AConfigKeyTypoSuggestsTheKeyAsAnOption) {
  const std::string msg = message_for({"--train.epoch", "3"});
  EXPECT_THAT(msg, HasSubstr("unknown option '--train.epoch'; did you mean '--train.epochs'?"));
  EXPECT_THAT(msg, Not(HasSubstr("'3'")));  // the typo's value is not a second complaint
  EXPECT_THAT(message_for({"--train.epoch=3"}), HasSubstr("did you mean '--train.epochs'?"));
  // A key in the wrong section, as the config file suggests it.
  EXPECT_THAT(message_for({"--train.lr", "0.1"}), HasSubstr("did you mean '--optim.lr'?"));
  EXPECT_THAT(message_for({"--epochs", "3"}), HasSubstr("did you mean '--train.epochs'?"));
}

TEST(ConfigCliTypos, OtherOptionsAndSubcommands) {
  EXPECT_THAT(message_for({"--confg", "x.toml"}), HasSubstr("did you mean '--config'?"));
  EXPECT_THAT(message_for({"doctor", "--sweep-max", "3"}),
              HasSubstr("did you mean '--sweep-max-mb'?"));
  EXPECT_THAT(message_for({"inpsect"}), HasSubstr("unexpected argument 'inpsect'; did you mean "
                                                  "'inspect'?"));
  EXPECT_THAT(message_for({"--zzzzzzzz"}), HasSubstr("unknown option '--zzzzzzzz'"));
  EXPECT_EQ(message_for({"--train.epochs", "3"}), "");
}

}  // namespace
}  // namespace ddp::app
