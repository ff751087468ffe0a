#include "ddp/app/pack_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iomanip>
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
  return pack;
}

int run_pack(PackCommand& cmd, int world_size, std::ostream& out) {
  if (world_size > 1)
    throw ConfigError(
        "ddp_train pack runs as one process; start it without mpirun/srun (it uses "
        "--threads threads)");
  auto& o = cmd.options;
  o.output = cmd.output;
  o.encoding =
      cmd.encoding == "encoded" ? data::packed::Encoding::encoded : data::packed::Encoding::raw;
  o.split = cmd.split == "test" ? data::Split::test : data::Split::train;
  if (!cmd.size.empty()) parse_size(cmd.size, o.height, o.width);
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
  out << "\n";
  for (const auto& why : s.skipped) out << "  skipped: " << why << "\n";
  return 0;
}

}  // namespace ddp::app
