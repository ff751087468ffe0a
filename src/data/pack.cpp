#include "ddp/data/pack.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "ddp/data/image_decode.hpp"
#include "ddp/data/image_resize.hpp"
#include "ddp/data/pack_source.hpp"
#include "ddp/data/packed_writer.hpp"
#include "ddp/error.hpp"
#include "file_io.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using packed::Encoding;

namespace {

// One sample ready to write, or why it could not be.
struct Prepared {
  std::optional<Image> image;                        // raw: the pixels to store
  std::vector<std::uint8_t> bytes;                   // encoded: the file's bytes
  std::int64_t channels = 0, height = 0, width = 0;  // as decoded
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
        const std::uint64_t size = detail::regular_file_size(f.path, "a JPEG or PNG image");
        p.bytes.resize(static_cast<std::size_t>(size));
        detail::read_exact(f.path, p.bytes.data(), size);
        img = decode_image(p.bytes, name, shape_.channels);
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

PackSummary pack(const PackOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.height < 0 || opt.width < 0 || (opt.height == 0) != (opt.width == 0))
    throw ConfigError("pack --size: expected HxW with positive height and width");
  if (opt.height > 0 && opt.encoding == Encoding::encoded)
    throw ConfigError(
        "pack --size applies to --encoding raw; --encoding encoded keeps each "
        "file's original bytes (and size)");
  if (opt.channels != 0 && opt.channels != 1 && opt.channels != 3)
    throw ConfigError("pack --channels " + std::to_string(opt.channels) + ": expected 1 or 3");
  const PackSource src = load_pack_source(opt.format, opt.input, opt.split);
  if (!src.is_files() && opt.encoding == Encoding::encoded)
    throw ConfigError("pack --format " + opt.format +
                      " --encoding encoded: encoded keeps each sample's original JPEG/PNG file, "
                      "and arrays have none; use --encoding raw");
  const std::int64_t n = src.size();
  if (n == 0) throw DataError(src.description + ": no samples to pack");
  if (fs::exists(opt.output) && fs::is_directory(opt.output))
    throw ConfigError("pack --output " + detail::quoted(opt.output) +
                      " is a directory; give a file name (e.g. train.h5)");

  PackSummary sum;
  Preparer prep(src, opt);
  SetShape shape{opt.channels, opt.height, opt.width};
  prep.fix_shape(shape);
  const auto cancelled = [&] { return opt.cancelled && opt.cancelled(); };
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
  h.samples = n;
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

  PackedWriter writer(opt.output, h);
  const auto label_of = [&](std::int64_t i) {
    return src.is_files() ? src.files[static_cast<std::size_t>(i)].label
                          : src.labels[static_cast<std::size_t>(i)];
  };
  const auto write = [&](std::int64_t i, Prepared& p) {
    if (p.image)
      writer.add(p.image->pixels, label_of(i), p.image->height, p.image->width);
    else
      writer.add(p.bytes, label_of(i), p.height, p.width);
  };
  write(first - 1, *head);
  head.reset();
  if (opt.progress) opt.progress(first, n);

  const int threads = std::max(
      1, opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency()));
  run_ordered(prep, first, n, threads, std::int64_t{4} * threads + 4,
              [&](std::int64_t i, Prepared& p) {
                check_cancel();
                if (p.error.empty())
                  write(i, p);
                else
                  reject(p.error);
                if (opt.progress) opt.progress(i + 1, n);
              });
  check_cancel();
  writer.commit();

  sum.samples = writer.samples();
  sum.classes = static_cast<std::int64_t>(src.classes.size());
  sum.channels = shape.channels;
  const packed::Header written = packed::read_header(opt.output);
  sum.height = written.height;
  sum.width = written.width;
  sum.payload_bytes = writer.payload_bytes();
  std::error_code ec;
  sum.file_bytes = fs::file_size(opt.output, ec);
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace ddp::data
