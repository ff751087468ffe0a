// train.rank_shares ("equal" | "auto" | one weight per rank), train.max_micro_batch (an integer or
// "auto") and train.rebalance_threshold: the values a file and the command line take, the errors
// naming the key, --help, and the resolved-TOML round trip. Checks against the world size happen
// when training starts (tests/integration/test_mpi_uneven_shares.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "config_file_fixture.hpp"
#include "ddp/app/config.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/error.hpp"

namespace ddp::app {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RankSharesConfig : public ddp::testing::ConfigFileTest {
 protected:
  Config file(const std::string& train_lines) {
    return load_config(write("[train]\n" + train_lines + "\n"), {});
  }
  // The ConfigError message for `train_lines` in a file (the key sits on line 2).
  std::string file_error(const std::string& train_lines) {
    return error_of(write("[train]\n" + train_lines + "\n"), {});
  }
  std::string at2() const { return (dir_ / "config.toml").string() + ":2: "; }
};

using Numbers = std::vector<double>;

TEST_F(RankSharesConfig, Defaults) {
  const Config c = load_config("", {});
  EXPECT_EQ(c.train.rank_shares, (WordOrNumbers{"equal", {}}));
  EXPECT_EQ(c.train.max_micro_batch, (WordOrNumbers{"", {0.0}}));
  EXPECT_DOUBLE_EQ(c.train.rebalance_threshold, 0.05);
}

TEST_F(RankSharesConfig, FileValues) {
  EXPECT_EQ(file("rank_shares = [3, 1, 2]").train.rank_shares, (WordOrNumbers{"", {3, 1, 2}}));
  EXPECT_EQ(file("rank_shares = [0.5, 0.25, 0.25]").train.rank_shares.numbers,
            (Numbers{0.5, 0.25, 0.25}));
  EXPECT_EQ(file("rank_shares = \"auto\"").train.rank_shares, (WordOrNumbers{"auto", {}}));
  EXPECT_EQ(file("rank_shares = 1").train.rank_shares.numbers, Numbers{1});  // one rank
  EXPECT_EQ(file("max_micro_batch = 40").train.max_micro_batch, (WordOrNumbers{"", {40}}));
  EXPECT_EQ(file("max_micro_batch = \"auto\"").train.max_micro_batch, (WordOrNumbers{"auto", {}}));
  EXPECT_DOUBLE_EQ(file("rebalance_threshold = 0.1").train.rebalance_threshold, 0.1);
}

TEST_F(RankSharesConfig, CommandLineValues) {
  for (const char* text : {"3,1,2", "[3, 1, 2]", " 3, 1,2 "})
    EXPECT_EQ(load_config("", {{"train.rank_shares", text}}).train.rank_shares,
              (WordOrNumbers{"", {3, 1, 2}}))
        << text;
  EXPECT_EQ(load_config("", {{"train.rank_shares", "auto"}}).train.rank_shares.word, "auto");
  EXPECT_EQ(load_config("", {{"train.rank_shares", "equal"}}).train.rank_shares.word, "equal");
  EXPECT_EQ(load_config("", {{"train.max_micro_batch", "40"}}).train.max_micro_batch.numbers,
            Numbers{40});
  EXPECT_EQ(load_config("", {{"train.max_micro_batch", "auto"}}).train.max_micro_batch.word,
            "auto");
}

TEST_F(RankSharesConfig, BadSharesNameTheKey) {
  EXPECT_THAT(
      file_error("rank_shares = [3, 0, 2]"),
      HasSubstr(at2() + "train.rank_shares = [ 3, 0, 2 ]: each value must be in (0, 1048576]"));
  EXPECT_THAT(file_error("rank_shares = [3, -1, 2]"),
              HasSubstr("train.rank_shares = [ 3, -1, 2 ]: each value must be in (0, 1048576]"));
  EXPECT_THAT(file_error("rank_shares = [3, \"a\", 2]"),
              HasSubstr(at2() + "train.rank_shares: expected a word or numbers, got array"));
  EXPECT_THAT(file_error("rank_shares = \"fast\""),
              HasSubstr(at2() + "train.rank_shares = \"fast\": must be equal, auto or a list of "
                                "numbers"));
  EXPECT_THAT(file_error("rank_shares = \"aut\""), HasSubstr("did you mean 'auto'?"));
  EXPECT_THAT(file_error("rank_shares = []"), HasSubstr("train.rank_shares = []: must be equal"));
  EXPECT_THAT(file_error("rank_shares = [1, nan]"),
              HasSubstr("each value must be a finite number"));
  EXPECT_THAT(error_of("", {{"train.rank_shares", "3,x,2"}}),
              HasSubstr("command line: --train.rank_shares '3,x,2': must be equal, auto or a "
                        "list of numbers"));
  EXPECT_THAT(
      error_of("", {{"train.rank_shares", "3,0,2"}}),
      HasSubstr("command line: --train.rank_shares '3,0,2': each value must be in (0, 1048576]"));
  EXPECT_THAT(error_of("", {{"train.rank_shares", "3,-2"}}),
              HasSubstr("--train.rank_shares '3,-2': each value must be in (0, 1048576]"));
}

TEST_F(RankSharesConfig, BadCapsAndThresholdsNameTheKey) {
  EXPECT_THAT(file_error("max_micro_batch = -1"),
              HasSubstr(at2() + "train.max_micro_batch = -1: must be in [0, 1073741824]"));
  EXPECT_THAT(file_error("max_micro_batch = 2.5"),
              HasSubstr("train.max_micro_batch = 2.5: must be an integer"));
  EXPECT_THAT(file_error("max_micro_batch = [1, 2]"),
              HasSubstr("train.max_micro_batch = [ 1, 2 ]: must be one value, not 2"));
  EXPECT_THAT(file_error("max_micro_batch = \"big\""),
              HasSubstr("train.max_micro_batch = \"big\": must be auto or an integer"));
  EXPECT_THAT(error_of("", {{"train.max_micro_batch", "4x"}}),
              HasSubstr("command line: --train.max_micro_batch '4x': must be auto or an integer"));
  EXPECT_THAT(file_error("rebalance_threshold = -0.1"),
              HasSubstr(at2() + "train.rebalance_threshold = -0.1: must be >= 0"));
  EXPECT_THAT(error_of("", {{"train.rebalance_threshold", "lots"}}),
              HasSubstr("--train.rebalance_threshold 'lots': expected a float"));
}

TEST_F(RankSharesConfig, HelpShowsTheFormsAndDefaults) {
  CLI::App app("test");
  Overrides out;
  add_config_options(app, out);
  const std::string help = app.help();
  EXPECT_THAT(help, HasSubstr("--train.rank_shares WORD|NUMBERS"));
  EXPECT_THAT(help, HasSubstr("[equal|auto|numbers each in (0, 1048576]; default: equal]"));
  EXPECT_THAT(help, HasSubstr("[auto|integer in [0, 1073741824]; default: 0]"));
  EXPECT_THAT(help, HasSubstr("[>= 0; default: 0.05]"));
}

// The resolved TOML writes the list, the word and the cap back so that they read the same.
TEST_F(RankSharesConfig, ResolvedTomlRoundTrips) {
  for (const Overrides& o :
       {Overrides{{"train.rank_shares", "3,1,2"}, {"train.max_micro_batch", "40"}},
        Overrides{{"train.rank_shares", "0.5,0.25,0.25"}, {"train.max_micro_batch", "auto"}},
        Overrides{{"train.rank_shares", "auto"}, {"train.rebalance_threshold", "0.2"}},
        Overrides{}}) {
    const Config first = load_config("", o);
    const fs::path p = write(first.resolved_toml);
    const Config second = load_config(p, {});
    EXPECT_EQ(second.resolved_toml, first.resolved_toml);
    EXPECT_EQ(second.train.rank_shares, first.train.rank_shares);
    EXPECT_EQ(second.train.max_micro_batch, first.train.max_micro_batch);
    EXPECT_EQ(second.train.rebalance_threshold, first.train.rebalance_threshold);
  }
  const Config c =
      load_config("", {{"train.rank_shares", "3,1,2"}, {"train.max_micro_batch", "40"}});
  EXPECT_THAT(c.resolved_toml, HasSubstr("rank_shares = [ 3, 1, 2 ]"));
  EXPECT_THAT(c.resolved_toml, HasSubstr("max_micro_batch = 40\n"));
  EXPECT_THAT(load_config("", {}).resolved_toml, HasSubstr("rank_shares = \"equal\""));
}

}  // namespace
}  // namespace ddp::app
