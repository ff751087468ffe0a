// The CUDA plugin loader (ddp/plugin/cuda_plugin.hpp): a plugin built from another interface (its
// table's interface hash is not ours) is refused with a message that says what was expected and
// found and what to do; the hash is a SHA-256 that the build computed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "ddp/plugin/cuda_plugin.hpp"

namespace ddp::plugin {
namespace {

using ::testing::HasSubstr;

TEST(CudaPluginLoader, InterfaceHashIsASha256) {
  const std::string h = cuda_plugin_interface_hash();
  EXPECT_EQ(h.size(), 64u) << h;
  for (char c : h) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << h;
}

TEST(CudaPluginLoader, RefusesAPluginOfAnotherInterface) {
  const CudaPluginTable* table = nullptr;
  const CudaPluginStatus st = load_cuda_plugin(DDP_FOREIGN_CUDA_PLUGIN, &table);
  EXPECT_FALSE(st.loaded);
  EXPECT_EQ(table, nullptr);
  EXPECT_EQ(st.path, DDP_FOREIGN_CUDA_PLUGIN);
  EXPECT_THAT(st.error, HasSubstr(std::string(DDP_FOREIGN_CUDA_PLUGIN) +
                                  " was built from another plugin interface than this ddp_train"));
  // What was found and what was expected.
  EXPECT_THAT(st.error,
              HasSubstr("interface hash "
                        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef, "
                        "expected " +
                        std::string(cuda_plugin_interface_hash())));
  // What to do.
  EXPECT_THAT(st.error, HasSubstr("Rebuild the plugin with this binary"));
}

TEST(CudaPluginLoader, RefusesAFileThatIsNoPlugin) {
  const CudaPluginTable* table = nullptr;
  const CudaPluginStatus st = load_cuda_plugin("/nonexistent/libddp_cuda.so", &table);
  EXPECT_FALSE(st.loaded);
  EXPECT_EQ(table, nullptr);
  EXPECT_THAT(st.error, HasSubstr("libddp_cuda.so did not load: "));
}

}  // namespace
}  // namespace ddp::plugin
