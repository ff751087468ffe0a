// NcclComm: collectives on device and host buffers, non-blocking all-reduce ordered after the
// compute stream, and the stall watchdog. Run as part of ddp_unit_tests (one rank) and, for all
// GPUs, as `mpiexec -n <GPUs> ddp_unit_tests --gtest_filter='CudaNccl*'` (ctest test
// cuda.nccl_one_rank_per_gpu, label gpu). Without a usable GPU every test is SKIPPED with the
// reason. MPI is initialised on first use (singleton when not under mpiexec) and finalised after
// the last test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ddp/backend/cuda_backend.hpp"
#include "ddp/backend/device_assign.hpp"
#include "ddp/comm/nccl_comm.hpp"
#include "ddp/error.hpp"
#include "mpi_test_env.hpp"

namespace ddp::comm {
namespace {

using backend::CudaBackend;
using backend::DeviceBuffer;

using ddp::testing::ensure_mpi;

// Everything a test needs: MPI, this rank's GPU (chosen by the device-assignment rules and
// checked for sharing, as ddp_train will), a CUDA backend and a communicator.
class CudaNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = backend::cuda_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
    ensure_mpi();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    int local_rank = 0, local_size = 1;
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    const int visible = backend::cuda_device_count();
    // The same decision on every rank, or some would wait in collectives the others skip.
    int ok = visible >= 1 ? 1 : 0, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) GTEST_SKIP() << "a rank sees no GPU: run one rank per GPU";
    // Device assignment as ddp_train makes it: host, place on the host, and the GPU set each of
    // the host's ranks sees (UUIDs), gathered in fixed-size records.
    char host[256] = {};
    int len = 0;
    MPI_Get_processor_name(host, &len);
    std::string set;
    for (int d = 0; d < visible; ++d) {
      if (d > 0) set += ',';
      set += backend::cuda_device_info(d).uuid;
    }
    constexpr std::size_t kRecord = 4096;
    std::vector<char> mine(kRecord, '\0');
    std::snprintf(mine.data(), kRecord, "%s|%s", host, set.c_str());
    std::vector<char> all(kRecord * static_cast<std::size_t>(size_));
    MPI_Allgather(mine.data(), static_cast<int>(kRecord), MPI_CHAR, all.data(),
                  static_cast<int>(kRecord), MPI_CHAR, MPI_COMM_WORLD);
    backend::DeviceRequest req;
    req.host = host;
    req.rank = rank_;
    req.local_rank = local_rank;
    req.local_size = local_size;
    req.visible_devices = visible;
    for (int q = 0; q < size_; ++q) {
      const std::string rec(all.data() + kRecord * static_cast<std::size_t>(q));
      if (rec.substr(0, rec.find('|')) != req.host) continue;
      req.host_ranks.push_back(q);
      req.host_device_sets.push_back(rec.substr(rec.find('|') + 1));
    }
    if (std::ssize(req.host_device_sets) != local_size) req.host_device_sets.clear();
    int assigned = 1, all_assigned = 0;
    try {
      device_ = backend::assign_device(req);
    } catch (const Error& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank_, e.what());
      assigned = 0;
    }
    MPI_Allreduce(&assigned, &all_assigned, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_assigned)
      GTEST_SKIP() << "more ranks on a host than the GPUs they see (" << local_size << " ranks, "
                   << visible << " GPUs): run one rank per GPU";
    // Two ranks on one GPU would make NCCL fail obscurely: the check ddp_train makes, on the
    // claims of every rank (the same verdict everywhere).
    std::vector<char> claim(kRecord, '\0'), claims_raw(kRecord * static_cast<std::size_t>(size_));
    std::snprintf(claim.data(), kRecord, "%s|%d|%s", host, device_,
                  backend::cuda_device_info(device_).uuid.c_str());
    MPI_Allgather(claim.data(), static_cast<int>(kRecord), MPI_CHAR, claims_raw.data(),
                  static_cast<int>(kRecord), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<backend::DeviceClaim> claims;
    for (int q = 0; q < size_; ++q) {
      const std::string rec(claims_raw.data() + kRecord * static_cast<std::size_t>(q));
      const auto a = rec.find('|'), b = rec.find('|', a + 1);
      claims.push_back(
          {q, rec.substr(0, a), std::stoi(rec.substr(a + 1, b - a - 1)), rec.substr(b + 1), ""});
    }
    try {
      backend::check_distinct_devices(claims);
    } catch (const ConfigError& e) {
      FAIL() << "the launcher gave two ranks one GPU: " << e.what();
    }
    gpu_ = backend::make_cuda_backend(device_);
    NcclCommOptions o;
    o.comm.timeout_s = 120;
    o.abort_job_on_stall = false;
    comm_ = make_nccl_comm(MPI_COMM_WORLD, device_, gpu_->compute_stream(), o);
  }
  void TearDown() override {
    comm_.reset();
    gpu_.reset();
  }

  DeviceBuffer floats(std::size_t n) { return DeviceBuffer(device_, n * sizeof(float)); }
  std::vector<float> down(const DeviceBuffer& b, std::size_t n) {
    std::vector<float> h(n);
    gpu_->to_host(b.data(), h.data(), n * sizeof(float));
    return h;
  }

  int rank_ = 0, size_ = 1, device_ = 0;
  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<NcclComm> comm_;
};

