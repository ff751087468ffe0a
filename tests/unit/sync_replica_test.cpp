// The sync room with the real MpiComm: gradient accumulation and both all-reduce modes when ranks
// run different numbers of micro-batches, and the replica chores (state broadcast, buffer averaging
// weighted by samples, replica check). In the unit-test run there is one rank;
// test_mpi_uneven_shares.sh runs these tests again under `mpirun -np 3`.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/rng.hpp"
#include "ddp/sync/gradient_sync.hpp"
#include "ddp/sync/replica.hpp"
#include "layer_spec_util.hpp"
#include "mpi_test_env.hpp"

namespace ddp::sync {
namespace {

using testutil::L;

using ddp::testing::ensure_mpi;

const Shape kInput{2, 5, 5};
constexpr std::int64_t kClasses = 4;

std::vector<nn::LayerSpec> net(bool batchnorm) {
  std::vector<nn::LayerSpec> s = {L("conv2d", "conv1", 3, 3, 1)};
  if (batchnorm) s.push_back(L("batchnorm", "bn1"));
  for (auto l : {L("relu", "relu1"), L("flatten", "flat"), L("linear", "fc1", 6),
                 L("relu", "relu2"), L("linear", "fc2", kClasses)})
    s.push_back(l);
  return s;
}

struct Rank {
  std::unique_ptr<comm::MpiComm> comm;
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  Rank() {
    ensure_mpi();
    comm = std::make_unique<comm::MpiComm>(MPI_COMM_WORLD);
  }
  int rank() const { return comm->rank(); }
  int size() const { return comm->size(); }
};

// Every rank's model digest, rank 0 first.
std::vector<std::uint64_t> digests(comm::Communicator& comm, const nn::Model& m) {
  const std::uint64_t mine = m.digest();
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::as_bytes(std::span<const std::uint64_t>(&mine, 1)),
                 std::as_writable_bytes(std::span<std::uint64_t>(all)));
  return all;
}

// Rank r holds 3 + 2r samples and runs them in r + 1 micro-batches (ranks differ in both); the
// summed gradient equals that of one backward pass per rank over its whole slice, all-reduced.
void expect_micro_batches_sum_to_the_whole(bool overlap) {
  Rank r;
  nn::Model model(net(false), kInput, kClasses, *r.be);
  model.init_parameters(5);
  const std::int64_t n = 3 + 2 * r.rank(), micro = r.rank() + 1;
  std::int64_t global = 0;
  for (int q = 0; q < r.size(); ++q) global += 3 + 2 * q;
  std::vector<float> x(static_cast<std::size_t>(n * kInput.numel()));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  CounterRng rng(hash_words(11, static_cast<std::uint64_t>(r.rank())));
  for (float& v : x) v = 2.0f * rng.next_float() - 1.0f;
  for (auto& l : labels) l = static_cast<std::int32_t>(rng.next_below(kClasses));
  model.reserve(n);
  Tensor dl = r.be->alloc(Shape{n, kClasses});
  const nn::StepContext ctx{nn::Mode::train, 0, nullptr};
  auto pass = [&](std::int64_t b, std::int64_t e, const std::function<void(std::size_t)>& hook) {
    const Tensor in =
        Tensor::view(x.data() + b * kInput.numel(), kInput.with_batch(e - b), Device::cpu);
    const Tensor& logits = model.forward(in, ctx);
    r.be->softmax_xent(e - b, kClasses, logits.data(), labels.data() + b, 0.0f,
                       1.0f / static_cast<float>(global), dl.data());
    model.backward(dl.first(e - b), hook);
  };

  pass(0, n, {});
  std::vector<float> want(model.grads().begin(), model.grads().end());
  r.comm->allreduce_sum(std::span<float>(want));

  // Small buckets, so that several start during the last micro-batch's backward.
  GradientSync sync(model, *r.comm, SyncOptions{64, 64, overlap, 1});
  ASSERT_GT(sync.buckets().size(), 2u);
  for (int step = 0; step < 2; ++step) {  // a second step starts clean
    sync.begin(micro);
    for (std::int64_t m = 0; m < micro; ++m) {
      pass(m * n / micro, (m + 1) * n / micro, sync.hook());
      sync.after_micro_batch();
    }
    sync.finish();
    const auto got = model.grads();
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 + 1e-5 * std::abs(want[i]))
          << "gradient " << i << ", step " << step << ", rank " << r.rank() << " of " << r.size();
  }
  if (r.size() > 1 && overlap)
    EXPECT_EQ(sync.stats().buckets_launched, 2 * std::ssize(sync.buckets()));
}

