// runtime.threads: an absurd count is an error naming the key and the limit (OpenMP's runtime
// crashes creating 100000 threads), not a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include "ddp/app/threads.hpp"
#include "ddp/error.hpp"

namespace ddp::app {
namespace {

using ::testing::HasSubstr;

int cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

TEST(AppThreads, TooManyThreadsIsAConfigErrorWithTheLimit) {
  const int limit = max_compute_threads(cpus());
  EXPECT_EQ(limit, kThreadsPerCpu * cpus());
  try {
    configure_threads(100000, 1);
    FAIL() << "accepted runtime.threads = 100000";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("runtime.threads = 100000: at most " + std::to_string(limit)));
  }
  EXPECT_THROW(configure_threads(limit + 1, 1), ConfigError);
}

TEST(AppThreads, UpToTheLimitIsApplied) {
  EXPECT_EQ(configure_threads(1, 1), 1);
  EXPECT_EQ(configure_threads(max_compute_threads(cpus()), 1), max_compute_threads(cpus()));
  EXPECT_GE(configure_threads(0, 1), 1);
  configure_threads(0, 1);  // leave the default for the tests that follow
}

}  // namespace
}  // namespace ddp::app
