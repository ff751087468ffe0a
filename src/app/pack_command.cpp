#include "ddp/app/pack_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "ddp/data/registry.hpp"
#include "ddp/error.hpp"
#include "ddp/runtime/signals.hpp"

namespace ddp::app {
namespace {

// "HxW" -> height, width.
void parse_size(const std::string& text, std::int64_t& h, std::int64_t& w) {
  const auto x = text.find_first_of("xX");
  try {
    std::size_t used_h = 0, used_w = 0;
    if (x != std::string::npos) {
      h = std::stoll(text.substr(0, x), &used_h);
      w = std::stoll(text.substr(x + 1), &used_w);
      if (used_h == x && used_w == text.size() - x - 1 && h > 0 && w > 0 && h <= 65535 &&
          w <= 65535)
        return;
    }
  } catch (const std::exception&) {
  }
  throw ConfigError("pack --size '" + text + "': expected HEIGHTxWIDTH, e.g. 64x64");
}

std::string mib(std::uint64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return s.str();
}

// A one-line bar on stderr, redrawn at most ten times a second.
class ProgressBar {
 public:
  void update(std::int64_t done, std::int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 40;
    const int filled = static_cast<int>(kWidth * done / std::max<std::int64_t>(total, 1));
    std::fprintf(stderr, "\rpacking [%s%s] %3d%% %lld/%lld", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(),
                 static_cast<int>(100 * done / std::max<std::int64_t>(total, 1)),
                 static_cast<long long>(done), static_cast<long long>(total));
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::chrono::steady_clock::time_point last_{};
};

// The importers and every built-in dataset of the registry.
std::vector<std::string> pack_formats() {
  std::vector<std::string> out = {"imagefolder", "csv", "npy"};
  for (const std::string_view name : data::builtin_dataset_names()) out.emplace_back(name);
  return out;
}

}  // namespace

CLI::App* add_pack_command(CLI::App& app, PackCommand& cmd) {
  auto* pack = app.add_subcommand(
      "pack",
      "pack images (a folder per class, a CSV list, NumPy arrays, or a built-in dataset) into one "
      "HDF5 file for data.dataset = \"packed\" (docs/dataset_format.md)");
  auto& o = cmd.options;
  pack->add_option("--format", o.format, "what --input is")
      ->required()
      ->check(CLI::IsMember(pack_formats()));
  pack->add_option("--input", o.input,
                   "imagefolder: DIR/<class>/<image>; csv: a file of path,label rows; npy: "
                   "IMAGES.npy,LABELS.npy; cifar10/cifar100/mnist/fashion_mnist: the data root")
      ->required();
  pack->add_option("--output", cmd.output, "the packed file to write (e.g. train.h5)")->required();
  pack->add_option("--encoding", cmd.encoding,
                   "raw = decoded uint8 pixels (one size); encoded = each file's JPEG/PNG bytes")
      ->check(CLI::IsMember({"raw", "encoded"}))
      ->capture_default_str();
  pack->add_option("--size", cmd.size,
                   "HxW: resize every image to it (raw; Pillow's bilinear filter)");
  pack->add_option("--split", cmd.split, "built-in datasets: which split")
      ->check(CLI::IsMember({"train", "test"}))
      ->capture_default_str();
  pack->add_option("--channels", o.channels,
                   "1 (grey) or 3 (RGB); default: those of the first image")
      ->check(CLI::IsMember({1, 3}));
  pack->add_option("--threads", o.threads, "decoding threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  pack->add_flag("--skip-bad", o.skip_bad,
                 "skip unreadable, corrupt or mismatched images and list them, instead of failing");
  pack->add_option("--val-fraction", o.val_fraction,
                   "also write a validation split: this fraction of each class (e.g. 0.1), chosen "
                   "by --seed, goes to --val-output instead of --output")
      ->check(CLI::Range(0.0, 0.99));
  pack->add_option("--val-output", cmd.val_output,
                   "the validation file of --val-fraction (default: OUTPUT with .val before its "
                   "extension, e.g. train.val.h5)");
  pack->add_option("--seed", o.seed, "which samples --val-fraction takes")->capture_default_str();
  return pack;
}

namespace {

// OUTPUT with ".val" before its extension: train.h5 -> train.val.h5.
std::string default_val_output(const std::string& output) {
  std::filesystem::path p(output);
  const std::string ext = p.extension().string();
  p.replace_extension();
  p += ".val" + ext;
  return p.string();
}

int pack_and_report(PackCommand& cmd, std::ostream& out) {
  auto& o = cmd.options;
  o.output = cmd.output;
  o.encoding =
      cmd.encoding == "encoded" ? data::packed::Encoding::encoded : data::packed::Encoding::raw;
  o.split = cmd.split == "test" ? data::Split::test : data::Split::train;
  if (!cmd.size.empty()) parse_size(cmd.size, o.height, o.width);
  if (!cmd.val_output.empty() && o.val_fraction <= 0)
    throw ConfigError("pack --val-output " + cmd.val_output +
                      " is written only with --val-fraction");
  if (o.val_fraction > 0)
    o.val_output = cmd.val_output.empty() ? default_val_output(cmd.output) : cmd.val_output;
  ProgressBar bar;
  if (::isatty(STDERR_FILENO) || ::isatty(STDOUT_FILENO))
    o.progress = [&](std::int64_t done, std::int64_t total) { bar.update(done, total); };
  o.cancelled = [] { return runtime::stop_requested(); };
  const data::PackSummary s = data::pack(o);
  out << "packed " << s.samples << " samples in " << s.classes << " classes ("
      << (s.height > 0 ? std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
                             std::to_string(s.width)
                       : std::to_string(s.channels) + " channel(s), mixed sizes")
      << ", " << cmd.encoding << ") into " << cmd.output << ": " << mib(s.file_bytes) << " ("
      << mib(s.payload_bytes) << " of image data) in " << std::fixed << std::setprecision(1)
      << s.seconds << " s";
  if (!s.skipped.empty()) out << "; skipped " << s.skipped.size();
  if (s.converted > 0) out << "; converted " << s.converted << " grey image(s) to RGB";
  out << "\n";
  if (o.val_fraction > 0)
    out << "validation split: " << s.val_samples << " samples (" << o.val_fraction
        << " of each class, --seed " << o.seed << ") into " << o.val_output.string() << ": "
        << mib(s.val_file_bytes) << "; the rest (" << s.samples << ") into " << cmd.output << "\n";
  for (const auto& why : s.skipped) out << "  skipped: " << why << "\n";
  for (const auto& note : s.notes) out << "  note: " << note << "\n";
  for (const auto& gone : s.removed_temporaries)
    out << "  removed the temporary file of an interrupted pack: " << gone << "\n";
  return 0;
}

}  // namespace

int report_pack_error(const std::string& message) {
  std::cout.flush();
  std::fprintf(stderr, "ddp_train pack: error: %s\n", message.c_str());
  std::fflush(stderr);
  return 1;
}

int run_pack(PackCommand& cmd, int world_size, std::ostream& out) {
  if (world_size > 1)
    throw ConfigError(
        "ddp_train pack runs as one process; start it without mpirun/srun (it uses "
        "--threads threads)");
  const auto report = [](const std::string& message) { return report_pack_error(message); };
  try {
    return pack_and_report(cmd, out);
  } catch (const Error& e) {
    return report(e.what());
  } catch (const std::bad_alloc&) {
    return report(
        "out of memory: an allocation failed (std::bad_alloc) while packing; lower --threads, or "
        "pack smaller images (--size)");
  }
}

}  // namespace ddp::app
