// [[optim.groups]] in a config file: read, checked, written back into the resolved configuration.
#include <gtest/gtest.h>

#include "config_file_fixture.hpp"
#include "ddp/app/config.hpp"

namespace ddp::app {
namespace {

using ConfigGroups = ddp::testing::ConfigFileTest;

constexpr const char* kBase = "[model]\npreset = \"lenet\"\n[optim]\nweight_decay = 0.01\n";

TEST_F(ConfigGroups, GroupsAreReadInOrderAndRoundTrip) {
  const auto path = write(std::string(kBase) +
                          "[[optim.groups]]\nmatch = [\"fc3.*\"]\nlr_mult = 10\n"
                          "weight_decay = 0.0\n"
                          "[[optim.groups]]\nmatch = \"*.bias\"\nlr_mult = 2.5\n");
  const Config c = load_config(path, {});
  ASSERT_EQ(c.optim.groups.size(), 2u);
  EXPECT_EQ(c.optim.groups[0].match, std::vector<std::string>{"fc3.*"});
  EXPECT_DOUBLE_EQ(c.optim.groups[0].lr_mult, 10.0);
  EXPECT_EQ(c.optim.groups[0].weight_decay, std::optional<double>(0.0));
  EXPECT_EQ(c.optim.groups[0].line, 5);
  EXPECT_EQ(c.optim.groups[1].match, std::vector<std::string>{"*.bias"});
  EXPECT_FALSE(c.optim.groups[1].weight_decay);  // optim.weight_decay applies
  EXPECT_NE(c.resolved_toml.find("[[optim.groups]]"), std::string::npos) << c.resolved_toml;
  const Config again = load_config(write(c.resolved_toml, "resolved.toml"), {});
  EXPECT_EQ(again.resolved_toml, c.resolved_toml);
  ASSERT_EQ(again.optim.groups.size(), 2u);
  EXPECT_EQ(again.optim.groups[1].match, c.optim.groups[1].match);
  EXPECT_DOUBLE_EQ(again.optim.groups[1].lr_mult, 2.5);
  EXPECT_FALSE(again.optim.groups[1].weight_decay);
  // No groups: nothing written (the resolved configuration of runs without them is unchanged).
  EXPECT_EQ(load_config(write(kBase, "plain.toml"), {}).resolved_toml.find("optim.groups"),
            std::string::npos);
}

TEST_F(ConfigGroups, BadGroupsAreNamedWithTheirLine) {
  const auto err = [&](const std::string& groups) {
    return error_of(write(std::string(kBase) + groups), {});
  };
  EXPECT_NE(err("[[optim.groups]]\nlr_mult = 2\n").find(":5: optim.groups[1]: missing key 'match'"),
            std::string::npos);
  EXPECT_NE(err("[[optim.groups]]\nmatch = [\"fc3.*\"]\nlr_mul = 2\n")
                .find("optim.groups[1]: unknown key 'lr_mul'; did you mean 'lr_mult'?"),
            std::string::npos);
  EXPECT_NE(err("[[optim.groups]]\nmatch = [\"fc3.*\"]\nlr_mult = 0\n")
                .find("optim.groups[1].lr_mult = 0: must be > 0"),
            std::string::npos);
  EXPECT_NE(err("[[optim.groups]]\nmatch = [\"fc3.*\"]\nweight_decay = -1\n")
                .find("optim.groups[1].weight_decay = -1: must be >= 0"),
            std::string::npos);
  EXPECT_NE(err("[[optim.groups]]\nmatch = 3\n").find("optim.groups[1].match: expected a pattern"),
            std::string::npos);
  EXPECT_NE(err("[[optim.groups]]\nmatch = [\"\"]\n").find("an empty pattern"), std::string::npos);
  EXPECT_NE(error_of(write("[optim]\ngroups = 3\n"), {}).find("optim.groups: expected tables"),
            std::string::npos);
}

}  // namespace
}  // namespace ddp::app
