#include "ddp/app/predict_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/data/image_decode.hpp"
#include "ddp/data/image_resize.hpp"
#include "ddp/data/normalization.hpp"
#include "ddp/error.hpp"
#include "ddp/io/csv_field.hpp"
#include "ddp/train/trained_model.hpp"

namespace ddp::app {
namespace {

namespace fs = std::filesystem;

bool image_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// The files named, and each directory's JPEG/PNG files (by extension, sorted; not recursive).
std::vector<fs::path> image_files(const std::vector<std::string>& inputs) {
  std::vector<fs::path> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::directory_iterator(in, ec))
        if (e.is_regular_file() && image_extension(e.path())) found.push_back(e.path());
      if (ec) throw DataError("predict: cannot list directory '" + in + "': " + ec.message());
      if (found.empty())
        throw DataError("predict: directory '" + in + "' holds no .jpg, .jpeg or .png file");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(in, ec)) {
      files.emplace_back(in);
    } else {
      throw DataError("predict: '" + in + "' is neither an image file nor a directory");
    }
  }
  return files;
}

std::vector<std::uint8_t> read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError("predict: cannot read '" + file.string() + "'");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

CLI::App* add_predict_command(CLI::App& app, PredictCommand& cmd) {
  auto* p = app.add_subcommand(
      "predict",
      "classify JPEG/PNG images with a snapshot (one process, CPU): top-k classes with "
      "probabilities (runs with the configuration stored in the snapshot)");
  p->add_option("--snapshot", cmd.snapshot, "snapshot file (.h5)")
      ->required()
      ->check(CLI::ExistingFile);
  p->add_option("images", cmd.inputs, "image files (JPEG, PNG) or directories of them")->required();
  p->add_option("--top-k", cmd.top_k, "classes shown per image")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  p->add_option("--output", cmd.output,
                "also write the predictions to this CSV file (file, rank, class_index, class, "
                "probability)");
  return p;
}

int run_predict(const PredictCommand& cmd, const Config& cfg, int world_size, std::ostream& out) {
  if (world_size > 1)
    throw ConfigError("ddp_train predict runs as one process; start it without mpirun/srun");
  const auto snap = ckpt::read_snapshot(cmd.snapshot);
  train::TrainedModel tm(cfg, snap);
  const Shape input = tm.model().input_shape();
  const std::int64_t c = input[0], h = input[1], w = input[2];
  const auto& names = tm.class_names();
  const auto classes = static_cast<std::int64_t>(names.size());

  // With data.train_size the images take the evaluation transform (resize of the shorter side +
  // centre crop), as the test set does; otherwise they are what a pack to the model's size holds:
  // decoded, then resized to the model's input.
  const auto files = image_files(cmd.inputs);
  const auto n = static_cast<std::int64_t>(files.size());
  const bool sized = data::transform_output_side(cfg.data) > 0;
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint64_t> offsets{0};
  for (const auto& f : files) {
    auto bytes = read_bytes(f);
    auto img = data::decode_image(bytes, f.string(), static_cast<int>(c));  // checks every file
    if (sized) {
      pixels.insert(pixels.end(), bytes.begin(), bytes.end());
      offsets.push_back(pixels.size());
      continue;
    }
    if (img.height != h || img.width != w) img = data::resize_bilinear(img, h, w);
    pixels.insert(pixels.end(), img.pixels.begin(), img.pixels.end());
  }
  std::vector<data::Label> no_labels(files.size(), 0);
  const data::SampleSet images =
      sized ? data::SampleSet::encoded("predict inputs", c, static_cast<int>(classes),
                                       std::move(pixels), std::move(offsets), std::move(no_labels))
            : data::SampleSet("predict inputs", c, h, w, static_cast<int>(classes),
                              std::move(pixels), std::move(no_labels));
  // data.normalize = dataset needs the training set's statistics (as training computed them).
  const auto norm = data::training_normalization(cfg.data, c, cfg.train.seed);

  const std::int64_t k = std::min(cmd.top_k, classes);
  std::string csv = "file,rank,class_index,class,probability\n";
  constexpr std::int64_t kBatch = 64;
  std::vector<float> batch;
  std::vector<std::int32_t> labels;
  for (std::int64_t first = 0; first < n; first += kBatch) {
    const std::int64_t m = std::min(kBatch, n - first);
    std::vector<std::int64_t> idx(static_cast<std::size_t>(m));
    std::iota(idx.begin(), idx.end(), first);
    batch.resize(static_cast<std::size_t>(m * c * h * w));
    labels.resize(static_cast<std::size_t>(m));
    data::fill_batch(images, idx, norm, data::eval_augmentation(cfg.data), cfg.train.seed, 0,
                     batch.data(), labels.data());
    const auto logits = tm.logits(batch.data(), m);
    for (std::int64_t i = 0; i < m; ++i) {
      // Softmax in double, shifted by the largest logit.
      const float* row = logits.data() + i * classes;
      const double top = *std::max_element(row, row + classes);
      std::vector<double> p(static_cast<std::size_t>(classes));
      double sum = 0.0;
      for (std::int64_t j = 0; j < classes; ++j)
        sum += p[static_cast<std::size_t>(j)] = std::exp(static_cast<double>(row[j]) - top);
      // Ties keep the lower class first, as the evaluation's argmax does.
      std::vector<std::int64_t> order(static_cast<std::size_t>(classes));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::int64_t a, std::int64_t b) { return row[a] > row[b]; });
      const std::string file = files[static_cast<std::size_t>(first + i)].string();
      out << file << "\n";
      for (std::int64_t r = 0; r < k; ++r) {
        const auto cls = order[static_cast<std::size_t>(r)];
        const double prob = p[static_cast<std::size_t>(cls)] / sum;
        char line[64];
        std::snprintf(line, sizeof line, "  %2lld. %6.2f%%  ", static_cast<long long>(r + 1),
                      100.0 * prob);
        const auto& name = names[static_cast<std::size_t>(cls)];
        out << line << name << "\n";
        std::snprintf(line, sizeof line, ",%.6g", prob);
        csv += io::csv_field(file) + "," + std::to_string(r + 1) + "," + std::to_string(cls) + "," +
               io::csv_field(name) + line + "\n";
      }
    }
  }
  if (!cmd.output.empty()) {
    ckpt::write_file_atomically(cmd.output, csv);
    out << "predictions: " << cmd.output << "\n";
  }
  return 0;
}

}  // namespace ddp::app
