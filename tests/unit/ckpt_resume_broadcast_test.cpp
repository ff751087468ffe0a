// broadcast_resume_state over the real MpiComm: rank 0's snapshot state reaches every rank in two
// broadcasts (length, bytes), "no snapshot" reaches them as such, and rank 0's failure reaches them
// as an error instead of a hang. In the unit-test run there is one rank;
// test_mpi_resume_broadcast.sh runs these tests again under `mpirun -np 2`.
#include <gtest/gtest.h>
#include <mpi.h>

#include <iostream>
#include <memory>
#include <vector>

#include "../../src/ckpt/snapshot_codec.hpp"
#include "../../src/ckpt/snapshot_fields.hpp"
#include "ddp/ckpt/resume_broadcast.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/error.hpp"
#include "mpi_test_env.hpp"

namespace ddp::ckpt {
namespace {

using ddp::testing::ensure_mpi;

// The real communicator, with a record of the broadcasts that go through it.
class RecordingComm final : public comm::Communicator {
 public:
  explicit RecordingComm(comm::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void allreduce_sum(std::span<float> d) override { inner_.allreduce_sum(d); }
  void allreduce_sum(std::span<double> d) override { inner_.allreduce_sum(d); }
  void allreduce_sum(std::span<std::int64_t> d) override { inner_.allreduce_sum(d); }
  void broadcast(std::span<std::byte> data, int root) override {
    broadcasts.push_back(data.size());
    inner_.broadcast(data, root);
  }
  void barrier() override { inner_.barrier(); }
  std::vector<std::size_t> broadcasts;  // bytes of each, in order

 private:
  comm::Communicator& inner_;
};

struct Ranks {
  Ranks() {
    ensure_mpi();
    mpi = std::make_unique<comm::MpiComm>(MPI_COMM_WORLD);
    comm = std::make_unique<RecordingComm>(*mpi);
  }
  std::unique_ptr<comm::MpiComm> mpi;
  std::unique_ptr<RecordingComm> comm;
};

// A state with every kind of field set, texts of a realistic size included.
SnapshotState rank0_state() {
  SnapshotState s;
  s.meta.position = {3, 17, 4200, 101};
  s.meta.seed = 0xfedcba9876543210ULL;
  s.meta.world_size = 3;
  s.meta.config_toml = std::string(5000, 'c') + "\n";
  s.meta.metrics_jsonl = "{\"epoch\":1}\n{\"epoch\":2}\n{\"epoch\":3}\n";
  s.meta.program_version = "9.8.7";
  s.meta.loss_scale = 1024.0;
  s.meta.loss_scale_good_steps = 77;
  s.meta.run_id = "run-broadcast";
  s.meta.global_batch = 192;
  s.meta.run_train_s = 123.25;
  s.meta.epoch_progress = {5.5, 60, 80, 17, 2.75, 0.5};
  s.meta.rank_shares = {96, 32, 64};
  s.optimizer_name = "adamw";
  s.optimizer_steps = 101;
  return s;
}

TEST(ResumeBroadcast, Rank0StateReachesEveryRankAsTwoBroadcasts) {
  Ranks r;
  if (r.comm->rank() == 0) std::cout << "resume broadcast over " << r.comm->size() << " ranks\n";
  int loads = 0;
  const auto got = broadcast_resume_state(*r.comm, [&]() -> std::optional<SnapshotState> {
    ++loads;
    return rank0_state();
  });
  EXPECT_EQ(loads, r.comm->rank() == 0 ? 1 : 0);  // only rank 0 reads the snapshot
  ASSERT_TRUE(got.has_value());
  const SnapshotState want = rank0_state();
  for (const Field& f : snapshot_fields())
    EXPECT_EQ(f.value_text(*got), f.value_text(want)) << f.name;
  EXPECT_EQ(got->meta.config_toml, want.meta.config_toml);
  if (r.comm->size() == 1) {
    EXPECT_TRUE(r.comm->broadcasts.empty());  // nothing to tell
  } else {
    const std::size_t encoded = encode_state(want).size();
    EXPECT_EQ(r.comm->broadcasts, (std::vector<std::size_t>{sizeof(std::int64_t), encoded}));
  }
}

TEST(ResumeBroadcast, NoSnapshotIsNoneOnEveryRank) {
  Ranks r;
  const auto got = broadcast_resume_state(*r.comm, [] { return std::optional<SnapshotState>(); });
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(r.comm->broadcasts.size(), r.comm->size() > 1 ? 1u : 0u);  // the length only
}

// Rank 0 rethrows its own error; every other rank learns that rank 0 failed. Both then go on with
// the next collective together: nobody was left waiting.
TEST(ResumeBroadcast, Rank0FailureReachesEveryRankAsAnError) {
  Ranks r;
  try {
    (void)broadcast_resume_state(*r.comm, []() -> std::optional<SnapshotState> {
      throw DataError("snapshot 'x.h5': checksum mismatch: the file is corrupt");
    });
    ADD_FAILURE() << "rank " << r.comm->rank() << ": no error";
  } catch (const DataError& e) {
    EXPECT_EQ(r.comm->rank(), 0);
    EXPECT_STREQ(e.what(), "snapshot 'x.h5': checksum mismatch: the file is corrupt");
  } catch (const Error& e) {
    EXPECT_NE(r.comm->rank(), 0);
    EXPECT_STREQ(e.what(), "rank 0 could not resume from its snapshot (see its error)");
  }
  // Not only ddp::Error: anything rank 0 throws is reported.
  try {
    (void)broadcast_resume_state(*r.comm,
                                 []() -> std::optional<SnapshotState> { throw std::bad_alloc(); });
    ADD_FAILURE() << "rank " << r.comm->rank() << ": no error";
  } catch (const std::bad_alloc&) {
    EXPECT_EQ(r.comm->rank(), 0);
  } catch (const Error&) {
    EXPECT_NE(r.comm->rank(), 0);
  }
  std::int64_t one = 1;
  r.comm->allreduce_sum(std::span<std::int64_t>(&one, 1));
  EXPECT_EQ(one, r.comm->size());
}

}  // namespace
}  // namespace ddp::ckpt
