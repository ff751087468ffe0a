// Layer names become HDF5 group names in snapshots: a name HDF5 cannot hold as a group ('.', '..',
// empty, with '/' or blanks) is refused when the config is read, naming the file, line and layer,
// instead of failing at the first snapshot after an epoch of training.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ddp/app/config.hpp"
#include "ddp/error.hpp"

namespace ddp::app {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The error load_config gives for a model whose hidden linear layer is called `name` (TOML text).
std::string error_for_name(const std::string& name) {
  const fs::path path =
      fs::temp_directory_path() / ("ddp_layer_names_test_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(path) << "[data]\ndataset = \"mnist\"\n\n"
                         "[[model.layers]]\ntype = \"flatten\"\n\n"
                         "[[model.layers]]\ntype = \"linear\"\nname = "
                      << name << "\nout_features = 10\n";
  std::string msg;
  try {
    load_config(path, {});
  } catch (const ConfigError& e) {
    msg = e.what();
  }
  fs::remove(path);
  return msg;
}

TEST(ConfigLayerNames, DotsAloneAreRefusedWithFileLineAndLayer) {
  for (const char* name : {"\".\"", "\"..\""}) {
    const std::string msg = error_for_name(name);
    EXPECT_THAT(msg, HasSubstr("ddp_layer_names_test_")) << name;
    EXPECT_THAT(msg, HasSubstr(".toml:9: model.layers[1] (linear")) << name;
    EXPECT_THAT(msg, HasSubstr("HDF5 group")) << name;
  }
}

TEST(ConfigLayerNames, OtherNamesHdf5CannotHoldAreRefused) {
  for (const char* name : {"\"\"", "\"a/b\"", "\" fc\"", "\"fc \"", "\"f c\""})
    EXPECT_THAT(error_for_name(name), HasSubstr(".toml:9:")) << name;
}

TEST(ConfigLayerNames, OrdinaryNamesWithDotsAreFine) {
  for (const char* name : {"\"fc.1\"", "\".hidden\"", "\"fc_1-a\""})
    EXPECT_EQ(error_for_name(name), "") << name;
}

}  // namespace
}  // namespace ddp::app
