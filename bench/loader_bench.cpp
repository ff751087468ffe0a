// ddp_loader_bench: images/s of ddp_train's training input pipeline alone, on an `encoded` packed
// file whose images vary in size (what the trainer keeps encoded and decodes per batch): the
// trainer's BatchLoader on its one background thread, filling batches of JPEG/PNG decode,
// RandomResizedCrop(size) (+ TurboJPEG scaled decoding when data.scaled_decode), flip and
// normalisation, as data.train_size trains; nothing consumes the batches. bench/loader_compare.sh
// runs it beside torchvision's DataLoader on the same files.
//
//   ddp_loader_bench --train FILE.h5 [--size 224] [--batch 64] [--epochs 2] [--scaled-decode 1]
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ddp/data/loader.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/sampler.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ddp_loader_bench: images/s of the training input pipeline (decode + augment)"};
  std::string file;
  std::int64_t size = 224, batch = 64, epochs = 2, seed = 1;
  bool scaled = true;
  app.add_option("--train", file, "an encoded packed file (ddp_train pack --encoding encoded)")
      ->required();
  app.add_option("--size", size, "data.train_size: the RandomResizedCrop output side");
  app.add_option("--batch", batch, "samples per batch");
  app.add_option("--epochs", epochs, "timed epochs (after one untimed batch)");
  app.add_option("--scaled-decode", scaled, "data.scaled_decode (1: TurboJPEG scaled decoding)");
  app.add_option("--seed", seed, "train.seed: the order and the augmentation draws");
  CLI11_PARSE(app, argc, argv);
  try {
    ddp::data::Options opt;
    opt.dataset = "packed";
    opt.train_file = file;
    opt.test_file = file;
    opt.train_size = size;
    opt.augment = true;
    opt.scaled_decode = scaled;
    opt.normalize = "config";
    opt.mean = {0.485, 0.456, 0.406};
    opt.std = {0.229, 0.224, 0.225};
    const ddp::data::SampleSet ds = ddp::data::read_dataset(opt, ddp::data::Split::train);
    if (!ds.is_encoded())
      throw ddp::ConfigError("'" + file +
                             "' is decoded when read (raw, or encoded with one image size): the "
                             "loader would not decode; pack images of varying sizes, encoded");
    const ddp::data::Normalization norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    const ddp::data::InMemoryDataset held(ds);
    ddp::data::BatchLoader loader(held, norm, ddp::data::train_augmentation(opt),
                                  static_cast<std::uint64_t>(seed), batch, /*prefetch=*/true);
    using Clock = std::chrono::steady_clock;
    // CPU seconds of the whole process (the loader thread does the work; the main thread waits):
    // on a shared machine, images per CPU second is steadier than images per wall second.
    const auto cpu_now = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
             1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    };
    double cpu = 0;
    std::int64_t images = 0;
    double seconds = 0;
    // Epoch 0 is the warm-up (first touch of the buffers, TurboJPEG handles); epochs 1..N timed.
    for (std::int64_t e = 0; e <= epochs; ++e) {
      const auto order = ddp::data::epoch_order(ds.size(), static_cast<std::uint64_t>(seed),
                                                static_cast<std::uint64_t>(e), true);
      std::vector<ddp::data::RankBatch> batches;
      for (std::int64_t b = 0; b < ds.size(); b += batch) {
        ddp::data::RankBatch rb;
        rb.indices.assign(order.begin() + b, order.begin() + std::min(b + batch, ds.size()));
        rb.global_size = static_cast<std::int64_t>(rb.indices.size());
        rb.global_offset = b;
        batches.push_back(std::move(rb));
      }
      const auto t0 = Clock::now();
      const double c0 = cpu_now();
      loader.start(std::move(batches), static_cast<std::uint64_t>(e));
      std::int64_t n = 0;
      double check = 0;  // read one value per batch, so that the batches are really there
      while (auto bt = loader.next()) {
        n += bt->size;
        check += bt->images[0];
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      const double c = cpu_now() - c0;
      if (e > 0) {
        images += n;
        seconds += s;
        cpu += c;
      }
      if (check != check) throw ddp::DataError("a batch holds NaN");
    }
    std::printf(
        "ddp_loader_bench: %lld images (%lld epochs of %lld), %lldx%lld, batch %lld, "
        "scaled_decode %d, 1 loader thread: %.3f s, %.1f images/s, %.1f images per CPU s\n",
        static_cast<long long>(images), static_cast<long long>(epochs),
        static_cast<long long>(ds.size()), static_cast<long long>(size),
        static_cast<long long>(size), static_cast<long long>(batch), scaled ? 1 : 0, seconds,
        static_cast<double>(images) / seconds, static_cast<double>(images) / cpu);
    std::printf("csv,ddp,%d,%.3f,%.3f\n", scaled ? 1 : 0, static_cast<double>(images) / seconds,
                static_cast<double>(images) / cpu);
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "ddp_loader_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
