#include "ddp/train/progress_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "ddp/train/metrics.hpp"

namespace ddp::train {
namespace {
constexpr double kMaxSilenceS = 30.0;
}

std::string timestamp_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string duration_text(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  char buf[48];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%llds", s);
  return buf;
}

ProgressLog::ProgressLog(std::ostream& out, bool print, std::int64_t every,
                         std::int64_t total_steps, std::int64_t first_step,
                         std::int64_t first_samples)
    : out_(out),
      print_(print),
      every_(every),
      total_(total_steps),
      first_step_(first_step),
      t0_(Clock::now()),
      last_t_(t0_),
      last_global_samples_(first_samples) {}

bool ProgressLog::due(std::int64_t global_step) const {
  if (every_ <= 0) return false;
  return on_step_grid(global_step) ||
         (print_ && std::chrono::duration<double>(Clock::now() - last_t_).count() >= kMaxSilenceS);
}

void ProgressLog::new_epoch() {
  last_loss_sum_ = 0.0;
  last_samples_ = 0;
}

ProgressInterval ProgressLog::line(std::int64_t global_step, std::int64_t epoch,
                                   std::int64_t epochs, double lr, double loss_sum,
                                   std::int64_t samples, std::int64_t global_samples) {
  const auto now = Clock::now();
  const double interval_s = std::chrono::duration<double>(now - last_t_).count();
  const double elapsed_s = std::chrono::duration<double>(now - t0_).count();
  const std::int64_t n = samples - last_samples_;
  const double loss = n > 0 ? (loss_sum - last_loss_sum_) / static_cast<double>(n) : 0.0;
  const double ips = interval_s > 0
                         ? static_cast<double>(global_samples - last_global_samples_) / interval_s
                         : 0.0;
  const std::int64_t done = global_step - first_step_;
  const double eta_s =
      done > 0 ? elapsed_s / static_cast<double>(done) * static_cast<double>(total_ - global_step)
               : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "[%s] step %lld/%lld (epoch %lld of %lld) | train loss %.4f | lr %.4g | %s img/s | "
                "ETA %s\n",
                timestamp_now().c_str(), static_cast<long long>(global_step),
                static_cast<long long>(total_), static_cast<long long>(epoch),
                static_cast<long long>(epochs), loss, lr, with_thousands(ips).c_str(),
                duration_text(eta_s).c_str());
  if (print_) {
    out_ << buf;
    out_.flush();
  }
  last_t_ = now;
  last_loss_sum_ = loss_sum;
  last_samples_ = samples;
  last_global_samples_ = global_samples;
  return {loss, ips};
}

}  // namespace ddp::train