TEST_F(CudaNccl, SetupMatchesMpi) {
  EXPECT_EQ(comm_->rank(), rank_);
  EXPECT_EQ(comm_->size(), size_);
  EXPECT_EQ(comm_->device(), device_);
  EXPECT_NE(comm_->comm_stream(), nullptr);
  EXPECT_NE(nccl_version().find("NCCL 2."), std::string::npos) << nccl_version();
  comm_->check_health();
  EXPECT_FALSE(comm_->aborted());
}

TEST_F(CudaNccl, AllreduceDeviceBuffer) {
  const std::size_t n = 100003;  // not a multiple of anything NCCL chunks by
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i)
    h[i] = static_cast<float>((rank_ + 1) * static_cast<int>(i % 7));
  DeviceBuffer d = floats(n);
  gpu_->to_device(h.data(), d.data(), n * sizeof(float));
  comm_->allreduce_sum(std::span<float>(d.floats(), n));
  const auto out = down(d, n);
  const float ranks_sum = static_cast<float>(size_ * (size_ + 1) / 2);
  for (std::size_t i = 0; i < n; i += 101)
    ASSERT_EQ(out[i], ranks_sum * static_cast<float>(i % 7)) << i;
}

TEST_F(CudaNccl, NonBlockingAllreduceIsOrderedAfterCompute) {
  // Buckets as the gradient sync launches them: the compute stream writes each (fill), the
  // all-reduce is started right away without a host synchronisation, and must see the values.
  const int buckets = 12;
  const std::size_t n = 4096;
  std::vector<DeviceBuffer> bufs;
  std::vector<Request> reqs;
  for (int b = 0; b < buckets; ++b) {
    bufs.push_back(floats(n));
    gpu_->fill(static_cast<std::int64_t>(n), static_cast<float>((rank_ + 1) * (b + 1)),
               bufs.back().floats());
    reqs.push_back(comm_->iallreduce_sum(std::span<float>(bufs.back().floats(), n)));
    EXPECT_FALSE(reqs.back().empty());
  }
  EXPECT_EQ(comm_->pending_requests(), static_cast<std::size_t>(buckets));
  // Complete out of order: half with test() polling, the rest with wait().
  for (int b = buckets - 1; b >= buckets / 2; --b)
    while (!comm_->test(reqs[static_cast<std::size_t>(b)])) std::this_thread::yield();
  for (int b = 0; b < buckets / 2; ++b) comm_->wait(reqs[static_cast<std::size_t>(b)]);
  EXPECT_EQ(comm_->pending_requests(), 0u);
  // Work enqueued on the compute stream after wait() sees the reduced values: double them there.
  for (int b = 0; b < buckets; ++b)
    gpu_->add(static_cast<std::int64_t>(n), bufs[static_cast<std::size_t>(b)].floats(),
              bufs[static_cast<std::size_t>(b)].floats());
  const float ranks_sum = static_cast<float>(size_ * (size_ + 1) / 2);
  for (int b = 0; b < buckets; ++b) {
    const auto out = down(bufs[static_cast<std::size_t>(b)], n);
    EXPECT_EQ(out.front(), 2 * ranks_sum * static_cast<float>(b + 1)) << "bucket " << b;
    EXPECT_EQ(out.back(), 2 * ranks_sum * static_cast<float>(b + 1)) << "bucket " << b;
  }
  Request empty;
  comm_->wait(empty);
  EXPECT_TRUE(comm_->test(empty));
}

