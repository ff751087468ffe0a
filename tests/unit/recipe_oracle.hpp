#pragma once
// tests/unit/recipe_torch.py (PyTorch 1.13) as the outside oracle of the recipe features' tests:
// a scratch directory that the test fills with spec.txt and raw arrays, the script's command run
// on it, its answers read back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "python_oracle.hpp"
#include "torchvision_oracle.hpp"

namespace ddp::testing {

class RecipeOracle {
 public:
  explicit RecipeOracle(std::string python) : py_(std::move(python)) {}

  // spec.txt: "key = value ..." lines.
  void spec(const std::string& text) { std::ofstream(dir_ / "spec.txt") << text; }
  template <typename T>
  void write(const std::string& name, const std::vector<T>& v) {
    std::ofstream(dir_ / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()),
               static_cast<std::streamsize>(v.size() * sizeof(T)));
  }
  template <typename T>
  std::vector<T> read(const std::string& name, std::size_t n) const {
    std::vector<T> v(n);
    std::ifstream f(dir_ / name, std::ios::binary);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
    EXPECT_TRUE(f.good()) << name << ": fewer than " << n << " values";
    return v;
  }
  std::string text(const std::string& name) const { return data::test_util::text_of(dir_ / name); }
  // Runs the command; false (and a test failure) when the script fails.
  bool run(const std::string& command) const {
    const std::string cmd = py_ + " " DDP_SOURCE_DIR "/tests/unit/recipe_torch.py " + command +
                            " " + dir_.path().string();
    const int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << cmd;
    return rc == 0;
  }

 private:
  std::string py_;
  data::test_util::TempDir dir_;
};

// A python3 with torch and numpy, or "".
inline std::string find_recipe_python() {
  return find_python_with("torch numpy");
}

// A python3 with torch and numpy, or skips the test.
#define DDP_REQUIRE_RECIPE_ORACLE(oracle)                                         \
  const std::string oracle##_python = ::ddp::testing::find_recipe_python();       \
  if (oracle##_python.empty())                                                    \
    GTEST_SKIP() << "no python3 with torch and numpy (apt install python3-torch " \
                    "python3-numpy)";                                             \
  ::ddp::testing::RecipeOracle oracle(oracle##_python)

}  // namespace ddp::testing