TEST(SyncGradient, UnevenMicroBatchesSumToTheWholeOverlapped) {
  expect_micro_batches_sum_to_the_whole(true);
}

TEST(SyncGradient, UnevenMicroBatchesSumToTheWholeBlocking) {
  expect_micro_batches_sum_to_the_whole(false);
}

TEST(SyncGradient, FinishBeforeTheLastMicroBatchIsABug) {
  Rank r;
  nn::Model model(net(false), kInput, kClasses, *r.be);
  GradientSync sync(model, *r.comm, SyncOptions{});
  sync.begin(2);
  sync.after_micro_batch();
  EXPECT_THROW(sync.finish(), Error);  // every rank throws: no collective was started
  EXPECT_THROW(sync.begin(0), Error);
}

TEST(SyncReplica, BroadcastStateGivesEveryRankRankZerosModelAndOptimizer) {
  Rank r;
  nn::Model model(net(true), kInput, kClasses, *r.be);
  model.init_parameters(100 + static_cast<std::uint64_t>(r.rank()));  // differs per rank
  optim::Options momentum;
  momentum.momentum = 0.9;
  auto opt = optim::Optimizer::create(momentum, *r.be, model.params().size());
  for (auto& [name, t] : opt->state())
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(r.rank() + i);
  opt->push_state();
  nn::Model reference(net(true), kInput, kClasses, *r.be);
  reference.init_parameters(100);  // rank 0's
  broadcast_state(*r.comm, model, opt.get());
  EXPECT_EQ(model.digest(), reference.digest()) << "rank " << r.rank();
  for (auto& [name, t] : opt->state())
    for (std::int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.data()[i], static_cast<float>(i));
}

// Rank r's running statistics are r + 1 everywhere and it trained r + 1 samples: the average is
// sum (r+1)^2 / sum (r+1), the same bits on every rank. A rank without samples counts for nothing.
TEST(SyncReplica, AverageBuffersWeightsEachRankBySamples) {
  Rank r;
  nn::Model model(net(true), kInput, kClasses, *r.be);
  ASSERT_FALSE(model.host_buffers().empty());
  const auto fill = [&](float v) {
    for (float& b : model.host_buffers()) b = v;
    model.push_state();
  };
  double num = 0, den = 0;
  for (int q = 0; q < r.size(); ++q) {
    num += (q + 1.0) * (q + 1.0);
    den += q + 1.0;
  }
  fill(static_cast<float>(r.rank() + 1));
  average_buffers(*r.comm, model, r.rank() + 1);
  const float want = r.size() == 1 ? 1.0f : static_cast<float>(num / den);
  for (const float b : model.host_buffers()) ASSERT_FLOAT_EQ(b, want);
  const auto d = digests(*r.comm, model);
  for (const auto x : d) EXPECT_EQ(x, d[0]) << "replicas differ after averaging";

  // Rank 0 trained nothing this time: the others' values only.
  fill(r.rank() == 0 ? 1000.0f : 2.0f);
  average_buffers(*r.comm, model, r.rank() == 0 ? 0 : 5);
  if (r.size() > 1)
    for (const float b : model.host_buffers()) ASSERT_EQ(b, 2.0f);
  // No rank trained: nothing changes.
  fill(static_cast<float>(r.rank() + 7));
  average_buffers(*r.comm, model, 0);
  for (const float b : model.host_buffers()) ASSERT_EQ(b, static_cast<float>(r.rank() + 7));
}

