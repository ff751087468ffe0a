#include "ddp/train/run_banner.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <span>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/train/metrics.hpp"

namespace ddp::train {
namespace {

// A field of /proc/self/status in KiB (0 where unavailable).
std::int64_t proc_status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
  return 0;
}

std::string join(const std::vector<std::int64_t>& v, const char* sep) {
  std::string out;
  for (const auto x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
  return out;
}

// "241 KiB", "13 MiB", "1.2 GiB"
std::string bytes_text(double bytes) {
  char buf[32];
  if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  else if (bytes >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / (1024.0 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.0f KiB", bytes / 1024.0);
  return buf;
}

// "SIGINT", or "a stop signal on another rank" for 0.
std::string stop_cause(int signal) {
  switch (signal) {
    case 0:
      return "a stop signal on another rank";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    default:
      return std::string("signal ") + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
}

}  // namespace

std::string memory_line(comm::Communicator& comm) {
  const auto w = static_cast<std::size_t>(comm.size());
  std::vector<std::int64_t> mem(2 * w, 0);
  mem[2 * static_cast<std::size_t>(comm.rank())] = proc_status_kib("RssAnon");
  mem[2 * static_cast<std::size_t>(comm.rank()) + 1] = proc_status_kib("RssShmem");
  if (w > 1) comm.allreduce_sum(std::span<std::int64_t>(mem));
  std::string out = "memory (MiB resident, private/shared):";
  for (std::size_t r = 0; r < w; ++r)
    out += " rank " + std::to_string(r) + " " + std::to_string(mem[2 * r] / 1024) + "/" +
           std::to_string(mem[2 * r + 1] / 1024) + (r + 1 < w ? "," : "\n");
  return out;
}

std::string model_line(const nn::Model& model, double activations_per_sample,
                       std::int64_t micro_batch, const std::string& table_file) {
  const double params = static_cast<double>(model.num_parameters());
  return "model: " + std::to_string(model.num_layers()) + " layers, " + with_thousands(params) +
         " parameters (" + bytes_text(params * sizeof(float)) + "), activations " +
         bytes_text(activations_per_sample * sizeof(float) * static_cast<double>(micro_batch)) +
         " for a micro-batch of " + std::to_string(micro_batch) + "; layer table in " + table_file +
         "\n";
}

std::string data_line(std::int64_t train_samples, std::int64_t test_samples, const Shape& input,
                      std::int64_t classes, std::int64_t steps_per_epoch, const BatchPlan& plan,
                      const std::vector<std::int64_t>& slices) {
  std::string out = "data: " + std::to_string(train_samples) + " training / " +
                    std::to_string(test_samples) + " test samples of " + std::to_string(input[0]) +
                    "x" + std::to_string(input[1]) + "x" + std::to_string(input[2]) + ", " +
                    std::to_string(classes) + " classes; " + std::to_string(steps_per_epoch) +
                    " steps per epoch, global batch " + std::to_string(plan.global_batch()) + " (";
  if (std::adjacent_find(slices.begin(), slices.end(), std::not_equal_to<>()) == slices.end())
    out += std::to_string(slices.size()) + " rank(s) x " + std::to_string(slices.front());
  else
    out += "rank shares " + join(slices, " + ");
  if (plan.accumulate() > 1) out += " in " + std::to_string(plan.accumulate()) + " micro-batches";
  const auto& caps = plan.caps();
  if (std::any_of(caps.begin(), caps.end(), [](std::int64_t c) { return c > 0; }))
    out += "; micro-batches of at most " + join(caps, ", ") + " sample(s)";
  return out + ")\n";
}

std::string shares_line(const BatchPlan& plan) {
  return "rank shares: " + join(plan.shares(), " + ") + " samples of each global batch of " +
         std::to_string(plan.global_batch()) + "\n";
}

std::string final_line(const EpochMetrics& last, std::uint64_t digest) {
  char buf[160];
  std::snprintf(
      buf, sizeof buf,
      "final test accuracy: %.2f%% (%lld samples), test loss %.4f, weights digest %016llx\n",
      100.0 * last.test_acc, static_cast<long long>(last.test_samples), last.test_loss,
      static_cast<unsigned long long>(digest));
  return buf;
}

std::string stop_line(int signal, std::int64_t epoch, std::int64_t step_in_epoch) {
  const std::string head = "stop requested (" + stop_cause(signal) + ")";
  if (step_in_epoch > 0)
    return head + ": after " + std::to_string(epoch) + " epoch(s) and " +
           std::to_string(step_in_epoch) + " step(s) of epoch " + std::to_string(epoch + 1) +
           ", saving " + ckpt::snapshot_name(epoch, step_in_epoch) + "\n";
  return head + " with the epoch's last step: saved after " + std::to_string(epoch) +
         " epoch(s), " + ckpt::snapshot_name(epoch) + "\n";
}

}  // namespace ddp::train
