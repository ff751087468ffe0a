// Snapshots in the run directory: names, the newest readable one, keeping the last K, atomic
// writes that fail cleanly (leaving the previous snapshot and no temporary file), writability.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "ckpt_test_util.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "layer_spec_util.hpp"

namespace ddp::ckpt {
namespace {

namespace fs = std::filesystem;

using testutil::L;

// A small model with batch norm and an sgd-with-momentum optimizer; its state is what it was
// initialised to (the round trip of trained state is ckpt_snapshot_test's job).
struct SmallRun {
  SmallRun()
      : model({L("conv2d", "conv1", 3, 3), L("batchnorm", "bn1"), L("relu", "relu1"),
               L("flatten", "flat"), L("linear", "fc1", 4)},
              Shape{2, 5, 5}, 4, *be) {
    optim::Options c;
    c.momentum = 0.9;
    opt = optim::Optimizer::create(c, *be, model.params().size());
    model.init_parameters(1);
  }
  void write(const fs::path& file, std::int64_t epoch, std::int64_t step = 0,
             const std::string& run = "run-a") {
    SnapshotMeta m;
    m.run_id = run;
    m.position = {epoch, step, epoch * 100 + step * 10, epoch * 10 + step};
    m.config_toml = "[train]\nepochs = 9\n";
    write_snapshot(file, model, *opt, "sgd", m);
  }
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  nn::Model model;
  std::unique_ptr<optim::Optimizer> opt;
};

using test_util::ScratchDir;
using test_util::slurp;
using test_util::spit;

void truncate_to_half(const fs::path& p) {
  const std::string bytes = slurp(p);
  spit(p, bytes.substr(0, bytes.size() / 2));
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& n : names_in(dir))
    if (n.find(".tmp.") != std::string::npos) out.push_back(n);
  return out;
}

// Lowers this process's file size limit (RLIMIT_FSIZE) for its lifetime: writes past it fail with
// EFBIG, a real mid-file write failure that, unlike permission bits, also stops root.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills us
    rlimit lower = old_;
    lower.rlim_cur = bytes;
    ok_ = setrlimit(RLIMIT_FSIZE, &lower) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
  bool ok_ = false;
};

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const SystemError& e) {
    if (std::getenv("DDP_CKPT_SHOW")) std::printf("message: %s\n", e.what());
    return e.what();
  }
  return "(no SystemError)";
}

TEST(SnapshotNames, EpochAndMidEpoch) {
  EXPECT_EQ(snapshot_name(3), "snapshot_e0003.h5");
  EXPECT_EQ(snapshot_name(3, 120), "snapshot_e0003_s000120.h5");
  EXPECT_EQ(snapshot_name(12345), "snapshot_e12345.h5");
}

TEST(FindLatest, OrdersByThePositionInTheFileNotByNameOrMtime) {
  ScratchDir dir;
  SmallRun r;
  r.write(dir.path() / snapshot_name(2), 2);
  r.write(dir.path() / snapshot_name(2, 5), 2, 5);  // mid-epoch 3: newer than e0002
  r.write(dir.path() / snapshot_name(1), 1);        // written last: the newest mtime
  // Misnamed: the file says epoch 0. The position stored inside is what counts.
  r.write(dir.path() / snapshot_name(9), 0);
  // Not candidates: other names, a killed writer's temporary file.
  spit(dir.path() / "notes.txt", "x");
  spit(dir.path() / "best.h5", "not read");
  spit(dir.path() / ".snapshot_e0007.h5.tmp.4242", "partial");
  std::vector<std::string> warnings;
  const auto latest = find_latest(dir.path(), [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->filename(), snapshot_name(2, 5));
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

TEST(FindLatest, SkipsATruncatedNewestSnapshotWithAWarning) {
  ScratchDir dir;
  SmallRun r;
  r.write(dir.path() / snapshot_name(1), 1);
  r.write(dir.path() / snapshot_name(2), 2);
  truncate_to_half(dir.path() / snapshot_name(2));
  std::vector<std::string> warnings;
  const auto latest = find_latest(dir.path(), [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->filename(), snapshot_name(1));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find((dir.path() / snapshot_name(2)).string()), std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("truncated"), std::string::npos) << warnings[0];
}

TEST(FindLatest, SkipsANewestSnapshotWithCorruptData) {
  ScratchDir dir;
  SmallRun r;
  r.write(dir.path() / snapshot_name(1), 1);
  r.write(dir.path() / snapshot_name(2), 2);
  std::string bytes = slurp(dir.path() / snapshot_name(2));
  const float* weight = r.model.named_params()[0].tensor.data();
  const auto at = bytes.find(std::string(reinterpret_cast<const char*>(weight), 8 * sizeof(float)));
  ASSERT_NE(at, std::string::npos);
  bytes[at] = static_cast<char>(bytes[at] ^ 1);
  spit(dir.path() / snapshot_name(2), bytes);
  std::vector<std::string> warnings;
  const auto latest = find_latest(dir.path(), [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->filename(), snapshot_name(1));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("checksum mismatch"), std::string::npos) << warnings[0];
}

TEST(FindLatest, NoneInAnEmptyOrMissingDirectory) {
  ScratchDir dir;
  EXPECT_FALSE(find_latest(dir.path(), nullptr));
  EXPECT_FALSE(find_latest(dir.path() / "absent", nullptr));
  spit(dir.path() / snapshot_name(1), "garbage");
  int warned = 0;
  EXPECT_FALSE(find_latest(dir.path(), [&](const std::string&) { ++warned; }));
  EXPECT_EQ(warned, 1);
}

TrainingPosition at(std::int64_t epoch, std::int64_t step = 0) {
  return {epoch, step, epoch * 100 + step * 10, epoch * 10 + step};
}

TEST(Prune, KeepsTheNewestKAndTouchesNothingElse) {
  ScratchDir dir;
  SmallRun r;
  for (int e = 1; e <= 4; ++e) r.write(dir.path() / snapshot_name(e), e);
  r.write(dir.path() / snapshot_name(4, 3), 4, 3);
  r.write(dir.path() / snapshot_name(5), 5);
  truncate_to_half(dir.path() / snapshot_name(4, 3));  // incomplete: neither counted nor removed
  spit(dir.path() / "metrics.jsonl", "{}\n");
  spit(dir.path() / "snapshot_e0099.h5", "unreadable: left for a human");
  prune(dir.path(), 0, "run-a", at(5));  // keep all
  EXPECT_EQ(names_in(dir.path()).size(), 8u);
  const auto removed = prune(dir.path(), 2, "run-a", at(5));
  EXPECT_EQ(removed.size(), 3u);
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{snapshot_name(4), snapshot_name(4, 3), snapshot_name(5),
                                   "metrics.jsonl", "snapshot_e0099.h5"}));
  prune(dir.path(), 5, "run-a", at(5));
  EXPECT_EQ(names_in(dir.path()).size(), 5u);
}

