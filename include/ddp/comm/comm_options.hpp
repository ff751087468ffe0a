#pragma once
// Settings of a communicator that the user (config `comm.timeout_s`) or a test may change.
#include <optional>

namespace ddp::comm {

struct CommOptions {
  static constexpr double kDefaultTimeoutS = 300.0;
  // A collective that has not completed after this many seconds is reported (naming the ranks that
  // did not arrive) and the job is aborted. <= 0 waits forever.
  double timeout_s = kDefaultTimeoutS;
};

// Parses a timeout in seconds ("5", "0.5", "300"); nullopt for null/empty. Throws ddp::ConfigError
// for anything else (negative, not a number), naming `what` (the variable or key it came from).
std::optional<double> parse_timeout_s(const char* text, const char* what);

// Options with the given timeout (the config key comm.timeout_s, once it exists), overridden by
// DDP_COMM_TIMEOUT_S from the environment when that is set (tests use it to shorten the timeout
// without a config file).
CommOptions comm_options_from_env(double timeout_s = CommOptions::kDefaultTimeoutS);

// Test-only fault injection: DDP_FAULT_STALL_RANK=R makes rank R sleep forever just before its
// K-th collective (DDP_FAULT_STALL_AT=K, default 1), so the stall detection can be tested with
// the real binary. Never set these in production; a job with them set hangs by design (until the
// other ranks' timeout aborts it).
struct StallFault {
  int rank = -1;
  long long at = 1;  // 1-based collective index
};
// From the two variables' values (null = unset); nullopt when the rank is unset. Throws
// ddp::ConfigError for values that are not non-negative integers (or K < 1).
std::optional<StallFault> parse_stall_fault(const char* rank, const char* at);
std::optional<StallFault> stall_fault_from_env();

}  // namespace ddp::comm