// In training (abort_job_on_stall: the watchdog keeps the timeout) a blocking all-reduce of device
// memory - sync batch norm's statistics, the gradients with comm.overlap = false - is a stream
// wait, not a host wait. A host function holds the compute stream shut: the all-reduce (which
// starts after the compute stream's earlier work) cannot run until it opens, so the call must
// return while it is shut. Work enqueued afterwards on the compute stream sees the sums. (A
// releaser opens it after 10 s, so a host wait fails the test instead of hanging it.)
TEST_F(CudaNccl, DeviceAllreduceInTrainingIsAStreamWait) {
  comm_.reset();
  NcclCommOptions o;
  o.comm.timeout_s = 120;
  o.abort_job_on_stall = true;
  comm_ = make_nccl_comm(MPI_COMM_WORLD, device_, gpu_->compute_stream(), o);
  const std::size_t n = 4096;
  DeviceBuffer d(device_, n * sizeof(double));
  std::vector<double> h(n, 0.5 * (rank_ + 1));
  gpu_->to_device(h.data(), d.data(), n * sizeof(double));
  std::atomic<bool> open{false};
  gpu_->enqueue_host_function(
      [](void* gate) {
        while (!static_cast<std::atomic<bool>*>(gate)->load())
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      &open);
  std::thread releaser([&open] {
    for (int i = 0; i < 1000 && !open.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    open = true;
  });
  // Opens the gate and joins the releaser however this scope is left (a throwing all-reduce too):
  // the stream's host function reads `open`, which must outlive it.
  struct Release {
    std::atomic<bool>& open;
    std::thread& t;
    ~Release() {
      open = true;
      if (t.joinable()) t.join();
    }
  } release{open, releaser};
  comm_->allreduce_sum(std::span<double>(static_cast<double*>(d.data()), n));
  const bool returned_while_shut = !open.load();
  open = true;
  releaser.join();
  EXPECT_TRUE(returned_while_shut) << "allreduce_sum waited on the host for the device";
  std::vector<double> out(n);  // read in compute-stream order: after the sums
  gpu_->to_host(d.data(), out.data(), n * sizeof(double));
  const double ranks_sum = 0.5 * size_ * (size_ + 1) / 2;
  EXPECT_EQ(out.front(), ranks_sum);
  EXPECT_EQ(out.back(), ranks_sum);
  // The barrier still waits on the host (it is what a barrier is for).
  comm_->barrier();
}

TEST_F(CudaNccl, HostBuffersAreStaged) {
  std::vector<double> d = {1.5 * (rank_ + 1), -2.0};
  comm_->allreduce_sum(std::span<double>(d));
  EXPECT_DOUBLE_EQ(d[0], 1.5 * size_ * (size_ + 1) / 2);
  EXPECT_DOUBLE_EQ(d[1], -2.0 * size_);
  std::vector<std::int64_t> counts = {rank_ + 1, std::int64_t{1} << 40};
  comm_->allreduce_sum(std::span<std::int64_t>(counts));
  EXPECT_EQ(counts[0], size_ * (size_ + 1) / 2);
  EXPECT_EQ(counts[1], (std::int64_t{1} << 40) * size_);
  std::vector<float> f(10, static_cast<float>(rank_));
  Request r = comm_->iallreduce_sum(std::span<float>(f));  // host: completes at once
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(f[9], static_cast<float>(size_ * (size_ - 1) / 2));

  // Broadcast from the last rank, allgather, barrier.
  std::string msg = rank_ == size_ - 1 ? "hello from the last rank" : std::string(24, '?');
  comm_->broadcast(std::as_writable_bytes(std::span<char>(msg.data(), msg.size())), size_ - 1);
  EXPECT_EQ(msg, "hello from the last rank");
  const std::int32_t mine = 100 + rank_;
  std::vector<std::int32_t> all(static_cast<std::size_t>(size_));
  comm_->allgather(std::as_bytes(std::span<const std::int32_t>(&mine, 1)),
                   std::as_writable_bytes(std::span<std::int32_t>(all)));
  for (int q = 0; q < size_; ++q) EXPECT_EQ(all[static_cast<std::size_t>(q)], 100 + q);
  comm_->barrier();
  EXPECT_THROW(comm_->broadcast(std::as_writable_bytes(std::span<char>(msg.data(), 1)), size_),
               Error);
}

TEST_F(CudaNccl, DeviceBroadcastAndAllgather) {
  const std::size_t n = 257;
  DeviceBuffer d = floats(n);
  gpu_->fill(static_cast<std::int64_t>(n), rank_ == 0 ? 7.0f : -1.0f, d.floats());
  comm_->broadcast(std::span<std::byte>(static_cast<std::byte*>(d.data()), n * sizeof(float)), 0);
  EXPECT_EQ(down(d, n)[n - 1], 7.0f);
  DeviceBuffer all = floats(n * static_cast<std::size_t>(size_));
  DeviceBuffer mine = floats(n);
  gpu_->fill(static_cast<std::int64_t>(n), static_cast<float>(rank_), mine.floats());
  comm_->allgather(
      std::span<const std::byte>(static_cast<const std::byte*>(mine.data()), n * sizeof(float)),
      std::span<std::byte>(static_cast<std::byte*>(all.data()), all.bytes()));
  const auto out = down(all, n * static_cast<std::size_t>(size_));
  for (int q = 0; q < size_; ++q)
    EXPECT_EQ(out[static_cast<std::size_t>(q) * n + 5], static_cast<float>(q));
}

TEST_F(CudaNccl, DistinctGpusPerRank) {
  // The check ddp_train makes after assigning devices: gather (host, GPU UUID) from every rank.
  const auto info = gpu_->device_info();
  char host[256] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  char mine[256] = {};
  std::snprintf(mine, sizeof mine, "%s|%s", host, info.uuid.c_str());
  std::vector<char> all(256 * static_cast<std::size_t>(size_));
  MPI_Allgather(mine, 256, MPI_CHAR, all.data(), 256, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<backend::DeviceClaim> claims;
  for (int q = 0; q < size_; ++q) {
    const std::string s(all.data() + 256 * q);
    claims.push_back({q, s.substr(0, s.find('|')), 0, s.substr(s.find('|') + 1), ""});
  }
  EXPECT_NO_THROW(backend::check_distinct_devices(claims));
}

// A rank that never joins a collective: the others report the stall within the timeout (with the
// communicator aborted) instead of hanging. Needs two ranks.
TEST_F(CudaNccl, StallIsReportedNotWaitedOut) {
  if (size_ < 2) GTEST_SKIP() << "needs at least 2 ranks (run under mpiexec with one rank per GPU)";
  comm_.reset();
  NcclCommOptions o;
  o.comm.timeout_s = 3;
  o.abort_job_on_stall = false;
  const auto made = make_nccl_comm(MPI_COMM_WORLD, device_, gpu_->compute_stream(), o);
  NcclComm& c = *made;
  if (rank_ == 0) {
    DeviceBuffer d = floats(1024);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      c.allreduce_sum(std::span<float>(d.floats(), 1024));
      ADD_FAILURE() << "the all-reduce completed although the other ranks never joined";
    } catch (const SystemError& e) {
      EXPECT_NE(std::string(e.what()).find("did not complete within"), std::string::npos)
          << e.what();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(waited, 30.0);
    EXPECT_TRUE(c.aborted());
    EXPECT_THROW(c.barrier(), SystemError);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace ddp::comm