// Defect: a 2-epoch run started in a directory holding a 5-epoch run's snapshots kept the old
// run's e0003-e0005 and deleted the e0001/e0002 it had just written.
TEST(Prune, NeverRemovesAnotherRunsFilesNorTheOneJustWritten) {
  ScratchDir dir;
  SmallRun r;
  for (int e = 3; e <= 5; ++e) r.write(dir.path() / snapshot_name(e), e, 0, "old-run");
  r.write(dir.path() / snapshot_name(1), 1, 0, "new-run");
  EXPECT_TRUE(prune(dir.path(), 1, "new-run", at(1)).empty());
  r.write(dir.path() / snapshot_name(2), 2, 0, "new-run");
  const auto removed = prune(dir.path(), 1, "new-run", at(2));
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].filename(), snapshot_name(1));
  EXPECT_EQ(names_in(dir.path()), (std::set<std::string>{snapshot_name(2), snapshot_name(3),
                                                         snapshot_name(4), snapshot_name(5)}));
  // Files of an older program (no run id) are never this run's either.
  r.write(dir.path() / snapshot_name(7), 7, 0, "");
  EXPECT_TRUE(prune(dir.path(), 1, "new-run", at(2)).empty());
  EXPECT_TRUE(prune(dir.path(), 1, "", at(9)).empty());
}

// Defect: in a directory of corrupt snapshots of the right length, keep_last 1 deleted the file
// just written and kept a corrupt one.
TEST(Prune, KeepsTheFileJustWrittenAndLeavesCorruptOnesAlone) {
  ScratchDir dir;
  SmallRun r;
  for (int e = 2; e <= 3; ++e) {
    r.write(dir.path() / snapshot_name(e), e);
    std::string bytes = slurp(dir.path() / snapshot_name(e));
    bytes[bytes.size() - 100] = static_cast<char>(bytes[bytes.size() - 100] ^ 0x55);
    spit(dir.path() / snapshot_name(e), bytes);  // same length, checksum mismatch
  }
  r.write(dir.path() / snapshot_name(1), 1);
  EXPECT_TRUE(prune(dir.path(), 1, "run-a", at(1)).empty());
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{snapshot_name(1), snapshot_name(2), snapshot_name(3)}));
}

TEST(FindLatest, WithARunIdTakesOnlyThatRunsSnapshots) {
  ScratchDir dir;
  SmallRun r;
  r.write(dir.path() / snapshot_name(1), 1, 0, "mine");
  r.write(dir.path() / snapshot_name(4), 4, 0, "other");
  const auto mine = find_latest(dir.path(), nullptr, "mine");
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->filename(), snapshot_name(1));
  EXPECT_EQ(find_latest(dir.path(), nullptr)->filename(), snapshot_name(4));
  EXPECT_FALSE(find_latest(dir.path(), nullptr, "nobody"));
}

