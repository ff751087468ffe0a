#pragma once
// Replica chores of data parallelism: every rank holds the same model and optimizer state, made so
// at the start and on resume (rank 0's state broadcast), kept so after each epoch (batch-norm
// running statistics, which each rank updates from its own samples, averaged over the ranks) and
// checked (a digest compared with rank 0's). The state travels over the control-plane communicator
// (MPI, host mirrors), whatever backend computes.
#include <cstdint>
#include <span>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"

namespace ddp::sync {

// Every rank takes rank 0's parameters and buffers, and the optimizer's state when `opt` is given,
// from rank 0's host mirrors (what rank 0 initialised or restored into them), and pushes them to
// its backend. Collective; a no-op on one rank.
void broadcast_state(comm::Communicator& comm, nn::Model& model, optim::Optimizer* opt = nullptr);

// Every rank's buffers (batch-norm running statistics) become their average over the ranks, each
// rank weighted by `samples`, the samples it trained since the last average. The weighted sum is
// all-reduced and scaled the same way on every rank, so the replicas agree bitwise after. Ranks
// that trained no samples contribute nothing; when no rank did, nothing changes. Collective.
void average_buffers(comm::Communicator& comm, nn::Model& model, std::int64_t samples);
// The same for any host values laid out alike on every rank (a moving average's buffers): each
// part becomes its average over the ranks weighted by `samples`. Returns false, changing nothing,
// when no rank trained a sample. Collective; a no-op returning true on one rank.
bool average_over_ranks(comm::Communicator& comm, std::span<const std::span<float>> parts,
                        std::int64_t samples);
// The parts of `values` (laid out as the model's buffers) that training changes: the model's
// trained_buffer_ranges (a frozen batch norm in eval mode keeps its statistics).
std::vector<std::span<float>> trained_buffers(const nn::Model& model, std::span<float> values);

// All ranks compare their model's digest with rank 0's; throws Error naming the ranks that differ
// (`step`: the global step, for the message). Collective; a no-op on one rank.
void check_replicas(comm::Communicator& comm, const nn::Model& model, std::int64_t step);

}  // namespace ddp::sync
