#pragma once
// A fresh directory per test for the TOML files a configuration test writes, and the ConfigError
// message load_config gives for one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ddp/app/config.hpp"
#include "ddp/error.hpp"

namespace ddp::testing {

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("ddp_" + std::string(info->test_suite_name()) + "_" + std::to_string(::getpid()) + "_" +
            info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& text, const std::string& name = "config.toml") {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  static std::string error_of(const std::filesystem::path& path, const app::Overrides& overrides) {
    try {
      app::load_config(path, overrides);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "load_config accepted it";
    return "";
  }

  std::filesystem::path dir_;
};

}  // namespace ddp::testing
