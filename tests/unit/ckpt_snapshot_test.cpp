// Snapshots of a real model and optimizer: bitwise round trip, the documented HDF5 layout (checked
// with h5ls/h5dump), corruption and truncation, architecture mismatches, inspect.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>

#include "ckpt_test_util.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/rng.hpp"
#include "layer_spec_util.hpp"

namespace ddp::ckpt {
namespace {

namespace fs = std::filesystem;

using testutil::L;

std::vector<nn::LayerSpec> small_net() {
  return {L("conv2d", "conv1", 3, 3, 1),
          L("batchnorm", "bn1"),
          L("relu", "relu1"),
          L("maxpool", "pool1", 0, 2),
          L("flatten", "flat"),
          L("linear", "fc1", 5),
          L("relu", "relu2"),
          L("linear", "fc2", 4)};
}

// A model and an optimizer that have taken real training steps (batch norm in train mode, so its
// running statistics move too).
struct TrainedRun {
  explicit TrainedRun(const std::string& optimizer, std::uint64_t seed = 1,
                      const std::vector<nn::LayerSpec>& specs = small_net())
      : model(specs, Shape{2, 6, 6}, 4, *be) {
    optim::Options c;
    c.name = optimizer;
    c.momentum = optimizer == "sgd" ? 0.9 : 0.0;
    opt = optim::Optimizer::create(c, *be, model.params().size());
    model.init_parameters(seed);
  }
  void train(int steps) {
    const std::int64_t n = 4;
    std::vector<float> x(static_cast<std::size_t>(n * 72)), dl(static_cast<std::size_t>(n * 4));
    const std::vector<std::int32_t> y{0, 1, 2, 3};
    for (int s = 0; s < steps; ++s, ++step) {
      CounterRng rng(hash_words(99, static_cast<std::uint64_t>(step)));
      for (auto& v : x) v = rng.next_float() * 2 - 1;
      nn::StepContext ctx;
      const Tensor& z = model.forward(Tensor::view(x.data(), Shape{n, 2, 6, 6}), ctx);
      be->softmax_xent(n, 4, z.data(), y.data(), 0.0f, 1.0f / n, dl.data());
      model.backward(Tensor::view(dl.data(), Shape{n, 4}));
      opt->step(model.params(), model.grads(), 0.05);
    }
  }
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  nn::Model model;
  std::unique_ptr<optim::Optimizer> opt;
  int step = 0;
};

SnapshotMeta meta_at(std::int64_t epoch, std::int64_t step = 0) {
  SnapshotMeta m;
  m.position = {epoch, step, epoch * 100 + step * 4, epoch * 25 + step};
  m.seed = 0xfedcba9876543210ULL;  // above INT64_MAX: must survive as unsigned
  m.world_size = 3;
  m.loss_scale = 32768.0;
  m.loss_scale_good_steps = 1234;
  m.config_toml = "[train]\nepochs = 5\nseed = 42\n";
  m.metrics_jsonl = "{\"epoch\":1,\"train_loss\":2.25}\n{\"epoch\":2,\"train_loss\":1.5}\n";
  m.program_version = "0.1.0";
  m.run_id = "run-42";
  m.global_batch = 96;
  m.run_train_s = 12.5;
  m.epoch_progress = {3.25, 17, 40, 5, 1.5, 0.25};
  return m;
}

using test_util::ScratchDir;
using test_util::slurp;
using test_util::spit;

// stdout+stderr of a shell command, or nullopt when the tool is not installed.
std::optional<std::string> run_tool(const std::string& tool, const std::string& args) {
  if (std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) != 0) return std::nullopt;
  std::string out;
  FILE* pipe = ::popen((tool + " " + args + " 2>&1").c_str(), "r");
  if (!pipe) return std::nullopt;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

template <typename T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}
bool same_bits(const Tensor& a, const Tensor& b) {
  return same_bits<float>({a.data(), static_cast<std::size_t>(a.numel())},
                          {b.data(), static_cast<std::size_t>(b.numel())});
}

void expect_data_error(const fs::path& file, const std::string& needle) {
  try {
    (void)read_snapshot(file);
    ADD_FAILURE() << "read_snapshot(" << file << ") did not throw";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, RestoresModelAndOptimizerBitwise) {
  ScratchDir dir;
  const fs::path file = dir.path() / snapshot_name(2, 5);
  TrainedRun a(GetParam());
  a.train(3);
  write_snapshot(file, a.model, *a.opt, GetParam(), meta_at(2, 5));

  const Snapshot s = read_snapshot(file);
  const SnapshotMeta want = meta_at(2, 5);
  EXPECT_EQ(s.meta.position, want.position);
  EXPECT_EQ(s.meta.seed, want.seed);
  EXPECT_EQ(s.meta.world_size, 3);
  EXPECT_EQ(s.meta.loss_scale, 32768.0);
  EXPECT_EQ(s.meta.loss_scale_good_steps, 1234);
  EXPECT_EQ(s.meta.config_toml, want.config_toml);
  EXPECT_EQ(s.meta.metrics_jsonl, want.metrics_jsonl);
  EXPECT_EQ(s.meta.program_version, "0.1.0");
  EXPECT_EQ(s.meta.format_version, kFormatVersion);
  EXPECT_EQ(s.meta.run_id, "run-42");
  EXPECT_EQ(s.meta.global_batch, 96);
  EXPECT_EQ(s.meta.run_train_s, 12.5);
  EXPECT_EQ(s.meta.epoch_progress.loss_sum, 3.25);
  EXPECT_EQ(s.meta.epoch_progress.correct, 17);
  EXPECT_EQ(s.meta.epoch_progress.samples, 40);
  EXPECT_EQ(s.meta.epoch_progress.steps, 5);
  EXPECT_EQ(s.meta.epoch_progress.train_s, 1.5);
  EXPECT_EQ(s.meta.epoch_progress.comm_wait_s, 0.25);
  EXPECT_EQ(s.optimizer_name, GetParam());
  EXPECT_EQ(s.optimizer_steps, 3);
  EXPECT_EQ(s.source, file);
  ASSERT_EQ(s.shapes.size(), a.model.named_params().size() + a.model.named_buffers().size());
  EXPECT_EQ(s.shapes[0],
            (std::pair<std::string, std::vector<std::int64_t>>{"conv1.weight", {3, 2, 3, 3}}));
  EXPECT_EQ(s.shapes[2].first, "bn1.weight");  // model order: layer by layer
  EXPECT_EQ(s.shapes[4].first, "bn1.running_mean");

  TrainedRun b(GetParam(), 7);  // different initial weights, fresh optimizer state
  ASSERT_FALSE(same_bits<float>(a.model.params(), b.model.params()));
  restore(s, b.model, *b.opt);
  EXPECT_TRUE(same_bits<float>(a.model.params(), b.model.params()));
  EXPECT_TRUE(same_bits<float>(a.model.buffers(), b.model.buffers()));
  EXPECT_EQ(a.model.digest(), b.model.digest());
  EXPECT_EQ(b.opt->steps_taken(), 3);
  const auto sa = a.opt->state(), sb = b.opt->state();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_TRUE(same_bits(sa[i].second, sb[i].second)) << sa[i].first;
  }
  // The batch-norm statistics really were trained, so the buffer comparison means something.
  EXPECT_NE(a.model.named_buffers()[0].tensor.data()[0], 0.0f);

  // Same state, same next step: the resumed run continues the original bit for bit.
  b.step = a.step;
  a.train(2);
  b.train(2);
  EXPECT_TRUE(same_bits<float>(a.model.params(), b.model.params()));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, RoundTrip, ::testing::Values("sgd", "adam", "adamw"));

TEST(Snapshot, PlainSgdHasNoOptimizerState) {
  ScratchDir dir;
  TrainedRun a("sgd");
  optim::Options plain;  // momentum 0: no state buffer
  a.opt = optim::Optimizer::create(plain, *a.be, a.model.params().size());
  a.train(2);
  const fs::path file = dir.path() / "snapshot_e0001.h5";
  write_snapshot(file, a.model, *a.opt, "sgd", meta_at(1));
  const Snapshot s = read_snapshot(file);
  EXPECT_TRUE(s.optimizer.empty());
  EXPECT_EQ(s.optimizer_steps, 2);
  TrainedRun b("sgd", 3);
  b.opt = optim::Optimizer::create(plain, *b.be, b.model.params().size());
  restore(s, b.model, *b.opt);
  EXPECT_EQ(a.model.digest(), b.model.digest());
}

TEST(Snapshot, LayoutAsDocumentedWithH5ls) {
  ScratchDir dir;
  const fs::path file = dir.path() / "snapshot_e0003.h5";
  TrainedRun a("sgd");
  a.train(1);
  write_snapshot(file, a.model, *a.opt, "sgd", meta_at(3));
  const auto listing = run_tool("h5ls", "-r '" + file.string() + "'");
  if (!listing) GTEST_SKIP() << "h5ls is not installed (Debian: hdf5-tools)";
  auto has = [&](const std::string& path, const std::string& what) {
    const std::regex line("(^|\n)" + path + " +" + what + "(\n|$)");
    EXPECT_TRUE(std::regex_search(*listing, line)) << path << " " << what << " in\n" << *listing;
  };
  has("/model", "Group");
  has("/model/conv1", "Group");
  has("/model/conv1/weight", R"(Dataset \{3, 2, 3, 3\})");
  has("/model/conv1/bias", R"(Dataset \{3\})");
  has("/model/bn1/running_mean", R"(Dataset \{3\})");
  has("/model/bn1/running_var", R"(Dataset \{3\})");
  has("/model/fc1/weight", R"(Dataset \{5, 27\})");
  has("/model/fc2/bias", R"(Dataset \{4\})");
  has("/optimizer/momentum/conv1/weight", R"(Dataset \{3, 2, 3, 3\})");
  has("/optimizer/momentum/fc2/bias", R"(Dataset \{4\})");
  has("/meta/config_toml", R"(Dataset \{SCALAR\})");
  has("/meta/metrics_jsonl", R"(Dataset \{SCALAR\})");
  // Buffers carry no optimizer state; layers without tensors have no group.
  EXPECT_EQ(listing->find("/optimizer/momentum/bn1/running_mean"), std::string::npos);
  EXPECT_EQ(listing->find("/model/relu1"), std::string::npos);

  const auto epoch = run_tool("h5dump", "-a /meta/epoch '" + file.string() + "'");
  ASSERT_TRUE(epoch);
  EXPECT_NE(epoch->find("(0): 3"), std::string::npos) << *epoch;
  const auto steps = run_tool("h5dump", "-a /optimizer/steps '" + file.string() + "'");
  EXPECT_NE(steps->find("(0): 1"), std::string::npos) << *steps;
  const auto name = run_tool("h5dump", "-a /optimizer/name '" + file.string() + "'");
  EXPECT_NE(name->find("\"sgd\""), std::string::npos) << *name;
  const auto config = run_tool("h5dump", "-d /meta/config_toml '" + file.string() + "'");
  EXPECT_NE(config->find("[train]"), std::string::npos) << *config;
  // The weight as h5dump prints it: the first value, to h5dump's default precision.
  const auto weight = run_tool("h5dump", "-d /model/conv1/weight '" + file.string() + "'");
  EXPECT_NE(weight->find("DATASPACE  SIMPLE { ( 3, 2, 3, 3 ) / ( 3, 2, 3, 3 ) }"),
            std::string::npos)
      << *weight;
  EXPECT_NE(weight->find("H5T_IEEE_F32LE"), std::string::npos) << *weight;
}

TEST(Snapshot, TruncatedFileIsADataErrorNamingIt) {
  ScratchDir dir;
  const fs::path good = dir.path() / "snapshot_e0001.h5";
  TrainedRun a("adam");
  a.train(1);
  write_snapshot(good, a.model, *a.opt, "adam", meta_at(1));
  const std::string bytes = slurp(good);
  for (std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{100}, bytes.size() / 4,
                          bytes.size() / 2, bytes.size() * 3 / 4, bytes.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(bytes.size()));
    const fs::path cut_file = dir.path() / "snapshot_e0002.h5";
    spit(cut_file, bytes.substr(0, cut));
    expect_data_error(cut_file, "");
    EXPECT_THROW((void)read_meta(cut_file), DataError);
    EXPECT_THROW((void)inspect(cut_file), DataError);
  }
  expect_data_error(dir.path() / "absent.h5", "no such file");
}

