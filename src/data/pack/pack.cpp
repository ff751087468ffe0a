#include "ddp/data/pack.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "../file_io.hpp"
#include "../packed/pack_temporaries.hpp"
#include "ddp/data/image_decode.hpp"
#include "ddp/data/image_resize.hpp"
#include "ddp/data/pack_source.hpp"
#include "ddp/data/packed_writer.hpp"
#include "ddp/data/sample_set.hpp"
#include "ddp/data/utf8_names.hpp"
#include "ddp/error.hpp"
#include "ddp/rng.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using packed::Encoding;

namespace {

// One sample ready to write, or why it could not be.
struct Prepared {
  std::optional<Image> image;                        // raw: the pixels to store
  std::vector<std::uint8_t> bytes;                   // encoded: the file's bytes
  std::int64_t channels = 0, height = 0, width = 0;  // as decoded
  bool converted = false;                            // a grey image converted to RGB
  std::string error;  // a DataError's message: skippable with --skip-bad
};

// What every sample must match, fixed by the first good one (or by the options).
struct SetShape {
  int channels = 0;
  std::int64_t height = 0, width = 0;  // raw: every stored image's size
};

class Preparer {
 public:
  Preparer(const PackSource& src, const PackOptions& opt) : src_(src), opt_(opt) {}

  void fix_shape(const SetShape& s) { shape_ = s; }

  // Reads, decodes and checks sample i (thread-safe once the shape is fixed).
  Prepared prepare(std::int64_t i) const {
    Prepared p;
    try {
      Image img;
      std::string name;
      if (src_.is_files()) {
        const SourceFile& f = src_.files[static_cast<std::size_t>(i)];
        name = detail::quoted(f.path);
        const std::uint64_t size = detail::regular_file_size(f.path, "an image file");
        p.bytes.resize(static_cast<std::size_t>(size));
        detail::read_exact(f.path, p.bytes.data(), size);
        img = decode_image(p.bytes, name, shape_.channels, &p.converted);
      } else {
        name = src_.description + " sample " + std::to_string(i);
        const std::int64_t bytes = src_.channels * src_.height * src_.width;
        const auto at = src_.pixels.begin() + static_cast<std::ptrdiff_t>(i * bytes);
        img = Image{src_.channels, src_.height, src_.width, {at, at + bytes}};
        if (shape_.channels != 0 && img.channels != shape_.channels)
          throw DataError(name + ": " + std::to_string(img.channels) +
                          " channels, but --channels " + std::to_string(shape_.channels));
      }
      p.channels = img.channels;
      p.height = img.height;
      p.width = img.width;
      if (opt_.encoding == Encoding::raw) {
        if (opt_.height > 0) {
          img = resize_bilinear(img, opt_.height, opt_.width);
        } else if (shape_.height > 0 &&
                   (img.height != shape_.height || img.width != shape_.width)) {
          throw DataError(name + ": image size " + std::to_string(img.width) + "x" +
                          std::to_string(img.height) + " (WxH) differs from the first image's " +
                          std::to_string(shape_.width) + "x" + std::to_string(shape_.height) +
                          "; a raw pack holds one size: resize with --size HxW, or keep the "
                          "originals with --encoding encoded");
        }
        p.image = std::move(img);
        p.bytes.clear();
      }
    } catch (const DataError& e) {
      p.error = e.what();
      // Where the file was listed (a CSV line), so the user finds the row to fix.
      if (src_.is_files() && !src_.files[static_cast<std::size_t>(i)].where.empty())
        p.error += " (" + src_.files[static_cast<std::size_t>(i)].where + ")";
    }
    return p;
  }

