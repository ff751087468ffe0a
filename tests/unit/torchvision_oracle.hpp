#pragma once
// Running tests/unit/torchvision_transforms.py (torchvision 0.14 on PIL images) as the outside
// oracle of the resize / crop tests.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "data_test_util.hpp"
#include "python_oracle.hpp"

namespace ddp::data::test_util {

// A python3 with torchvision, PIL and numpy, or "".
inline std::string find_python() {
  return ::ddp::testing::find_python_with("torchvision PIL numpy");
}

#define DDP_REQUIRE_TORCHVISION(py)                                                                \
  const std::string py = ::ddp::data::test_util::find_python();                                    \
  if (py.empty())                                                                                  \
    GTEST_SKIP() << "no python3 with torchvision, PIL and numpy (apt install python3-torchvision " \
                    "python3-pil python3-numpy)";

// Runs the oracle on `commands` (one per line) in `dir`.
inline void run_oracle(const std::string& py, const TempDir& dir, const std::string& commands) {
  const auto file = dir / "commands.txt";
  std::ofstream(file) << commands;
  const std::string cmd =
      py + " " + DDP_SOURCE_DIR "/tests/unit/torchvision_transforms.py " + file.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

inline std::string text_of(const std::filesystem::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace ddp::data::test_util
