// The sync room with the real MpiComm: gradient accumulation and both all-reduce modes when ranks
// run different numbers of micro-batches, and the replica chores (state broadcast, buffer averaging
// weighted by samples, replica check). In the unit-test run there is one rank;
// test_mpi_uneven_shares.sh runs these tests again under `mpirun -np 3`.
#include <gtest/gtest.h>
#include <mpi.h>

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