TEST(Snapshot, CorruptBytesAnywhereFailTheFileChecksumBeforeHdf5ParsesThem) {
  ScratchDir dir;
  const fs::path file = dir.path() / "snapshot_e0001.h5";
  TrainedRun a("sgd");
  a.train(1);
  write_snapshot(file, a.model, *a.opt, "sgd", meta_at(1));
  const std::string good = slurp(file);
  // One flipped bit in a weight (found by its bytes: contiguous little-endian float32), and in
  // HDF5's own metadata: superblock, object headers, the end of the file. Unchecked, the latter
  // can crash HDF5 1.10.
  const float* w = a.model.named_params()[0].tensor.data();
  const auto weight_at =
      good.find(std::string(reinterpret_cast<const char*>(w), 8 * sizeof(float)));
  ASSERT_NE(weight_at, std::string::npos);
  for (std::size_t at :
       {weight_at + 5, std::size_t{512}, std::size_t{520}, std::size_t{600}, std::size_t{1000},
        std::size_t{2048}, std::size_t{3000}, good.size() / 2, good.size() - 1}) {
    SCOPED_TRACE("flipped byte " + std::to_string(at));
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    spit(file, bad);
    expect_data_error(file, "checksum mismatch: the file is corrupt");
    EXPECT_THROW((void)read_meta(file), DataError);
  }
}