TEST(WriteSnapshot, LeavesNoTemporaryFileAndReplacesAtomically) {
  ScratchDir dir;
  SmallRun r;
  const fs::path file = dir.path() / snapshot_name(1);
  r.write(file, 1);
  r.write(file, 2);  // overwrite through rename
  EXPECT_TRUE(temp_files(dir.path()).empty());
  EXPECT_EQ(read_meta(file).position.epoch, 2);
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{snapshot_name(1)});
  // A relative path writes into the current directory.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  r.write("snapshot_e0003.h5", 3);
  fs::current_path(cwd);
  EXPECT_EQ(read_meta(dir.path() / "snapshot_e0003.h5").position.epoch, 3);
  EXPECT_TRUE(temp_files(dir.path()).empty());
}

TEST(WriteSnapshot, FailsUnderANonDirectoryNamingThePath) {
  ScratchDir dir;
  SmallRun r;
  spit(dir.path() / "plain_file", "x");
  const fs::path file = dir.path() / "plain_file" / snapshot_name(1);
  const std::string msg = message_of([&] { r.write(file, 1); });
  EXPECT_NE(msg.find("cannot write snapshot '" + file.string() + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Not a directory"), std::string::npos) << msg;
  EXPECT_THROW(r.write(dir.path() / "absent" / snapshot_name(1), 1), SystemError);
}

TEST(WriteSnapshot, AFailedWriteKeepsThePreviousSnapshotAndLeavesNoTemporaryFile) {
  ScratchDir dir;
  SmallRun r;
  const fs::path file = dir.path() / snapshot_name(1);
  r.write(file, 1);
  const std::string before = slurp(file);
  ASSERT_GT(before.size(), 8192u);
  std::string msg;
  {
    FileSizeLimit limit(4096);  // the disk "fills up" 4 KiB into the new file
    ASSERT_TRUE(limit.ok());
    msg = message_of([&] { r.write(file, 2); });
  }
  EXPECT_NE(msg.find("cannot write snapshot '" + file.string() + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
  EXPECT_EQ(slurp(file), before);
  EXPECT_EQ(read_meta(file).position.epoch, 1);
  EXPECT_TRUE(temp_files(dir.path()).empty());
}

TEST(WriteSnapshot, ReadOnlyDirectoryIsASystemError) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root, which permission bits do not stop; the non-directory and "
                    "file-size-limit tests cover failed writes";
  ScratchDir dir;
  SmallRun r;
  const fs::path file = dir.path() / snapshot_name(1);
  r.write(file, 1);
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  const std::string msg = message_of([&] { r.write(file, 2); });
  fs::permissions(dir.path(), fs::perms::owner_all);
  EXPECT_NE(msg.find("Permission denied"), std::string::npos) << msg;
  EXPECT_EQ(read_meta(file).position.epoch, 1);
  EXPECT_TRUE(temp_files(dir.path()).empty());
}

TEST(EnsureWritableDir, CreatesMissingDirectoriesAndLeavesNoProbe) {
  ScratchDir dir;
  const fs::path run = dir.path() / "a" / "b";
  ensure_writable_dir(run);
  EXPECT_TRUE(fs::is_directory(run));
  EXPECT_TRUE(fs::is_empty(run));
  ensure_writable_dir(run);  // exists already: fine
}

TEST(EnsureWritableDir, RefusesWhatCannotHoldFiles) {
  ScratchDir dir;
  spit(dir.path() / "plain_file", "x");
  const fs::path under_file = dir.path() / "plain_file" / "run";
  std::string msg = message_of([&] { ensure_writable_dir(under_file); });
  EXPECT_NE(msg.find("'" + under_file.string() + "'"), std::string::npos) << msg;
  msg = message_of([&] { ensure_writable_dir(dir.path() / "plain_file"); });
  EXPECT_NE(msg.find("not a directory"), std::string::npos) << msg;
  // procfs refuses new entries even to root.
  if (fs::exists("/proc/self")) {
    msg = message_of([] { ensure_writable_dir("/proc/ddp_ckpt_run"); });
    EXPECT_NE(msg.find("'/proc/ddp_ckpt_run'"), std::string::npos) << msg;
  }
}

TEST(RemoveStaleTempFiles, RemovesOnlyOtherWritersSnapshotTemporaries) {
  ScratchDir dir;
  const std::string mine = ".snapshot_e0002.h5.tmp." + std::to_string(::getpid());
  // Every file of the run directory written atomically: test_torture once left a model.txt one.
  for (const std::string& name :
       {std::string(".snapshot_e0001.h5.tmp.1"), std::string(".snapshot_e0003_s000004.h5.tmp.77"),
        std::string(".run.json.tmp.5"), std::string(".config.toml.tmp.6"),
        std::string(".metrics.jsonl.tmp.7"), std::string(".model.txt.tmp.5335"),
        std::string(".trace.json.tmp.9"), mine, std::string(".other.tmp.1"),
        std::string("snapshot_e0001.h5")})
    spit(dir.path() / name, "x");
  EXPECT_EQ(remove_stale_temp_files(dir.path()), 7);
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{mine, ".other.tmp.1", "snapshot_e0001.h5"}));
  EXPECT_EQ(remove_stale_temp_files(dir.path() / "absent"), 0);
}

}  // namespace
}  // namespace ddp::ckpt
