// check_memory_fits: absurd sizes are refused, naming the key, before std::bad_alloc can happen.
#include "ddp/train/memory_check.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "ddp/error.hpp"
#include "ddp/nn/memory_estimate.hpp"

namespace ddp::train {
namespace {

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

double physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

// Copies of the parameters training keeps: the weights, their gradients, the accumulation buffer
// (more than one micro-batch: train.accumulate or train.max_micro_batch) and the optimizer's
// state (SGD momentum: 1, Adam/AdamW: 2).
int parameter_copies(const Setup& cfg, bool micro_batches) {
  int n = 2;
  if (micro_batches) ++n;
  if (cfg.optim.name == "adam" || cfg.optim.name == "adamw")
    n += 2;
  else if (cfg.optim.momentum > 0)
    n += 1;
  return n;
}

// The key that sets a layer's size, as "out_features = 4000000000".
std::string size_key(const nn::LayerSpec& s) {
  if (s.type == "linear") return "out_features = " + std::to_string(s.out_features);
  if (s.type == "conv2d") return "out_channels = " + std::to_string(s.out_channels);
  return "its input";
}

std::string share(double part, double whole) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

}  // namespace

void check_memory_fits(const Setup& cfg, const Shape& input, std::int64_t rank_batch,
                       std::int64_t micro_batch, backend::Backend& be) {
  const auto est = nn::estimate_memory(cfg.model.layers, input, be);
  const double f = sizeof(float);
  const int copies = parameter_copies(cfg, cfg.train.accumulate > 1 || micro_batch < rank_batch);
  const double params = f * (copies * est.params() + est.buffers());
  const double acts = f * est.activations_per_sample() * static_cast<double>(micro_batch);
  // The step's images, as the loader hands them over (and prepares the next batch meanwhile).
  const double batch =
      f * 2.0 * static_cast<double>(input.numel()) * static_cast<double>(rank_batch);
  const double total = params + acts + batch;
  const double ram = physical_memory();
  // Only what clearly cannot fit: the estimate leaves out the dataset, the libraries and the
  // backends' scratch space, so a run near the limit is left to try. On GPUs the parameters and
  // activations live in device memory, usually smaller than the host's: an absurd size is still
  // far above this limit, which is what this check is for.
  if (ram <= 0 || total <= ram) return;

  // Name what drives the estimate: the part (parameters, or activations and images) that is the
  // larger or alone exceeds the memory, and the key that sets it.
  std::vector<std::string> why;
  if (params >= acts + batch || params > ram) {
    std::size_t big = 0;
    for (std::size_t i = 1; i < est.layers.size(); ++i)
      if (est.layers[i].params > est.layers[big].params) big = i;
    const auto& spec = cfg.model.layers[big];
    why.push_back(
        "parameters " + bytes_text(params) + " (" + std::to_string(copies) +
        " copies: weights, gradients" + (copies > 2 ? ", optimizer state" : "") + "), " +
        share(est.layers[big].params, est.params()) + " of them in " + nn::layer_label(big, spec) +
        (spec.line > 0 ? " (" + spec.file + ":" + std::to_string(spec.line) + ")" : std::string()) +
        " with " + size_key(spec));
  }
  if (acts + batch > params || acts + batch > ram) {
    std::size_t big = 0;
    for (std::size_t i = 1; i < est.layers.size(); ++i)
      if (est.layers[i].activations > est.layers[big].activations) big = i;
    const std::string batch_key =
        cfg.train.global_batch > 0
            ? "train.global_batch = " + std::to_string(cfg.train.global_batch) + " (" +
                  std::to_string(rank_batch) + " samples per rank)"
            : "train.batch_size = " + std::to_string(cfg.train.batch_size);
    why.push_back("activations and images " + bytes_text(acts + batch) + " for " + batch_key +
                  " (" + bytes_text(f * est.activations_per_sample()) +
                  " per sample, the most for " + nn::layer_label(big, cfg.model.layers[big]) +
                  (cfg.train.accumulate > 1
                       ? "; micro-batches of " + std::to_string(micro_batch) +
                             " with train.accumulate = " + std::to_string(cfg.train.accumulate)
                       : std::string()) +
                  ")");
  }
  std::string text;
  for (const auto& w : why) text += (text.empty() ? "" : "; ") + w;
  throw ConfigError("the model and batch need about " + bytes_text(total) +
                    " of memory per rank, more than this machine's " + bytes_text(ram) + ": " +
                    text);
}

}  // namespace ddp::train
