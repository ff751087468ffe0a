// The batch feed's contract on a GPU, checked with a device queue that records the order of calls
// (no GPU needed): batch k+1 is staged (loader, pinned copy, upload) after step k was taken and its
// work enqueued, the compute stream waits for each upload on the device, the copy stream waits on
// the device for the step that last read a slot before refilling it, and the host never waits for
// the work of the current or the previous step. And every batch arrives intact, also after the
// next one was staged.
#include "ddp/train/batch_feed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "data_test_util.hpp"
#include "ddp/data/loader.hpp"
#include "recording_device_queue.hpp"

namespace ddp::train {
namespace {

using data::BatchLoader;
using data::InMemoryDataset;
using data::SampleSet;
using Stream = backend::DeviceQueue::Stream;
using testutil::RecordingDeviceQueue;

const data::Normalization kNorm{{0.4f, 0.5f, 0.6f}, {0.2f, 0.25f, 0.3f}};

data::SamplerOptions opts(std::int64_t n, std::int64_t g) {
  data::SamplerOptions o;
  o.dataset_size = n;
  o.global_batch = g;
  o.world_size = 1;
  o.rank = 0;
  o.seed = 31;
  return o;
}

std::vector<float> expected_images(const SampleSet& ds, const data::RankBatch& rb,
                                   std::uint64_t epoch) {
  std::vector<float> images(rb.indices.size() * static_cast<std::size_t>(ds.image_bytes()));
  std::vector<std::int32_t> labels(rb.indices.size());
  data::fill_batch(ds, rb.indices, kNorm, {}, 31, epoch, images.data(), labels.data());
  return images;
}

// Runs `epochs` epochs the way the trainer does (take, enqueue the step, prefetch), each phase of
// the queue one step, and checks every batch's content before and after the prefetch.
void run_epochs(BatchFeed& feed, RecordingDeviceQueue& q, const SampleSet& ds, int epochs,
                std::int64_t batch, int* steps_out) {
  const InMemoryDataset held(ds);
  BatchLoader loader(held, kNorm, {}, 31, batch, true);
  int step = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const auto batches = data::epoch_batches(opts(ds.size(), batch), epoch);
    loader.start(batches, static_cast<std::uint64_t>(epoch));
    feed.begin(loader);
    std::size_t k = 0;
    q.phase = step;
    while (auto b = feed.take()) {
      ASSERT_LT(k, batches.size());
      const auto want = expected_images(ds, batches[k], static_cast<std::uint64_t>(epoch));
      ASSERT_EQ(b->size, static_cast<std::int64_t>(batches[k].indices.size()));
      EXPECT_TRUE(std::equal(want.begin(), want.end(), b->images)) << "step " << step;
      feed.prefetch();  // after the step's work is enqueued
      EXPECT_TRUE(std::equal(want.begin(), want.end(), b->images))
          << "step " << step << ": staging the next batch overwrote this one";
      ++k;
      q.phase = ++step;
    }
    EXPECT_EQ(k, batches.size());
    feed.prefetch();  // at the end: nothing to stage
  }
  *steps_out = step;
}

TEST(BatchFeed, StagesBatchKPlusOneDuringStepKAndNeverWaitsForRecentWork) {
  const SampleSet ds = data::test_util::pattern_dataset(30, 3, 4, 4);
  RecordingDeviceQueue q;
  BatchFeed feed(&q, 3 * 4 * 4, 4);
  int steps = 0;
  run_epochs(feed, q, ds, 2, 4, &steps);
  ASSERT_EQ(steps, 2 * 8);  // 30 samples in batches of 4: 8 steps an epoch (the last one of 2)

  // Uploads by phase: the first step stages its own batch and the next; every later step stages
  // exactly the next one (images + labels: 2 copies), none at an epoch's last step.
  std::vector<int> copies(static_cast<std::size_t>(steps) + 1, 0);
  for (const auto& c : q.calls)
    if (c.what == "copy") ++copies[static_cast<std::size_t>(c.phase)];
  EXPECT_EQ(copies[0], 4);
  for (int s = 1; s < steps; ++s) {
    // step 8 is the second epoch's first: it stages its own batch (the ring was drained) + next
    const int want = s == 7 || s == 15 ? 0 : s == 8 ? 4 : 2;
    EXPECT_EQ(copies[static_cast<std::size_t>(s)], want) << "step " << s;
  }

  int host_waits = 0, compute_waits = 0, copy_waits = 0;
  for (const auto& c : q.calls) {
    if (c.what == "host_waits") {
      ++host_waits;
      // Only for an upload (never for compute), and one at least two steps old.
      EXPECT_EQ(c.target_stream, Stream::copy) << "phase " << c.phase;
      EXPECT_LE(c.target_phase, c.phase - 2) << "phase " << c.phase;
    } else if (c.what == "stream_waits" && c.stream == Stream::compute) {
      ++compute_waits;  // each batch's upload, waited on the device
      EXPECT_EQ(c.target_stream, Stream::copy);
      EXPECT_LE(c.target_phase, c.phase);
    } else if (c.what == "stream_waits" && c.stream == Stream::copy) {
      // A slot's last reader, waited on the device (recorded once that step was enqueued: at
      // the next take, which at an epoch's end is the one that finds no batch).
      ++copy_waits;
      EXPECT_EQ(c.target_stream, Stream::compute);
      EXPECT_GE(c.target_phase, 0);
    }
  }
  EXPECT_EQ(compute_waits, steps);
  EXPECT_EQ(copy_waits, steps - BatchFeed::kSlots);  // every refill of a used slot
  EXPECT_EQ(host_waits, copy_waits);
}

TEST(BatchFeed, AnEpochLeftEarlyDropsItsStagedBatch) {
  const SampleSet ds = data::test_util::pattern_dataset(24, 3, 4, 4);
  RecordingDeviceQueue q;
  BatchFeed feed(&q, 3 * 4 * 4, 4);
  const InMemoryDataset held(ds);
  BatchLoader first(held, kNorm, {}, 31, 4, false);
  first.start(data::epoch_batches(opts(24, 4), 0), 0);
  feed.begin(first);
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(feed.take().has_value());
    feed.prefetch();  // batch s+1 staged, then the epoch is left (a stop)
  }
  int steps = 0;
  run_epochs(feed, q, ds, 1, 4, &steps);  // a new pass: its own batches, in order
  EXPECT_EQ(steps, 6);
}

