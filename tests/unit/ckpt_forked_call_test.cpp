// call_in_child (src/ckpt/forked_call.hpp): the answer of work done in a child process, and each
// way the child can fail (an exception, a signal, a hang, an exit without an answer) reported
// to the parent, which survives all of them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "../../src/ckpt/forked_call.hpp"

namespace ddp::ckpt {
namespace {

using Kind = ForkedCallFailure::Kind;
using std::chrono::seconds;

// The failure call_in_child(work) throws (a test failure when it returns).
ForkedCallFailure failure_of(const std::function<std::string()>& work,
                             seconds limit = seconds(30)) {
  try {
    const std::string answer = call_in_child(work, limit);
    ADD_FAILURE() << "the child answered " << answer.size() << " bytes";
  } catch (const ForkedCallFailure& e) {
    return e;
  }
  return ForkedCallFailure(Kind::kThrew, "");
}

TEST(ForkedCall, ReturnsTheChildsAnswerLargerThanAPipeHolds) {
  const std::string big(8 << 20, 'x');
  std::string answer = call_in_child([&] { return big + "end"; }, seconds(30));
  EXPECT_EQ(answer.size(), big.size() + 3);
  EXPECT_EQ(answer.substr(answer.size() - 4), "xend");
  EXPECT_EQ(call_in_child([] { return std::string(); }, seconds(30)), "");
}

TEST(ForkedCall, TheChildsWorkDoesNotChangeTheParent) {
  int value = 1;
  (void)call_in_child(
      [&] {
        value = 2;
        return std::string("done");
      },
      seconds(30));
  EXPECT_EQ(value, 1);
}

TEST(ForkedCall, AnExceptionInTheChildIsItsMessage) {
  const auto e = failure_of([]() -> std::string { throw std::runtime_error("no /meta group"); });
  EXPECT_EQ(e.kind(), Kind::kThrew);
  EXPECT_STREQ(e.what(), "no /meta group");
}

TEST(ForkedCall, AChildKilledByASignalIsACrashNamingIt) {
  const auto e = failure_of([]() -> std::string {
    std::raise(SIGSEGV);
    return "unreachable";
  });
  EXPECT_EQ(e.kind(), Kind::kDied);
  EXPECT_NE(std::string(e.what()).find("crashed (signal 11"), std::string::npos) << e.what();
  const auto abort = failure_of([]() -> std::string { std::abort(); });
  EXPECT_NE(std::string(abort.what()).find("crashed (signal 6"), std::string::npos) << abort.what();
}

TEST(ForkedCall, AChildThatExitsWithoutAnAnswerIsReported) {
  const auto e = failure_of([]() -> std::string { ::_exit(3); });
  EXPECT_EQ(e.kind(), Kind::kDied);
  EXPECT_NE(std::string(e.what()).find("without an answer (exit status 3)"), std::string::npos)
      << e.what();
}

TEST(ForkedCall, AChildPastItsTimeLimitIsKilled) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto e = failure_of(
      []() -> std::string {
        for (;;) ::pause();
      },
      seconds(1));
  EXPECT_EQ(e.kind(), Kind::kTimedOut);
  EXPECT_STREQ(e.what(), "did not finish within 1 s");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(10));
}

TEST(ForkedCall, TheChildIgnoresStopSignalsMeantForTheParent) {
  // A job-wide SIGTERM/SIGUSR1 reaches the child too; it must finish its work, not die of it.
  const std::string answer = call_in_child(
      [] {
        ::kill(::getpid(), SIGTERM);
        ::kill(::getpid(), SIGUSR1);
        return std::string("finished");
      },
      seconds(30));
  EXPECT_EQ(answer, "finished");
}

}  // namespace
}  // namespace ddp::ckpt