// Our header covers the file; zeroed, the file is accepted unverified (the way to use a snapshot
// edited with other tools, see docs/snapshot_format.md).
void drop_header(const fs::path& file) {
  std::string bytes = slurp(file);
  std::fill(bytes.begin(), bytes.begin() + 512, '\0');
  spit(file, bytes);
}

TEST(Snapshot, HeaderShowsPositionLengthAndCrcAndCanBeDropped) {
  ScratchDir dir;
  const fs::path file = dir.path() / "snapshot_e0002_s000005.h5";
  TrainedRun a("sgd");
  write_snapshot(file, a.model, *a.opt, "sgd", meta_at(2, 5));
  std::string bytes = slurp(file);
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08lx",
                crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data() + 512), bytes.size() - 512));
  const std::string header =
      "ddp_train snapshot\nformat_version 1\nepoch 2\nstep_in_epoch 5\nsamples_seen 220\n"
      "global_step 55\nbytes " +
      std::to_string(bytes.size()) + "\ncrc32 " + crc + "\nrun_id run-42\n";
  EXPECT_EQ(bytes.substr(0, header.size() + 1), header + '\0');

  // The header is outside the checksum; a position that disagrees with /meta is caught.
  bytes[bytes.find("epoch 2")] = 'E';
  spit(file, bytes);
  expect_data_error(file, "unreadable header");
  bytes[bytes.find("Epoch 2")] = 'e';
  bytes[bytes.find("epoch 2") + 6] = '7';
  spit(file, bytes);
  expect_data_error(file,
                    "the header's training position (epoch 7, step 5) differs from /meta's "
                    "(epoch 2, step 5)");

  drop_header(file);
  const Snapshot s = read_snapshot(file);
  EXPECT_EQ(s.meta.position, meta_at(2, 5).position);
  TrainedRun b("sgd", 4);
  restore(s, b.model, *b.opt);
  EXPECT_EQ(a.model.digest(), b.model.digest());
}

