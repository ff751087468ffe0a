// How a process without a launcher sets Open MPI up for itself (runtime/singleton.hpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "ddp/runtime/singleton.hpp"

namespace {

using ::testing::EndsWith;
using ::testing::StartsWith;

// The variables prepare_singleton_environment reads or writes, restored after each test (the
// test process itself may be one of these singletons).
class SingletonEnvironment : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {"OMPI_COMM_WORLD_SIZE",
                                           "PMIX_RANK",
                                           "OMPI_MCA_ess_singleton_isolated",
                                           "OMPI_MCA_orte_top_session_dir",
                                           "OMPI_MCA_orte_tmpdir_base",
                                           "TMPDIR",
                                           "TEMP",
                                           "TMP"};

  void SetUp() override {
    for (const char* name : kNames) {
      const char* v = std::getenv(name);
      saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value)
        setenv(name.c_str(), value->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
  }
  static std::optional<std::string> get(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(SingletonEnvironment, IsolatedWithASessionDirectoryOfItsOwn) {
  setenv("TMPDIR", "/scratch/me", 1);
  ddp::runtime::prepare_singleton_environment();
  EXPECT_EQ(get("OMPI_MCA_ess_singleton_isolated"), "1");
  const auto dir = get("OMPI_MCA_orte_top_session_dir");
  ASSERT_TRUE(dir);
  EXPECT_THAT(*dir, StartsWith("/scratch/me/ompi."));
  EXPECT_THAT(*dir, EndsWith("." + std::to_string(getuid()) + ".pid." + std::to_string(getpid())));
}

TEST_F(SingletonEnvironment, TemporaryDirectoryAsOpenMpiChoosesIt) {
  ddp::runtime::prepare_singleton_environment();
  EXPECT_THAT(get("OMPI_MCA_orte_top_session_dir").value_or(""), StartsWith("/tmp/ompi."));
  unsetenv("OMPI_MCA_orte_top_session_dir");
  setenv("TMP", "/t", 1);
  ddp::runtime::prepare_singleton_environment();
  EXPECT_THAT(get("OMPI_MCA_orte_top_session_dir").value_or(""), StartsWith("/t/ompi."));
}

TEST_F(SingletonEnvironment, UnderALauncherNothingChanges) {
  for (const char* launcher : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK"}) {
    setenv(launcher, "2", 1);
    ddp::runtime::prepare_singleton_environment();
    EXPECT_FALSE(get("OMPI_MCA_ess_singleton_isolated")) << launcher;
    EXPECT_FALSE(get("OMPI_MCA_orte_top_session_dir")) << launcher;
    unsetenv(launcher);
  }
}

TEST_F(SingletonEnvironment, TheUsersOwnSettingsWin) {
  setenv("OMPI_MCA_ess_singleton_isolated", "0", 1);  // wants the orted: a job family of its own
  ddp::runtime::prepare_singleton_environment();
  EXPECT_EQ(get("OMPI_MCA_ess_singleton_isolated"), "0");
  EXPECT_FALSE(get("OMPI_MCA_orte_top_session_dir"));

  unsetenv("OMPI_MCA_ess_singleton_isolated");
  setenv("OMPI_MCA_orte_top_session_dir", "/mine", 1);
  ddp::runtime::prepare_singleton_environment();
  EXPECT_EQ(get("OMPI_MCA_orte_top_session_dir"), "/mine");

  unsetenv("OMPI_MCA_ess_singleton_isolated");
  unsetenv("OMPI_MCA_orte_top_session_dir");
  setenv("OMPI_MCA_ess_singleton_isolated", "no", 1);  // Open MPI's words for false too
  ddp::runtime::prepare_singleton_environment();
  EXPECT_FALSE(get("OMPI_MCA_orte_top_session_dir"));
}

TEST_F(SingletonEnvironment, ASessionBaseOfTheUsersStillGetsADirectoryPerProcess) {
  // A site module may set the base for everyone: the race would be back under it.
  setenv("OMPI_MCA_orte_tmpdir_base", "/base", 1);
  setenv("TMPDIR", "/scratch/me", 1);
  setenv("OMPI_MCA_ess_singleton_isolated", "true", 1);
  ddp::runtime::prepare_singleton_environment();
  EXPECT_THAT(get("OMPI_MCA_orte_top_session_dir").value_or(""), StartsWith("/base/ompi."));
  EXPECT_THAT(get("OMPI_MCA_orte_top_session_dir").value_or(""),
              EndsWith(".pid." + std::to_string(getpid())));
  EXPECT_EQ(get("OMPI_MCA_orte_tmpdir_base"), "/base");
}

TEST_F(SingletonEnvironment, TheNodeNameIsTheHostsShortName) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  std::string node = host;
  node = node.substr(0, node.find('.'));
  ddp::runtime::prepare_singleton_environment();
  EXPECT_THAT(get("OMPI_MCA_orte_top_session_dir").value_or(""),
              StartsWith("/tmp/ompi." + node + "." + std::to_string(getuid()) + ".pid."));
}

}  // namespace
