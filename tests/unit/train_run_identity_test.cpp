// The pieces of a run's identity that need no MPI job: configuration changes between two resolved
// configurations and their classes, and run.json's round trip and errors.
#include <gtest/gtest.h>

#include "ddp/error.hpp"
#include "ddp/train/config_changes.hpp"
#include "ddp/train/run_record.hpp"

namespace ddp::train {
namespace {

const char* kBefore = R"([run]
dir = "runs/a"
[train]
epochs = 3
seed = 42
resume = ""
[optim]
name = "adam"
lr = 0.001
[[model.layers]]
type = "linear"
out_features = 10
)";

TEST(ConfigChanges, ListsEveryChangedKeyWithBothValues) {
  std::string after = kBefore;
  after.replace(after.find("lr = 0.001"), 10, "lr = 0.002");
  after.replace(after.find("epochs = 3"), 10, "epochs = 5");
  after.replace(after.find("out_features = 10"), 17, "out_features = 12");
  const auto changes = config_changes(kBefore, after);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].key, "model.layers");
  EXPECT_TRUE(changes_meaning(changes[0].key));
  EXPECT_EQ(describe(changes[1]), "optim.lr: 0.001 -> 0.002");
  EXPECT_FALSE(changes_meaning(changes[1].key));
  EXPECT_EQ(describe(changes[2]), "train.epochs: 3 -> 5");
  EXPECT_TRUE(config_changes(kBefore, kBefore).empty());
}

TEST(ConfigChanges, AbsentKeysAndClasses) {
  const auto changes = config_changes("[train]\nseed = 1\n", "[train]\nshuffle = false\n");
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(describe(changes[0]), "train.seed: 1 -> (absent)");
  EXPECT_TRUE(fixes_sample_position("train.seed"));
  EXPECT_TRUE(fixes_sample_position("data.train_limit"));
  EXPECT_FALSE(fixes_sample_position("optim.lr"));
  EXPECT_TRUE(changes_meaning("data.dataset"));
  EXPECT_TRUE(changes_meaning("optim.name"));
  EXPECT_TRUE(is_invocation_key("train.resume"));
  EXPECT_TRUE(is_invocation_key("runtime.threads"));
  EXPECT_FALSE(is_invocation_key("train.epochs"));
  EXPECT_THROW(config_changes("[train", "[train]"), ConfigError);
}

TEST(ConfigHash, IgnoresHowTheRunIsInvokedButNotWhatItTrains) {
  std::string resumed = kBefore;
  resumed.replace(resumed.find("resume = \"\""), 11, "resume = \"auto\"");
  resumed.replace(resumed.find("dir = \"runs/a\""), 14, "dir = \"runs/b\"");
  EXPECT_EQ(config_hash(kBefore), config_hash(resumed));
  std::string other = kBefore;
  other.replace(other.find("seed = 42"), 9, "seed = 43");
  EXPECT_NE(config_hash(kBefore), config_hash(other));
  EXPECT_EQ(config_hash(kBefore).size(), 16u);
}

TEST(RunRecord, RoundTripsThroughJson) {
  RunRecord r;
  r.run_id = new_run_id();
  r.status = "stopped";
  r.config_hash = "0123456789abcdef";
  r.epochs = 5;
  r.epochs_done = 2;
  RunSegment s;
  s.number = 1;
  s.start = utc_now();
  s.end = utc_now();
  s.world_size = 3;
  s.resumed_from = "runs/a/snapshot_e0001.h5";
  s.start_epoch = 1;
  s.start_step = 7;
  s.config_changes = {"optim.lr: 0.001 -> 0.002"};
  s.exit = "stopped by User defined signal 1";
  s.epochs_done = 2;
  r.segments = {s, s};
  r.segments[1].number = 2;
  const RunRecord back = parse_run_record(to_json(r), "run.json");
  EXPECT_EQ(to_json(back), to_json(r));
  EXPECT_EQ(back.segments[1].number, 2);
  EXPECT_EQ(back.segments[0].config_changes, s.config_changes);
  EXPECT_EQ(r.run_id.size(), 24u) << r.run_id;
}

TEST(RunRecord, AnUnreadableRecordNamesTheFileAndTheWayOut) {
  for (const char* bad : {"", "{", "{\"run_id\": 3}", "[]", "{\"run_id\": \"\"}"}) {
    try {
      parse_run_record(bad, "/x/run.json");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("/x/run.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--run.overwrite"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ddp::train