// Edits a written snapshot with the HDF5 C API, dropping our header (the edit invalidates it).
template <typename Edit>
void edit(const fs::path& file, Edit fn) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  fn(f);
  H5Fclose(f);
  EXPECT_THROW((void)read_snapshot(file), DataError);  // changed length or checksum
  drop_header(file);
}

TEST(Snapshot, MissingDatasetOrOtherFormatVersionIsADataError) {
  ScratchDir dir;
  TrainedRun a("sgd");
  const fs::path file = dir.path() / "snapshot_e0001.h5";

  write_snapshot(file, a.model, *a.opt, "sgd", meta_at(1));
  edit(file, [](hid_t f) { H5Ldelete(f, "/meta/config_toml", H5P_DEFAULT); });
  expect_data_error(file, "/meta/config_toml");

  write_snapshot(file, a.model, *a.opt, "sgd", meta_at(1));
  edit(file, [](hid_t f) { H5Ldelete(f, "/optimizer/momentum/fc1/bias", H5P_DEFAULT); });
  EXPECT_NO_THROW((void)read_snapshot(file));  // consistent, but restore must notice the gap
  TrainedRun b("sgd");
  try {
    restore(read_snapshot(file), b.model, *b.opt);
    ADD_FAILURE() << "restore accepted missing optimizer state";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("momentum of fc1.bias"), std::string::npos) << e.what();
  }

  write_snapshot(file, a.model, *a.opt, "sgd", meta_at(1));
  edit(file, [](hid_t f) {
    // Through the object: H5Awrite on an H5Aopen_by_name attribute fails in HDF5 1.10.8.
    const hid_t meta = H5Oopen(f, "/meta", H5P_DEFAULT);
    const hid_t attr = H5Aopen(meta, "format_version", H5P_DEFAULT);
    const std::int64_t v = 2;
    EXPECT_GE(H5Awrite(attr, H5T_NATIVE_INT64, &v), 0);
    H5Aclose(attr);
    H5Oclose(meta);
  });
  expect_data_error(file, "format version 2, but this program reads version 1");

  spit(file, "not an hdf5 file at all\n");
  expect_data_error(file, "cannot open it as HDF5");
}

