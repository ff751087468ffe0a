#include "ddp/train/metrics.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/train/run_record.hpp"

namespace ddp::train {

std::string with_thousands(double value) {
  auto v = static_cast<long long>(std::llround(value));
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string format_epoch_line(const EpochMetrics& m) {
  char buf[256];
  std::string acc = m.evaluated ? "" : " (not evaluated)";
  if (m.evaluated) {
    std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * m.test_acc);
    acc = buf;
  }
  std::snprintf(buf, sizeof buf,
                "epoch %lld/%lld | steps %lld | loss %.3f | test acc %s | %s img/s | %.1f s",
                static_cast<long long>(m.epoch), static_cast<long long>(m.epochs),
                static_cast<long long>(m.steps), m.train_loss, acc.c_str(),
                with_thousands(m.images_per_s).c_str(), m.epoch_s);
  return buf;
}

namespace {

// JSON numbers: enough digits to round-trip a double; non-finite values become null.
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A JSON string literal (host names are plain, but a stray quote must not break the line).
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

std::string ranks_json(const std::vector<RankSpeed>& ranks) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankSpeed& r = ranks[i];
    out << (i ? ", " : "") << "{\"rank\": " << r.rank << ", \"host\": " << quoted(r.host)
        << ", \"threads\": " << r.threads << ", \"cpus\": " << quoted(r.cpus)
        << ", \"share\": " << r.share << ", \"samples\": " << r.samples
        << ", \"compute_s\": " << num(r.compute_s) << ", \"wait_s\": " << num(r.wait_s)
        << ", \"images_per_s\": " << num(r.images_per_s())
        << ", \"compute_ms_per_sample\": " << num(1e3 * r.compute_per_sample_s()) << "}";
  }
  out << "]";
  return out.str();
}

}  // namespace

MetricsLog::MetricsLog(const std::filesystem::path& dir, const std::string& history)
    : metrics_(dir / "metrics.jsonl", history),
      config_(KeptFile::adopt(dir / kResolvedConfigFile)) {}

std::string to_json(const EpochMetrics& m) {
  std::ostringstream out;
  out << "{\"epoch\": " << m.epoch << ", \"segment\": " << m.segment << ", \"steps\": " << m.steps
      << ", \"train_loss\": " << num(m.train_loss) << ", \"train_acc\": " << num(m.train_acc);
  if (m.evaluated)
    out << ", \"test_loss\": " << num(m.test_loss) << ", \"test_acc\": " << num(m.test_acc)
        << ", \"test_samples\": " << m.test_samples;
  if (m.evaluated && !m.confusion.empty()) out << m.confusion.json_fields(m.class_names);
  out << ", \"lr\": " << num(m.lr) << ", \"images_per_s\": " << num(m.images_per_s)
      << ", \"epoch_s\": " << num(m.epoch_s) << ", \"eval_s\": " << num(m.eval_s)
      << ", \"comm_wait_s\": " << num(m.comm_wait_s);
  if (!m.ranks.empty()) out << ", \"ranks\": " << ranks_json(m.ranks);
  out << "}";
  return out.str();
}

void MetricsLog::write_epoch(const EpochMetrics& m) {
  append(to_json(m) + "\n");
}

void MetricsLog::append(const std::string& text) {
  config_.restore_if_gone();
  metrics_.append(text);
}

void MetricsLog::write_summary(const EpochMetrics& last, double total_s, std::int64_t world_size,
                               std::uint64_t weights_digest, std::int64_t segments) {
  char digest[32];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(weights_digest));
  std::ostringstream out;
  out << "{\"summary\": true, \"epochs\": " << last.epoch
      << ", \"final_train_loss\": " << num(last.train_loss)
      << ", \"final_test_loss\": " << num(last.test_loss)
      << ", \"final_test_acc\": " << num(last.test_acc) << ", \"total_s\": " << num(total_s)
      << ", \"segments\": " << segments << ", \"world_size\": " << world_size
      << ", \"weights_digest\": \"" << digest << "\"}\n";
  append(out.str());
}

ProgressBar::ProgressBar(bool enabled, std::int64_t epoch, std::int64_t epochs, std::int64_t steps)
    : enabled_(enabled), epoch_(epoch), epochs_(epochs), steps_(steps) {}

void ProgressBar::update(std::int64_t step, double loss, double images_per_s) {
  if (!enabled_) return;
  constexpr int kWidth = 30;
  const int filled = steps_ > 0 ? static_cast<int>(kWidth * step / steps_) : kWidth;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stdout, "\repoch %lld/%lld [%s] %lld/%lld | loss %.3f | %s img/s ",
               static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(),
               static_cast<long long>(step), static_cast<long long>(steps_), loss,
               with_thousands(images_per_s).c_str());
  std::fflush(stdout);
}

void ProgressBar::clear() {
  if (!enabled_) return;
  std::fprintf(stdout, "\r\033[K");
  std::fflush(stdout);
}

}  // namespace ddp::train