// The trainer rebuilds its feed when the rank's batch grows (rank_shares = auto): every rebuild
// hands the old feed's events back, so a long run does not pile up CUDA events.
TEST(BatchFeed, ARebuiltFeedHandsItsEventsBack) {
  const SampleSet ds = data::test_util::pattern_dataset(24, 3, 4, 4);
  RecordingDeviceQueue q;
  for (int rebuild = 0; rebuild < 5; ++rebuild) {
    BatchFeed feed(&q, 3 * 4 * 4, 4 + rebuild);
    EXPECT_EQ(q.live_events, 2 * BatchFeed::kSlots);
    int steps = 0;
    run_epochs(feed, q, ds, 1, 4, &steps);  // a released event used again would throw
    EXPECT_EQ(steps, 6);
  }
  EXPECT_EQ(q.live_events, 0);
}

TEST(BatchFeed, OnTheCpuHandsOverTheLoadersBatches) {
  const SampleSet ds = data::test_util::pattern_dataset(10, 3, 4, 4);
  BatchFeed feed(nullptr, 3 * 4 * 4, 4);
  const InMemoryDataset held(ds);
  BatchLoader loader(held, kNorm, {}, 31, 4, false);
  const auto batches = data::epoch_batches(opts(10, 4), 0);
  loader.start(batches, 0);
  feed.begin(loader);
  for (const auto& rb : batches) {
    const auto b = feed.take();
    ASSERT_TRUE(b.has_value());
    feed.prefetch();
    const auto want = expected_images(ds, rb, 0);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), b->images));
  }
  EXPECT_FALSE(feed.take().has_value());
}

}  // namespace
}  // namespace ddp::train