TEST(Snapshot, ArchitectureMismatchListsEveryDifferenceAndChangesNothing) {
  ScratchDir dir;
  const fs::path file = dir.path() / "snapshot_e0001.h5";
  TrainedRun a("sgd");
  a.train(1);
  write_snapshot(file, a.model, *a.opt, "sgd", meta_at(1));
  const Snapshot s = read_snapshot(file);

  auto specs = small_net();
  specs[0].out_channels = 4;  // conv1, bn1 and fc1 change shape
  specs[7].name = "head";     // fc2 is gone, head is new
  TrainedRun b("sgd", 5, specs);
  const std::uint64_t before = b.model.digest();
  try {
    restore(s, b.model, *b.opt);
    ADD_FAILURE() << "restore accepted another architecture";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    for (const char* needle :
         {"snapshot '", "snapshot_e0001.h5' does not fit this run (11 differences)",
          "conv1.weight: snapshot 3x2x3x3, model 4x2x3x3", "conv1.bias: snapshot 3, model 4",
          "bn1.running_var: snapshot 3, model 4", "fc1.weight: snapshot 5x27, model 5x36",
          "missing from the snapshot: head.weight (4x5)", "missing from the snapshot: head.bias",
          "not in the model: fc2.weight (4x5)", "not in the model: fc2.bias (4)"})
      EXPECT_NE(msg.find(needle), std::string::npos) << needle << " in\n" << msg;
    EXPECT_EQ(msg.find("fc1.bias"), std::string::npos) << msg;  // unchanged: not listed
  }
  EXPECT_EQ(b.model.digest(), before);
  EXPECT_EQ(b.opt->steps_taken(), 0);

  TrainedRun adam("adam", 5);
  try {
    restore(s, adam.model, *adam.opt);
    ADD_FAILURE() << "restore accepted sgd state into adam";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the snapshot ('sgd') holds momentum, this run's "
                                         "optimizer holds exp_avg, exp_avg_sq"),
              std::string::npos)
        << e.what();
  }
}

