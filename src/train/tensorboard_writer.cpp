#include "ddp/train/tensorboard_writer.hpp"

#include <isa-l/crc.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "ddp/error.hpp"
#include "tensorboard_event.pb.h"

namespace ddp::train {
namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void put_le(char* out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  // ISA-L's crc32_iscsi is CRC-32C without the final inversion; the initial value is ~0.
  const std::uint32_t crc = ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)),
                                         static_cast<int>(size), 0xffffffffu);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir, std::int64_t first_step) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw SystemError("run.tensorboard: cannot create " + dir.string() + ": " + ec.message());
  // A second segment started within the same second gets a suffix; TensorBoard reads the files
  // of a directory in name order.
  const auto now = static_cast<long long>(wall_time());
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", now);
  const std::string base = std::string("events.out.tfevents.") + stamp + "." + host;
  path_ = dir / base;
  for (int n = 1; std::filesystem::exists(path_); ++n)
    path_ = dir / (base + "." + std::to_string(n));
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    throw SystemError("run.tensorboard: cannot create " + path_.string() + ": " +
                      std::strerror(errno));
  tensorboard::Event e;
  e.set_wall_time(wall_time());
  e.set_file_version("brain.Event:2");
  record(e.SerializeAsString());
  // Written by every segment (a fresh run's drops nothing): whatever an earlier file holds from
  // this step on was lost with its segment and is trained again here.
  tensorboard::Event start;
  start.set_wall_time(wall_time());
  start.set_step(first_step + 1);
  start.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  record(start.SerializeAsString());
  std::fflush(file_);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::record(const std::string& data) {
  char head[12];
  put_le(head, data.size(), 8);
  put_le(head + 8, masked_crc32c(head, 8), 4);
  char tail[4];
  put_le(tail, masked_crc32c(data.data(), data.size()), 4);
  if (std::fwrite(head, 1, sizeof head, file_) != sizeof head ||
      std::fwrite(data.data(), 1, data.size(), file_) != data.size() ||
      std::fwrite(tail, 1, sizeof tail, file_) != sizeof tail)
    throw SystemError("writing " + path_.string() + " failed (disk full?)");
}

void TensorBoardWriter::scalars(std::int64_t step,
                                const std::vector<std::pair<std::string, double>>& values) {
  tensorboard::Event e;
  e.set_wall_time(wall_time());
  e.set_step(step);
  for (const auto& [tag, v] : values) {
    auto* value = e.mutable_summary()->add_value();
    value->set_tag(tag);
    value->set_simple_value(static_cast<float>(v));
  }
  record(e.SerializeAsString());
  // A killed run keeps what it wrote (the scalars come once per log interval or epoch).
  if (std::fflush(file_) != 0) throw SystemError("writing " + path_.string() + " failed");
}

void TensorBoardWriter::epoch(std::int64_t global_step, const EpochMetrics& m) {
  std::vector<std::pair<std::string, double>> v = {
      {"epoch/epoch", static_cast<double>(m.epoch)},
      {"epoch/steps", static_cast<double>(m.steps)},
      {"epoch/train_loss", m.train_loss},
      {"epoch/train_acc", m.train_acc},
  };
  if (m.evaluated) {
    v.emplace_back("epoch/test_loss", m.test_loss);
    v.emplace_back("epoch/test_acc", m.test_acc);
  }
  v.emplace_back("epoch/lr", m.lr);
  v.emplace_back("epoch/images_per_s", m.images_per_s);
  v.emplace_back("epoch/epoch_s", m.epoch_s);
  v.emplace_back("epoch/eval_s", m.eval_s);
  v.emplace_back("epoch/comm_wait_s", m.comm_wait_s);
  // metrics.jsonl's per_class accuracies, tagged with the class names (TensorBoard groups them).
  if (m.evaluated)
    for (std::int64_t c = 0; c < m.confusion.classes(); ++c) {
      const auto i = static_cast<std::size_t>(c);
      v.emplace_back(
          "class_acc/" + (i < m.class_names.size() ? m.class_names[i] : std::to_string(c)),
          m.confusion.accuracy(c));
    }
  for (const RankSpeed& r : m.ranks) {
    const std::string n = std::to_string(r.rank);
    v.emplace_back("rank_images_per_s/rank_" + n, r.images_per_s());
    v.emplace_back("rank_compute_ms_per_sample/rank_" + n, 1e3 * r.compute_per_sample_s());
    v.emplace_back("rank_wait_s/rank_" + n, r.wait_s);
  }
  scalars(global_step, v);
}

}  // namespace ddp::train
