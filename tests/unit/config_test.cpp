// load_config: defaults, file values, overrides, every class of error (with file, line and key),
// cross-key checks and the resolved-TOML round trip.
#include "ddp/app/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config_file_fixture.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/presets.hpp"

namespace ddp::app {
namespace {

using nn::preset_layers;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// A fresh directory per test for the TOML files it writes.
class ConfigTest : public ddp::testing::ConfigFileTest {
 protected:
  // The ConfigError message load_config gives for `text` (written to a file) and `overrides`.
  std::string error_for(const std::string& text, const Overrides& overrides = {}) {
    path_ = write(text);
    return error_of(path_, overrides);
  }

  // "FILE:LINE" of the last file written by error_for.
  std::string at(int line) const { return path_.string() + ":" + std::to_string(line); }

  fs::path path_;
};

TEST_F(ConfigTest, DefaultsWithoutFile) {
  const Config c = load_config("", {});
  EXPECT_TRUE(c.source.empty());
  EXPECT_EQ(c.run.dir, "runs/default");
  EXPECT_EQ(c.data.dataset, "cifar10");
  EXPECT_EQ(c.train.epochs, 10);
  EXPECT_EQ(c.train.batch_size, 256);
  EXPECT_EQ(c.train.seed, 42u);
  EXPECT_EQ(c.optim.name, "sgd");
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.01);
  EXPECT_EQ(c.schedule.name, "constant");
  EXPECT_EQ(c.runtime.device, "auto");
  EXPECT_EQ(c.model.preset, "lenet");
  ASSERT_EQ(c.model.layers.size(), preset_layers("lenet").size());
  EXPECT_EQ(c.model.layers.front().name, "conv1");
  EXPECT_THAT(c.resolved_toml, HasSubstr("[train]"));
}

TEST_F(ConfigTest, ReadsFileValues) {
  const auto path = write(R"([train]
epochs = 3
seed = 7
drop_last = true
[optim]
name = "adam"
lr = 1          # an integer is fine where a float is expected
[data]
mean = [0.1, 0.2, 0.3]
std = 0.25      # a single number is a one-value list
)");
  const Config c = load_config(path, {});
  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.train.seed, 7u);
  EXPECT_TRUE(c.train.drop_last);
  EXPECT_EQ(c.optim.name, "adam");
  EXPECT_DOUBLE_EQ(c.optim.lr, 1.0);
  EXPECT_EQ(c.data.mean, (std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_EQ(c.data.std, (std::vector<double>{0.25}));
  EXPECT_EQ(c.train.batch_size, 256);  // untouched keys keep their defaults
}

TEST_F(ConfigTest, OverridesWinOverFile) {
  const auto path = write("[train]\nepochs = 3\n[optim]\nlr = 0.1\n");
  const Config c = load_config(path, {{"train.epochs", "7"},
                                      {"optim.lr", "5e-2"},
                                      {"data.augment", "yes"},
                                      {"data.mean", "[0.4, 0.5, 0.6]"},
                                      {"data.std", "0.2,0.3, 0.4"},
                                      {"run.dir", "out/x"},
                                      {"train.epochs", "8"}});  // the last one wins
  EXPECT_EQ(c.train.epochs, 8);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.05);
  EXPECT_TRUE(c.data.augment);
  EXPECT_EQ(c.data.mean, (std::vector<double>{0.4, 0.5, 0.6}));
  EXPECT_EQ(c.data.std, (std::vector<double>{0.2, 0.3, 0.4}));
  EXPECT_EQ(c.run.dir, "out/x");
}

TEST_F(ConfigTest, OverrideValueForms) {
  for (const char* yes : {"true", "1", "yes", "YES"})
    EXPECT_TRUE(load_config("", {{"train.drop_last", yes}}).train.drop_last) << yes;
  for (const char* no : {"false", "0", "no"})
    EXPECT_FALSE(load_config("", {{"train.shuffle", no}}).train.shuffle) << no;
  EXPECT_EQ(load_config("", {{"data.mean", "0.5"}}).data.mean, (std::vector<double>{0.5}));
  EXPECT_EQ(load_config("", {{"data.std", "[0.5, 0.25, 0.125,]"}}).data.std,
            (std::vector<double>{0.5, 0.25, 0.125}));
  EXPECT_EQ(load_config("", {{"train.seed", "+5"}}).train.seed, 5u);
  EXPECT_EQ(load_config("", {{"data.root", "\"\""}}).data.root, "");
}

TEST_F(ConfigTest, UnknownKeySuggestsNearest) {
  EXPECT_THAT(error_for("[train]\nepochs = 5\nepocs = 5\n"),
              HasSubstr(at(3) + ": unknown key 'train.epocs'; did you mean 'train.epochs'?"));
}

TEST_F(ConfigTest, KeyInWrongSectionSuggestsItsSection) {
  EXPECT_THAT(error_for("[train]\nlr = 0.1\n"),
              HasSubstr(at(2) + ": unknown key 'train.lr'; did you mean 'optim.lr'?"));
}

TEST_F(ConfigTest, UnknownKeyWithoutNearOneListsTheSection) {
  EXPECT_THAT(error_for("[optim]\nlearning_rate = 0.1\n"),
              HasSubstr(at(2) + ": unknown key 'optim.learning_rate'; the keys of [optim] are: "
                                "name, lr, momentum"));
}

TEST_F(ConfigTest, UnknownSectionSuggestsNearest) {
  EXPECT_THAT(error_for("# comment\n[trian]\nepochs = 5\n"),
              HasSubstr(at(2) + ": unknown section 'trian'; did you mean 'train'?"));
  EXPECT_THAT(error_for("[foo]\n"), HasSubstr(at(1) + ": unknown section 'foo'; the sections are: "
                                                      "run, data, model, train, optim"));
}

TEST_F(ConfigTest, KeyOutsideSectionSuggestsItsSection) {
  EXPECT_THAT(error_for("\nepochs = 5\n"),
              HasSubstr(at(2) + ": unknown key 'epochs' outside any section; did you mean "
                                "'train.epochs'?"));
  EXPECT_THAT(error_for("train = 5\n"),
              HasSubstr(at(1) + ": train: expected a table ([train]), got integer 5"));
}

TEST_F(ConfigTest, WrongType) {
  EXPECT_THAT(error_for("[train]\n\nepochs = \"ten\"\n"),
              HasSubstr(at(3) + ": train.epochs: expected an integer, got string \"ten\""));
  EXPECT_THAT(error_for("[train]\nepochs = 5.5\n"),
              HasSubstr(at(2) + ": train.epochs: expected an integer, got float 5.5"));
  EXPECT_THAT(error_for("[data]\naugment = 1\n"),
              HasSubstr(at(2) + ": data.augment: expected a boolean, got integer 1"));
  EXPECT_THAT(error_for("[optim]\nlr = \"0.1\"\n"),
              HasSubstr(at(2) + ": optim.lr: expected a float, got string \"0.1\""));
  EXPECT_THAT(error_for("[data]\nmean = [0.5, \"a\"]\n"),
              HasSubstr(at(2) + ": data.mean: expected a list of floats, got array"));
  EXPECT_THAT(error_for("[run]\ndir = 5\n"),
              HasSubstr(at(2) + ": run.dir: expected a string, got integer 5"));
}

// (TOML line, expected message after "FILE:2: ")
struct RangeCase {
  const char* section;
  const char* line;
  const char* message;
};

TEST_F(ConfigTest, OutOfRange) {
  const RangeCase cases[] = {
      {"train", "epochs = 0", "train.epochs = 0: must be >= 1"},
      {"train", "batch_size = -3", "train.batch_size = -3: must be >= 1"},
      {"train", "seed = -1", "train.seed = -1: must be >= 0"},
      {"train", "label_smoothing = 1.0", "train.label_smoothing = 1: must be in [0, 1)"},
      {"optim", "lr = 0.0", "optim.lr = 0: must be > 0"},
      {"optim", "lr = nan", "optim.lr = nan: must be a finite number"},
      {"optim", "momentum = 1.0", "optim.momentum = 1: must be in [0, 1)"},
      {"optim", "beta2 = -0.1", "optim.beta2 = -0.1: must be in [0, 1)"},
      {"optim", "name = \"sgdd\"",
       "optim.name = \"sgdd\": must be one of sgd, adam, adamw; did you mean 'sgd'?"},
      {"schedule", "name = \"cosin\"", "did you mean 'cosine'?"},
      {"schedule", "pct_start = 1.0", "schedule.pct_start = 1: must be in (0, 1)"},
      {"runtime", "device = \"gpu\"", "runtime.device = \"gpu\": must be one of auto, cpu, cuda"},
      {"runtime", "threads = -1", "runtime.threads = -1: must be >= 0"},
      {"data", "std = [0.5, 0.0, 0.5]", "data.std = [ 0.5, 0.0, 0.5 ]: each value must be > 0"},
      {"data", "mean = [0.5, 0.5]", "data.mean = [ 0.5, 0.5 ]: must have 1 or 3 values, not 2"},
      {"data", "mean = []", "must have 1 or 3 values, not 0"},
      {"data", "dataset = \"cifar\"", "must be one of cifar10, cifar100, mnist, fashion_mnist"},
      {"data", "normalize = \"yes\"", "must be one of config, dataset, none"},
      {"model", "preset = \"lenet5\"", "model.preset = \"lenet5\": must be one of \"\", lenet"},
      {"run", "dir = \"\"", "run.dir = \"\": must not be empty"},
  };
  for (const auto& c : cases) {
    const std::string text = "[" + std::string(c.section) + "]\n" + c.line + "\n";
    EXPECT_THAT(error_for(text), HasSubstr(at(2) + ": ")) << c.line;
    EXPECT_THAT(error_for(text), HasSubstr(c.message)) << c.line;
  }
}

TEST_F(ConfigTest, SyntaxErrorNamesFileLineAndColumn) {
  const std::string e = error_for("[train]\nepochs = = 5\n");
  EXPECT_THAT(e, HasSubstr(at(2) + ":"));
  EXPECT_THAT(e, HasSubstr(": TOML syntax error: "));
  EXPECT_THAT(error_for("[train]\nepochs = 5\nepochs = 6\n"), HasSubstr(at(3) + ":"));
}

TEST_F(ConfigTest, MissingOrUnreadableFile) {
  const fs::path missing = dir_ / "nope.toml";
  EXPECT_THAT(error_of(missing, {}), HasSubstr("config file '" + missing.string() + "'"));
  EXPECT_THAT(error_of(dir_, {}), HasSubstr("config file '" + dir_.string() + "' is a directory"));
}

TEST_F(ConfigTest, BadOverrides) {
  EXPECT_THAT(error_of("", {{"train.epochs", "abc"}}),
              HasSubstr("command line: --train.epochs 'abc': expected an integer"));
  EXPECT_THAT(error_of("", {{"train.epochs", "5.5"}}),
              HasSubstr("command line: --train.epochs '5.5': expected an integer"));
  EXPECT_THAT(error_of("", {{"train.epochs", "5x"}}),
              HasSubstr("command line: --train.epochs '5x': expected an integer"));
  EXPECT_THAT(error_of("", {{"train.epochs", "99999999999999999999"}}),
              HasSubstr("expected an integer"));
  EXPECT_THAT(error_of("", {{"optim.lr", "fast"}}),
              HasSubstr("command line: --optim.lr 'fast': expected a float"));
  EXPECT_THAT(error_of("", {{"data.augment", "maybe"}}),
              HasSubstr("command line: --data.augment 'maybe': expected a boolean"));
  EXPECT_THAT(error_of("", {{"data.mean", "0.5,,0.5"}}),
              HasSubstr("command line: --data.mean '0.5,,0.5': expected a list of floats"));
  EXPECT_THAT(error_of("", {{"data.mean", "[0.5"}}), HasSubstr("expected a list of floats"));
  EXPECT_THAT(error_of("", {{"train.epocs", "5"}}),
              HasSubstr("command line: unknown key 'train.epocs'; did you mean 'train.epochs'?"));
  EXPECT_THAT(error_of("", {{"train.epochs", "0"}}),
              HasSubstr("command line: --train.epochs '0': must be >= 1"));
  EXPECT_THAT(error_of("", {{"optim.name", "adan"}}),
              HasSubstr("command line: --optim.name 'adan': must be one of sgd, adam, adamw; did "
                        "you mean 'adam'?"));
  EXPECT_THAT(error_of("", {{"data.std", "0.5,0.5"}}),
              HasSubstr("--data.std '0.5,0.5': must have 1 or 3 values, not 2"));
  EXPECT_THAT(error_of("", {{"model.layers", "x"}}), HasSubstr("only be given in a config file"));
}

TEST_F(ConfigTest, CrossKeyChecks) {
  EXPECT_THAT(error_for("[train]\nepochs = 3\n[schedule]\nwarmup_epochs = 5.0\n"),
              HasSubstr(at(4) + ": schedule.warmup_epochs = 5: must be <= train.epochs (3)"));
  EXPECT_THAT(error_for("[schedule]\nwarmup_epochs = 2.0\n", {{"train.epochs", "1"}}),
              HasSubstr(at(2) + ": schedule.warmup_epochs = 2: must be <= train.epochs (1)"));
  EXPECT_THAT(error_for("[schedule]\nname = \"onecycle\"\nwarmup_epochs = 1.0\n"),
              HasSubstr(at(3) + ": schedule.warmup_epochs = 1: does not apply to schedule.name = "
                                "onecycle"));
  EXPECT_THAT(error_for("[schedule]\nname = \"cosine\"\nmin_lr = 0.5\n"),
              HasSubstr(at(3) + ": schedule.min_lr = 0.5: must be <= optim.lr (0.01)"));
  EXPECT_THAT(error_for("[optim]\nnesterov = true\n"),
              HasSubstr(at(2) + ": optim.nesterov = true: needs optim.momentum > 0"));
  EXPECT_THAT(error_of("", {{"data.dataset", "mnist"}, {"data.mean", "0.1,0.2,0.3"}}),
              HasSubstr("command line: --data.mean '0.1,0.2,0.3': mnist images have 1 channel"));
  // Ignored values are not held against the configuration.
  EXPECT_NO_THROW(load_config(
      "",
      {{"data.dataset", "mnist"}, {"data.mean", "0.1,0.2,0.3"}, {"data.normalize", "dataset"}}));
  EXPECT_NO_THROW(load_config("", {{"optim.name", "adam"}, {"optim.nesterov", "true"}}));
}

// Every schema key, with the layer list, comes out; reading the output back gives the same
// configuration (and the same output).
void expect_round_trip(const Config& first, const fs::path& file) {
  std::ofstream(file) << first.resolved_toml;
  const Config second = load_config(file, {});
  EXPECT_EQ(second.resolved_toml, first.resolved_toml);
  for (const auto& key : config_keys()) EXPECT_EQ(key.get(second), key.get(first)) << key.name;
  ASSERT_EQ(second.model.layers.size(), first.model.layers.size());
  for (std::size_t i = 0; i < first.model.layers.size(); ++i)
    for (const auto& key : layer_keys())
      EXPECT_EQ(key.get(second.model.layers[i]), key.get(first.model.layers[i]))
          << "layer " << i << " " << key.name;
}

TEST_F(ConfigTest, ResolvedTomlHoldsEveryKey) {
  const Config c = load_config("", {{"train.epochs", "4"}});
  const toml::table t = toml::parse(c.resolved_toml);
  for (const auto& key : config_keys()) {
    const auto* section = t.get_as<toml::table>(key.section());
    ASSERT_NE(section, nullptr) << key.name;
    EXPECT_TRUE(section->contains(key.leaf())) << key.name;
  }
  EXPECT_EQ(t["train"]["epochs"].value<std::int64_t>(), 4);
  const auto* layers = t["model"]["layers"].as_array();
  ASSERT_NE(layers, nullptr);
  EXPECT_EQ(layers->size(), c.model.layers.size());
}

TEST_F(ConfigTest, ResolvedTomlRoundTripsDefaults) {
  expect_round_trip(load_config("", {}), dir_ / "resolved.toml");
}

TEST_F(ConfigTest, ResolvedTomlRoundTripsEverything) {
  const auto path = write(R"([run]
dir = "runs/a \"quoted\" dir"
[data]
dataset = "cifar100"
root = "/data/c100"
mean = [0.4914, 0.4822, 0.4465]
std = [0.2470, 0.2435, 0.2616]
augment = true
train_limit = 1000
[train]
epochs = 20
seed = 9223372036854775807
label_smoothing = 0.1
[optim]
name = "adamw"
lr = 3e-4
weight_decay = 0.05
eps = 1e-7
[schedule]
name = "cosine"
warmup_epochs = 2.5
min_lr = 1e-6
[[model.layers]]
type = "conv2d"
name = "stem"
out_channels = 8
kernel = 3
padding = 1
bias = false
[[model.layers]]
type = "batchnorm"
momentum = 0.05
eps = 1e-3
[[model.layers]]
type = "relu"
[[model.layers]]
type = "avgpool"
kernel = 2
stride = 2
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dropout"
p = 0.3
[[model.layers]]
type = "linear"
out_features = 100
)");
  const Config c = load_config(path, {{"optim.lr", "0.123456789"}, {"runtime.threads", "4"}});
  EXPECT_EQ(c.model.preset, "");
  // 0.123456789 needs more than 6 digits: the whole document is printed exactly.
  EXPECT_THAT(c.resolved_toml, HasSubstr("lr = 0.123456789"));
  expect_round_trip(c, dir_ / "resolved.toml");
}

TEST_F(ConfigTest, ResolvedTomlIsReadable) {
  // Floats that 6 digits represent exactly are printed that way, not as 0.050000000000000003.
  const Config c = load_config("", {{"optim.lr", "0.05"}, {"data.std", "0.2470,0.2435,0.2616"}});
  EXPECT_THAT(c.resolved_toml, HasSubstr("lr = 0.05\n"));
  EXPECT_THAT(c.resolved_toml, HasSubstr("0.247"));
  EXPECT_THAT(c.resolved_toml, Not(HasSubstr("0.050000")));
}

}  // namespace
}  // namespace ddp::app