TEST(Snapshot, LayerNamesHdf5CannotHoldAreRefusedBeforeWriting) {
  ScratchDir dir;
  auto specs = small_net();
  specs[0].name = "block/conv";
  TrainedRun a("sgd", 1, specs);
  const fs::path file = dir.path() / "snapshot_e0001.h5";
  EXPECT_THROW(write_snapshot(file, a.model, *a.opt, "sgd", meta_at(1)), ConfigError);
  EXPECT_TRUE(fs::is_empty(dir.path()));

  specs[0].name = "block1.conv";  // dots are fine: the group is "block1.conv"
  TrainedRun b("sgd", 1, specs);
  write_snapshot(file, b.model, *b.opt, "sgd", meta_at(1));
  TrainedRun c("sgd", 2, specs);
  restore(read_snapshot(file), c.model, *c.opt);
  EXPECT_EQ(b.model.digest(), c.model.digest());
}

TEST(Snapshot, InspectShowsPositionConfigTensorsAndMetrics) {
  ScratchDir dir;
  const fs::path file = dir.path() / snapshot_name(2, 5);
  TrainedRun a("adam");
  a.train(2);
  write_snapshot(file, a.model, *a.opt, "adam", meta_at(2, 5));
  const std::string text = inspect(file);
  char digest[24];
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64, spelled out independently
  for (unsigned char c : meta_at(2).config_toml) h = (h ^ c) * 0x100000001b3ULL;
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(h));
  for (const std::string& needle :
       {file.string(), std::string("version 1, written by ddp_train 0.1.0"),
        std::string("epoch 2 completed + step 5 of epoch 3, global step 55, 220 samples seen"),
        std::string("world size    3"), std::string("digest ") + digest,
        std::string("adam, 2 steps, state: exp_avg exp_avg_sq"), std::string("tensors       10 ("),
        std::string("conv1.weight      3x2x3x3"), std::string("bn1.running_var   3"),
        std::string("fc1.weight        5x27"), std::string("metrics       2 lines"),
        std::string("{\"epoch\":2,\"train_loss\":1.5}")})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << " in\n" << text;
}

// The rank shares (train.rank_shares) travel through the file, the child that parses it and
// inspect; files without them (written before, or by hand) read as none.
TEST(Snapshot, RankSharesRoundTripAndAreOptional) {
  ScratchDir dir;
  TrainedRun a("sgd");
  a.train(1);
  SnapshotMeta m = meta_at(1);
  m.rank_shares = {96, 32, 64};
  const fs::path with = dir.path() / snapshot_name(1);
  write_snapshot(with, a.model, *a.opt, "sgd", m);
  EXPECT_EQ(read_snapshot(with).meta.rank_shares, (std::vector<std::int64_t>{96, 32, 64}));
  EXPECT_NE(inspect(with).find("rank shares   96 32 64"), std::string::npos) << inspect(with);

  const fs::path without = dir.path() / snapshot_name(2);
  write_snapshot(without, a.model, *a.opt, "sgd", meta_at(2));
  EXPECT_TRUE(read_snapshot(without).meta.rank_shares.empty());
  EXPECT_EQ(inspect(without).find("rank shares"), std::string::npos);
}

}  // namespace
}  // namespace ddp::ckpt
