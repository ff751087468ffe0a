// Sync batch norm against plain batch norm on the whole batch and against finite differences of the
// loss summed over all ranks, with the real MpiComm. In the unit-test run (one process) the ranks
// are one and the sync path must equal plain batch norm; test_mpi_sync_batchnorm.sh runs these
// tests again under `mpirun -np 2`, with unequal and empty per-rank batches.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <numeric>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/nn/batch_stats_reducer.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "ddp/sync/batch_stats_sync.hpp"
#include "gradcheck_util.hpp"
#include "mpi_test_env.hpp"

namespace ddp::nn {
namespace {

using ddp::testing::expect_gradient_matches;
using ddp::testing::random_vector;

using ddp::testing::ensure_mpi;

// One batch-norm layer with its own parameter, gradient and buffer storage.
struct BnLayer {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  std::unique_ptr<Layer> owned;
  UnaryLayer* layer = nullptr;
  Shape in;
  std::vector<float> gamma, beta, dgamma, dbeta, mean, var;

  explicit BnLayer(const Shape& in_shape) : in(in_shape) {
    LayerSpec s;
    s.type = "batchnorm";
    s.name = "bn";
    s.momentum = 0.1f;
    owned = make_layer(s, *be);
    layer = &dynamic_cast<UnaryLayer&>(*owned);
    layer->infer(in);
    const auto c = static_cast<std::size_t>(in[0]);
    gamma = random_vector(c, 5, 0.5f, 1.5f);
    beta = random_vector(c, 6, -0.5f, 0.5f);
    dgamma.assign(c, 0.0f);
    dbeta.assign(c, 0.0f);
    mean = random_vector(c, 7, -0.2f, 0.2f);
    var = random_vector(c, 8, 0.5f, 2.0f);
    const Shape v{in[0]};
    layer->bind({Tensor::view(gamma.data(), v), Tensor::view(beta.data(), v)},
                {Tensor::view(dgamma.data(), v), Tensor::view(dbeta.data(), v)},
                {Tensor::view(mean.data(), v), Tensor::view(var.data(), v)});
  }
  UsesBatchStatsReducer& sync() { return dynamic_cast<UsesBatchStatsReducer&>(*layer); }

  // Training forward (and, with dy, backward) over n samples; n = 0 takes part without samples.
  void forward(std::int64_t n, std::vector<float>& x, std::vector<float>& y) {
    y.assign(x.size(), 0.0f);
    if (n == 0) return sync().forward_without_samples();
    layer->forward(Tensor::view(x.data(), in.with_batch(n)),
                   Tensor::view(y.data(), in.with_batch(n)), StepContext{Mode::train, 0, nullptr});
  }
  void backward(std::int64_t n, std::vector<float>& x, std::vector<float>& y,
                std::vector<float>& dy, std::vector<float>& dx) {
    dx.assign(x.size(), 0.0f);
    if (n == 0) return sync().backward_without_samples();
    Tensor dxt = Tensor::view(dx.data(), in.with_batch(n));
    layer->backward(Tensor::view(x.data(), in.with_batch(n)),
                    Tensor::view(y.data(), in.with_batch(n)),
                    Tensor::view(dy.data(), in.with_batch(n)), &dxt);
  }
};

class SyncBatchNorm : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ensure_mpi();
    comm_ = std::make_unique<comm::MpiComm>(MPI_COMM_WORLD, comm::CommOptions{60.0});
    reducer_ = std::make_unique<sync::CommBatchStatsReducer>(*comm_);
    if (comm_->rank() == 0 && comm_->size() > 1)
      std::cout << "sync batch norm over " << comm_->size() << " ranks\n";
  }

  // Samples per rank. Case 0: unequal (2, 5, 8, ...); case 1: the last rank has none.
  std::vector<std::int64_t> counts() const {
    std::vector<std::int64_t> c(static_cast<std::size_t>(comm_->size()));
    for (std::size_t r = 0; r < c.size(); ++r)
      c[r] = GetParam() == 0 ? 2 + 3 * static_cast<std::int64_t>(r) : 4;
    if (GetParam() == 1) c.back() = 0;
    return c;
  }
  std::int64_t first() const {
    const auto c = counts();
    return std::accumulate(c.begin(), c.begin() + comm_->rank(), std::int64_t{0});
  }
  std::int64_t mine() const { return counts()[static_cast<std::size_t>(comm_->rank())]; }
  std::int64_t total() const {
    const auto c = counts();
    return std::accumulate(c.begin(), c.end(), std::int64_t{0});
  }