// train.freeze: frozen parameters' gradients never travel. Every gradient is rank + 1 before the
// step; after it the trained ones hold the sum over the ranks, the frozen ones still rank + 1 (on
// one rank nothing travels at all). The buckets hold exactly the trained ranges.
void expect_frozen_gradients_stay_home(bool overlap) {
  Rank r;
  nn::Model model(net(true), kInput, kClasses, *r.be);
  // conv1 trains, bn1 and fc1 are frozen: two gaps in the flat buffer.
  std::vector<bool> frozen;
  for (const auto& p : model.named_params())
    frozen.push_back(p.name.starts_with("bn1.") || p.name.starts_with("fc1."));
  model.freeze(frozen, false);
  GradientSync sync(model, *r.comm, SyncOptions{64, 64, overlap, 1});
  std::vector<bool> trained(model.grads().size(), false), in_bucket(model.grads().size(), false);
  for (std::size_t i = 0; i < model.num_layers(); ++i)
    for (const auto& [b, e] : model.trained_grad_ranges(i))
      for (std::size_t k = b; k < e; ++k) trained[k] = true;
  for (const auto& b : sync.buckets())
    for (std::size_t k = b.begin; k < b.end; ++k) in_bucket[k] = true;
  EXPECT_EQ(in_bucket, trained);
  for (const auto& p : model.named_params())
    EXPECT_EQ(trained[p.offset], !(p.name.starts_with("bn1.") || p.name.starts_with("fc1.")))
        << p.name;

  auto grads = model.grads();
  std::fill(grads.begin(), grads.end(), static_cast<float>(r.rank() + 1));
  sync.begin(1);
  model.step_without_samples(sync.hook());  // the hook as backward calls it (no batch norm sync)
  sync.after_micro_batch();
  sync.finish();
  const float sum = static_cast<float>(r.size() * (r.size() + 1) / 2);
  for (std::size_t k = 0; k < grads.size(); ++k)
    ASSERT_EQ(grads[k], trained[k] ? sum : static_cast<float>(r.rank() + 1))
        << "gradient " << k << ", rank " << r.rank() << " of " << r.size();
}

TEST(SyncGradient, FrozenGradientsStayHomeOverlapped) {
  expect_frozen_gradients_stay_home(true);
}

TEST(SyncGradient, FrozenGradientsStayHomeBlocking) {
  expect_frozen_gradients_stay_home(false);
}

// A frozen batch norm in eval mode keeps its running statistics bitwise: average_buffers leaves
// them alone (an average of equal values need not round back to them) and averages the others.
TEST(SyncReplica, AverageBuffersLeavesFrozenBatchNormStatistics) {
  Rank r;
  std::vector<nn::LayerSpec> specs = {
      L("conv2d", "conv1", 3, 3, 1), L("batchnorm", "bn1"),      L("relu", "relu1"),
      L("conv2d", "conv2", 3, 3, 1), L("batchnorm", "bn2"),      L("relu", "relu2"),
      L("flatten", "flat"),          L("linear", "fc", kClasses)};
  nn::Model model(specs, kInput, kClasses, *r.be);
  std::vector<bool> frozen;
  for (const auto& p : model.named_params())
    frozen.push_back(p.name.starts_with("conv1.") || p.name.starts_with("bn1."));
  model.freeze(frozen, true);
  for (const auto& b : model.named_buffers())
    for (std::int64_t i = 0; i < b.tensor.numel(); ++i)
      b.tensor.data()[i] = b.name.starts_with("bn1.") ? 0.1f * static_cast<float>(i + 1) / 3.0f
                                                      : static_cast<float>(r.rank() + 1);
  model.push_state();
  average_buffers(*r.comm, model, 2 * r.rank() + 1);
  double num = 0, den = 0;
  for (int q = 0; q < r.size(); ++q) {
    num += (2 * q + 1.0) * (q + 1.0);
    den += 2 * q + 1.0;
  }
  for (const auto& b : model.named_buffers())
    for (std::int64_t i = 0; i < b.tensor.numel(); ++i) {
      if (b.name.starts_with("bn1."))
        ASSERT_EQ(b.tensor.data()[i], 0.1f * static_cast<float>(i + 1) / 3.0f) << b.name;
      else
        ASSERT_FLOAT_EQ(b.tensor.data()[i], r.size() == 1 ? 1.0f : static_cast<float>(num / den))
            << b.name;
    }
}

TEST(SyncReplica, CheckReplicasNamesTheRanksThatDiffer) {
  Rank r;
  nn::Model model(net(false), kInput, kClasses, *r.be);
  model.init_parameters(3);
  EXPECT_NO_THROW(check_replicas(*r.comm, model, 7));
  if (r.size() == 1) return;
  if (r.rank() == 1) {
    model.host_params()[0] += 1.0f;
    model.push_state();
  }
  try {
    check_replicas(*r.comm, model, 7);
    FAIL() << "no divergence reported on rank " << r.rank();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after step 7: the weights of rank(s) 1 differ"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ddp::sync