 private:
  const PackSource& src_;
  const PackOptions& opt_;
  SetShape shape_;
};

// Prepares samples [first, n) on `threads` threads, at most `window` ahead of the consumer, and
// hands them to `consume` in order on the calling thread.
void run_ordered(const Preparer& prep, std::int64_t first, std::int64_t n, int threads,
                 std::int64_t window, const std::function<void(std::int64_t, Prepared&)>& consume) {
  std::vector<std::optional<Prepared>> ring(static_cast<std::size_t>(window));
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t next = first, consumed = first;
  bool stop = false;
  std::exception_ptr worker_error;
  const auto work = [&] {
    for (;;) {
      std::int64_t i;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || next >= n || next < consumed + window; });
        if (stop || next >= n) return;
        i = next++;
      }
      std::optional<Prepared> p;
      try {
        p = prep.prepare(i);
      } catch (...) {  // not a DataError (those are in p->error): out of memory and the like
        const std::lock_guard lock(mu);
        worker_error = std::current_exception();
        stop = true;
        cv.notify_all();
        return;
      }
      const std::lock_guard lock(mu);
      ring[static_cast<std::size_t>(i % window)] = std::move(p);
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  const auto finish = [&] {
    {
      const std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : pool) t.join();
    pool.clear();
  };
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  try {
    for (; consumed < n;) {
      Prepared p;
      {
        std::unique_lock lock(mu);
        auto& slot = ring[static_cast<std::size_t>(consumed % window)];
        cv.wait(lock, [&] { return slot.has_value() || worker_error; });
        if (worker_error) std::rethrow_exception(worker_error);
        p = std::move(*slot);
        slot.reset();
      }
      consume(consumed, p);
      {
        const std::lock_guard lock(mu);
        ++consumed;
      }
      cv.notify_all();
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
}

}  // namespace

std::vector<bool> validation_split(const std::vector<std::int32_t>& labels, double fraction,
                                   std::uint64_t seed) {
  std::map<std::int32_t, std::vector<std::size_t>> by_class;
  for (std::size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(i);
  std::vector<bool> val(labels.size(), false);
  for (auto& [label, members] : by_class) {
    const auto n = static_cast<std::int64_t>(members.size());
    const std::int64_t k =
        std::min(n - 1, static_cast<std::int64_t>(std::llround(fraction * static_cast<double>(n))));
    // A seeded shuffle of the class: its samples ordered by a hash of their index.
    const auto key = [&](std::size_t i) { return hash_words(seed, 0x5917, i); };
    std::partial_sort(members.begin(), members.begin() + std::max<std::int64_t>(k, 0),
                      members.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    for (std::int64_t j = 0; j < k; ++j) val[members[static_cast<std::size_t>(j)]] = true;
  }
  return val;
}

namespace {

// The checks that need only the options, before anything is read.
void check_options(const PackOptions& opt) {
  if (opt.height < 0 || opt.width < 0 || (opt.height == 0) != (opt.width == 0))
    throw ConfigError("pack --size: expected HxW with positive height and width");
  if (opt.height * opt.width > kMaxPackPixels)
    throw ConfigError("pack --size " + std::to_string(opt.height) + "x" +
                      std::to_string(opt.width) + ": " + std::to_string(opt.height * opt.width) +
                      " pixels per image, more than the " + std::to_string(kMaxPackPixels) +
                      " (2^28, e.g. 16384x16384) an image may have");
  if (opt.height > 0 && opt.encoding == Encoding::encoded)
    throw ConfigError(
        "pack --size applies to --encoding raw; --encoding encoded keeps each "
        "file's original bytes (and size)");
  if (opt.channels != 0 && opt.channels != 1 && opt.channels != 3)
    throw ConfigError("pack --channels " + std::to_string(opt.channels) + ": expected 1 or 3");
  if (!(opt.val_fraction >= 0 && opt.val_fraction < 1))
    throw ConfigError("pack --val-fraction " + std::to_string(opt.val_fraction) +
                      ": expected a fraction in [0, 1), e.g. 0.1");
  for (const fs::path* out : {&opt.output, &opt.val_output}) {
    if (out->empty()) continue;
    if (fs::exists(*out) && fs::is_directory(*out))
      throw ConfigError("pack --" + std::string(out == &opt.output ? "output " : "val-output ") +
                        detail::quoted(*out) + " is a directory; give a file name (e.g. " +
                        (out == &opt.output ? "train.h5" : "val.h5") + ")");
  }
  if (opt.val_fraction > 0 && fs::absolute(opt.output).lexically_normal() ==
                                  fs::absolute(opt.val_output).lexically_normal())
    throw ConfigError("pack --val-output " + detail::quoted(opt.val_output) +
                      " is the --output file; give the validation split a name of its own");
}

// What a packed file may hold, whatever the source: bounded class counts and text names.
void check_classes(const PackSource& src) {
  if (src.classes.size() > static_cast<std::size_t>(kMaxClasses))
    throw DataError(src.description + ": " + std::to_string(src.classes.size()) +
                    " classes; a packed file holds at most " + std::to_string(kMaxClasses) +
                    " (2^24)");
  for (const std::string& c : src.classes)
    if (!is_valid_utf8(c))
      throw DataError(src.description + ": class name '" + escape_bytes(c) +
                      "' is not valid UTF-8; class names are written as text (metrics, "
                      "reports, TensorBoard)");
}

}  // namespace

PackSummary pack(const PackOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  check_options(opt);
  const auto cancelled = [&] { return opt.cancelled && opt.cancelled(); };
  const PackSource src = load_pack_source(opt.format, opt.input, opt.split, cancelled);
  if (!src.is_files() && opt.encoding == Encoding::encoded)
    throw ConfigError("pack --format " + opt.format +
                      " --encoding encoded: encoded keeps each sample's original JPEG/PNG file, "
                      "and arrays have none; use --encoding raw");
  check_classes(src);
  const std::int64_t n = src.size();
  if (n == 0) throw DataError(src.description + ": no samples to pack");

  PackSummary sum;
  sum.notes = src.notes;
  const auto label_of = [&](std::int64_t i) {
    return src.is_files() ? src.files[static_cast<std::size_t>(i)].label
                          : src.labels[static_cast<std::size_t>(i)];
  };
  const bool split = opt.val_fraction > 0;
  std::vector<bool> is_val;
  std::int64_t n_val = 0;
  if (split) {
    std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) labels[static_cast<std::size_t>(i)] = label_of(i);
    is_val = validation_split(labels, opt.val_fraction, opt.seed);
    n_val = std::count(is_val.begin(), is_val.end(), true);
    if (n_val == 0)
      throw ConfigError("pack --val-fraction " + std::to_string(opt.val_fraction) +
                        " takes no sample of " + src.description +
                        " for validation (too few per class); raise it");
  }

  Preparer prep(src, opt);
  SetShape shape{opt.channels, opt.height, opt.width};
  prep.fix_shape(shape);
  const auto check_cancel = [&] {
    if (cancelled())
      throw DataError("pack interrupted by a signal; no file was written under " +
                      detail::quoted(opt.output));
  };
  const auto reject = [&](const std::string& error) {
    if (!opt.skip_bad) throw DataError(error);
    sum.skipped.push_back(error);
  };

  // The first good sample fixes the set's channels (and, for raw without --size, its size).
  std::int64_t first = 0;
  std::optional<Prepared> head;
  for (; first < n && !head; ++first) {
    check_cancel();
    Prepared p = prep.prepare(first);
    if (p.error.empty()) {
      head = std::move(p);
    } else {
      reject(p.error);
    }
  }
  if (!head) throw DataError(src.description + ": every sample was skipped; nothing to pack");
  packed::Header h;
  h.encoding = opt.encoding;
  h.source = src.description;
  h.classes = src.classes;
  h.samples = n - n_val;
  if (opt.encoding == Encoding::encoded) {
    std::uint64_t total = 0;
    for (const SourceFile& f : src.files) {
      std::error_code ec;
      const auto size = fs::file_size(f.path, ec);
      if (!ec) total += size;
    }
    h.chunk_bytes = static_cast<std::int64_t>(std::max<std::uint64_t>(total, 1));
  }
  shape.channels = static_cast<int>(head->channels);
  if (head->image) {
    shape.height = head->image->height;
    shape.width = head->image->width;
  }
  prep.fix_shape(shape);
  h.channels = shape.channels;
  h.height = shape.height;
  h.width = shape.width;

  // A pack killed before it could clean up left its temporary file: remove those of dead packs.
  for (const fs::path* out : {&opt.output, &opt.val_output})
    if (!out->empty() && (split || out == &opt.output))
      for (std::string& gone : detail::remove_stale_temporaries(*out))
        sum.removed_temporaries.push_back(std::move(gone));

  std::optional<PackedWriter> val_writer;
  if (split) {
    h.split = "train";
    h.split_fraction = opt.val_fraction;
    h.split_seed = opt.seed;
    packed::Header vh = h;
    vh.split = "validation";
    vh.samples = n_val;
    val_writer.emplace(opt.val_output, vh);
  }
  PackedWriter writer(opt.output, h);
  const auto write = [&](std::int64_t i, Prepared& p) {
    PackedWriter& w = split && is_val[static_cast<std::size_t>(i)] ? *val_writer : writer;
    if (p.converted) ++sum.converted;
    if (p.image)
      w.add(p.image->pixels, label_of(i), p.image->height, p.image->width);
    else
      w.add(p.bytes, label_of(i), p.height, p.width);
  };
  write(first - 1, *head);
  // Prepared raw images wait in a window ahead of the writer: bound its memory (~512 MiB) for
  // large images, and keep every thread busy for small ones.
  const std::int64_t image_bytes =
      head->image ? std::max<std::int64_t>(1, static_cast<std::int64_t>(head->image->pixels.size()))
                  : 1;
  head.reset();
  if (opt.progress) opt.progress(first, n);

  int threads = std::max(
      1, opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency()));
  const std::int64_t window = std::clamp<std::int64_t>((std::int64_t{512} << 20) / image_bytes, 2,
                                                       std::int64_t{4} * threads + 4);
  threads = static_cast<int>(std::min<std::int64_t>(threads, window));
  run_ordered(prep, first, n, threads, window, [&](std::int64_t i, Prepared& p) {
    check_cancel();
    if (p.error.empty())
      write(i, p);
    else
      reject(p.error);
    if (opt.progress) opt.progress(i + 1, n);
  });
  check_cancel();
  writer.finish();
  if (val_writer) val_writer->finish();
  writer.publish();
  if (val_writer) val_writer->publish();

  sum.samples = writer.samples();
  sum.classes = static_cast<std::int64_t>(src.classes.size());
  sum.channels = shape.channels;
  const packed::Header written = packed::read_header(opt.output);
  sum.height = written.height;
  sum.width = written.width;
  sum.payload_bytes = writer.payload_bytes();
  std::error_code ec;
  sum.file_bytes = fs::file_size(opt.output, ec);
  if (val_writer) {
    sum.val_samples = val_writer->samples();
    sum.payload_bytes += val_writer->payload_bytes();
    sum.val_file_bytes = fs::file_size(opt.val_output, ec);
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace ddp::data