  // This rank's slice of a vector over the whole batch.
  std::vector<float> slice(const std::vector<float>& all, std::int64_t per) const {
    return {all.begin() + first() * per, all.begin() + (first() + mine()) * per};
  }
  // The whole batch from every rank's slice (sum of zero-padded slices).
  std::vector<float> gather(const std::vector<float>& part, std::int64_t per) {
    std::vector<float> all(static_cast<std::size_t>(total() * per), 0.0f);
    std::copy(part.begin(), part.end(), all.begin() + first() * per);
    comm_->allreduce_sum(std::span<float>(all));
    return all;
  }

  std::unique_ptr<comm::MpiComm> comm_;
  std::unique_ptr<sync::CommBatchStatsReducer> reducer_;
};

// What every rank computes together equals plain batch norm over the whole batch in one process:
// output, input gradient, parameter gradients (summed over ranks, as the gradient all-reduce
// does) and the running statistics.
TEST_P(SyncBatchNorm, EqualsPlainBatchNormOverTheWholeBatch) {
  if (total() < 2) GTEST_SKIP() << "needs at least two samples over all ranks";
  for (const Shape& in : {Shape{3, 2, 2}, Shape{5}}) {
    const std::int64_t per = in.numel();
    auto x_all = random_vector(static_cast<std::size_t>(total() * per), 21, -2.0f, 3.0f);
    auto dy_all = random_vector(x_all.size(), 22);

    BnLayer plain(in);
    std::vector<float> y_ref, dx_ref;
    plain.forward(total(), x_all, y_ref);
    plain.backward(total(), x_all, y_ref, dy_all, dx_ref);

    BnLayer synced(in);
    synced.sync().set_batch_stats_reducer(reducer_.get());
    auto x = slice(x_all, per), dy = slice(dy_all, per);
    std::vector<float> y, dx;
    synced.forward(mine(), x, y);
    synced.backward(mine(), x, y, dy, dx);
    const auto y_all = gather(y, per), dx_all = gather(dx, per);
    auto dgamma = synced.dgamma, dbeta = synced.dbeta;
    comm_->allreduce_sum(std::span<float>(dgamma));
    comm_->allreduce_sum(std::span<float>(dbeta));

    for (std::size_t i = 0; i < y_all.size(); ++i) {
      ASSERT_NEAR(y_all[i], y_ref[i], 2e-5f) << in.str() << " y " << i;
      ASSERT_NEAR(dx_all[i], dx_ref[i], 2e-5f) << in.str() << " dx " << i;
    }
    for (std::size_t c = 0; c < plain.gamma.size(); ++c) {
      EXPECT_NEAR(dgamma[c], plain.dgamma[c], 1e-4f) << in.str() << " dgamma " << c;
      EXPECT_NEAR(dbeta[c], plain.dbeta[c], 1e-4f) << in.str() << " dbeta " << c;
      EXPECT_NEAR(synced.mean[c], plain.mean[c], 1e-6f) << in.str() << " running_mean " << c;
      EXPECT_NEAR(synced.var[c], plain.var[c], 1e-5f) << in.str() << " running_var " << c;
    }
  }
}

// Finite differences of L = sum over all ranks of sum(y * r): every rank recomputes its forward for
// each perturbation of one element of the whole batch (or of gamma/beta, which all ranks share).
TEST_P(SyncBatchNorm, GradientsMatchFiniteDifferencesOfTheLossOverAllRanks) {
  if (total() < 2) GTEST_SKIP() << "needs at least two samples over all ranks";
  const Shape in{2, 3, 2};
  const std::int64_t per = in.numel();
  auto x_all = random_vector(static_cast<std::size_t>(total() * per), 31, -2.0f, 2.0f);
  const auto r_all = random_vector(x_all.size(), 32);
  BnLayer bn(in);
  bn.sync().set_batch_stats_reducer(reducer_.get());
  const auto mean0 = bn.mean, var0 = bn.var;
  auto r = slice(r_all, per);

  std::vector<float> x, y;
  const auto loss = [&] {
    x = slice(x_all, per);
    bn.forward(mine(), x, y);
    bn.mean = mean0;  // the running statistics must not drift between evaluations
    bn.var = var0;
    double l = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * r[i];
    comm_->allreduce_sum(std::span<double>(&l, 1));
    return l;
  };
  loss();
  std::vector<float> dx;
  bn.backward(mine(), x, y, r, dx);
  const auto dx_all = gather(dx, per);
  auto dgamma = bn.dgamma, dbeta = bn.dbeta;
  comm_->allreduce_sum(std::span<float>(dgamma));
  comm_->allreduce_sum(std::span<float>(dbeta));

  expect_gradient_matches(loss, x_all, dx_all, "input");
  expect_gradient_matches(loss, bn.gamma, dgamma, "weight");
  expect_gradient_matches(loss, bn.beta, dbeta, "bias");
}

INSTANTIATE_TEST_SUITE_P(RankBatches, SyncBatchNorm, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == 0 ? std::string("Unequal") : std::string("LastEmpty");
                         });

}  // namespace
}  // namespace ddp::nn
