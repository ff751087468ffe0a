#include "ddp/sync/replica.hpp"

#include <string>
#include <vector>

#include "ddp/error.hpp"

namespace ddp::sync {

void broadcast_state(comm::Communicator& comm, nn::Model& model, optim::Optimizer* opt) {
  if (comm.size() == 1) return;
  comm.broadcast(std::as_writable_bytes(model.host_params()), 0);
  comm.broadcast(std::as_writable_bytes(model.host_buffers()), 0);
  model.push_state();
  if (!opt) return;
  for (auto& [name, t] : opt->state())
    comm.broadcast(
        std::as_writable_bytes(std::span<float>(t.data(), static_cast<std::size_t>(t.numel()))), 0);
  opt->push_state();
}

bool average_over_ranks(comm::Communicator& comm, std::span<const std::span<float>> parts,
                        std::int64_t samples) {
  if (comm.size() == 1) return true;
  std::int64_t total = samples;
  comm.allreduce_sum(std::span<std::int64_t>(&total, 1));
  if (total <= 0) return false;
  std::size_t count = 0;
  for (const auto b : parts) count += b.size();
  // Weighted in double and rounded to float once, by the same arithmetic on every rank.
  std::vector<double> sum(count);
  const auto weight = static_cast<double>(samples);
  std::size_t at = 0;
  for (const auto b : parts)
    for (const float v : b) sum[at++] = weight * static_cast<double>(v);
  comm.allreduce_sum(std::span<double>(sum));
  const double inv = 1.0 / static_cast<double>(total);
  at = 0;
  for (const auto b : parts)
    for (float& v : b) v = static_cast<float>(sum[at++] * inv);
  return true;
}

std::vector<std::span<float>> trained_buffers(const nn::Model& model, std::span<float> values) {
  std::vector<std::span<float>> parts;
  for (const auto& [begin, end] : model.trained_buffer_ranges())
    if (end > begin) parts.push_back(values.subspan(begin, end - begin));
  return parts;
}

void average_buffers(comm::Communicator& comm, nn::Model& model, std::int64_t samples) {
  if (comm.size() == 1 || model.host_buffers().empty()) return;
  model.pull_state();
  // Only the statistics training changed: a frozen batch norm in eval mode keeps its own bitwise
  // (an average of equal values need not round back to the value).
  const auto parts = trained_buffers(model, model.host_buffers());
  if (parts.empty()) return;  // every batch norm frozen in eval mode: the same on every rank
  if (average_over_ranks(comm, parts, samples)) model.push_state();
}

void check_replicas(comm::Communicator& comm, const nn::Model& model, std::int64_t step) {
  if (comm.size() == 1) return;
  std::uint64_t root_digest = model.digest();
  const std::uint64_t mine = root_digest;
  comm.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&root_digest, 1)), 0);
  std::vector<std::int64_t> differs(static_cast<std::size_t>(comm.size()), 0);
  differs[static_cast<std::size_t>(comm.rank())] = mine != root_digest ? 1 : 0;
  comm.allreduce_sum(std::span<std::int64_t>(differs));
  std::string bad;
  for (std::size_t r = 0; r < differs.size(); ++r)
    if (differs[r]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (!bad.empty())
    throw Error("replica divergence after step " + std::to_string(step) +
                ": the weights of rank(s) " + bad +
                " differ from rank 0's (non-deterministic kernel, memory corruption or a bug)");
}

}  // namespace ddp::sync
