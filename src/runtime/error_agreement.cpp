#include "ddp/runtime/error_agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "ddp/runtime/rank_info.hpp"
#include "request_wait.hpp"

namespace ddp::runtime {
namespace {

[[noreturn]] void give_up(int rank, int size, const PhaseFailure& mine, double waited_s) {
  if (mine && !mine->empty())
    std::fprintf(stderr, "ddp_train: error (rank %d of %d): %s\n", rank, size, mine->c_str());
  std::fprintf(stderr,
               "ddp_train: error (rank %d of %d): start-up: the other ranks did not all reach the "
               "start-up check within %g s (a rank died, hangs, or waits in a collective this "
               "rank left); aborting the job\n",
               rank, size, waited_s);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace

ErrorAgreement::ErrorAgreement(double timeout_s) : timeout_s_(timeout_s) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &req);
  if (!detail::wait_within(req, timeout_s_)) give_up(rank_, size_, std::nullopt, timeout_s_);
}

ErrorAgreement::~ErrorAgreement() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

std::vector<PhaseFailure> ErrorAgreement::exchange(const PhaseFailure& mine) {
  const double limit =
      mine ? std::min(kFailedWaitS, timeout_s_ > 0 ? timeout_s_ : kFailedWaitS) : timeout_s_;
  // Lengths first (-1: no failure), then the messages.
  const std::int64_t len = mine ? static_cast<std::int64_t>(mine->size()) : -1;
  std::vector<std::int64_t> lens(static_cast<std::size_t>(size_));
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Iallgather(&len, 1, MPI_INT64_T, lens.data(), 1, MPI_INT64_T, comm_, &req);
  if (!detail::wait_within(req, limit)) give_up(rank_, size_, mine, limit);
  std::vector<int> counts(lens.size()), displs(lens.size());
  int total = 0;
  for (std::size_t r = 0; r < lens.size(); ++r) {
    // Messages are a few hundred bytes; a very long one is cut (MPI counts are int).
    counts[r] = static_cast<int>(std::clamp<std::int64_t>(lens[r], 0, 1 << 20));
    displs[r] = total;
    total += counts[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  const std::string text = mine ? mine->substr(0, static_cast<std::size_t>(counts[rank_])) : "";
  MPI_Iallgatherv(text.data(), static_cast<int>(text.size()), MPI_CHAR, all.data(), counts.data(),
                  displs.data(), MPI_CHAR, comm_, &req);
  if (!detail::wait_within(req, limit)) give_up(rank_, size_, mine, limit);
  std::vector<PhaseFailure> out(lens.size());
  for (std::size_t r = 0; r < lens.size(); ++r)
    if (lens[r] >= 0)
      out[r] = all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(counts[r]));
  return out;
}

std::string describe_failures(const std::vector<PhaseFailure>& all) {
  const int size = static_cast<int>(all.size());
  // Distinct non-empty messages in order of their lowest rank, with the ranks that had each.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  std::vector<int> failed;
  for (int r = 0; r < size; ++r) {
    const auto& f = all[static_cast<std::size_t>(r)];
    if (!f) continue;
    failed.push_back(r);
    if (f->empty()) continue;
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == *f; });
    if (it == groups.end()) it = groups.insert(groups.end(), {*f, {}});
    it->second.push_back(r);
  }
  if (failed.empty()) return "";
  if (groups.empty()) groups.push_back({"start-up failed (no rank said why)", failed});
  std::string out;
  for (const auto& [message, ranks] : groups) {
    std::string where = "rank " + std::to_string(ranks.front()) + " of " + std::to_string(size);
    if (ranks.size() == all.size() && ranks.size() > 1)
      where += "; every rank alike";
    else if (ranks.size() > 1)
      where += "; ranks " + format_cpu_list(ranks) + " alike";
    out += "ddp_train: error (" + where + "): " + message + "\n";
  }
  return out;
}

}  // namespace ddp::runtime
