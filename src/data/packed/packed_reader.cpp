#include "ddp/data/packed_reader.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "../file_io.hpp"
#include "ddp/data/image_decode.hpp"
#include "ddp/data/packed_format.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"
#include "packed_h5.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using namespace packed;
using data::detail::quoted;
using packed::detail::bytes_of;
using packed::detail::corrupt;
using packed::detail::hex;

namespace {

void check_dims(const fs::path& file, const std::string& path,
                const std::vector<std::uint64_t>& got, const std::vector<std::uint64_t>& want) {
  if (got == want) return;
  const auto text = [](const std::vector<std::uint64_t>& d) {
    std::string s;
    for (auto x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
    return s;
  };
  throw corrupt(file, "dataset " + path + " is " + text(got) + ", the header says " + text(want));
}

void check_chunk(const fs::path& file, std::int64_t k, std::int64_t chunks, std::uint32_t got,
                 std::uint32_t want, Range samples) {
  if (got == want) return;
  throw corrupt(file, "chunk " + std::to_string(k) + " of " + std::to_string(chunks) +
                          " (samples " + std::to_string(samples.begin) + ".." +
                          std::to_string(samples.end - 1) + ") has CRC32 " + hex(got) +
                          " but the file records " + hex(want));
}

// Decodes every sample of an encoded file on a few threads; each must be channels x h x w.
std::vector<std::uint8_t> decode_all(const fs::path& file, const Header& h,
                                     const std::vector<std::uint8_t>& encoded,
                                     const std::vector<std::uint64_t>& offsets) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(h.samples * h.image_bytes()));
  std::atomic<std::int64_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
  std::int64_t error_at = h.samples;
  const auto work = [&] {
    for (std::int64_t i; (i = next++) < h.samples;) {
      try {
        const auto b = offsets[static_cast<std::size_t>(i)];
        const auto e = offsets[static_cast<std::size_t>(i) + 1];
        const Image img = decode_image({encoded.data() + b, e - b},
                                       quoted(file) + ": sample " + std::to_string(i),
                                       static_cast<int>(h.channels));
        if (img.height != h.height || img.width != h.width)
          throw DataError(quoted(file) + ": sample " + std::to_string(i) + " is " +
                          std::to_string(img.width) + "x" + std::to_string(img.height) +
                          " but the file's images are " + std::to_string(h.width) + "x" +
                          std::to_string(h.height));
        std::copy(img.pixels.begin(), img.pixels.end(),
                  pixels.begin() + static_cast<std::ptrdiff_t>(i * h.image_bytes()));
      } catch (...) {
        const std::lock_guard lock(mu);
        if (i < error_at) {  // report the first bad sample, whatever the thread timing
          error_at = i;
          error = std::current_exception();
        }
      }
    }
  };
  const unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return pixels;
}

}  // namespace

SampleSet read_packed(const fs::path& file) {
  const Header h = read_header(file);
  const h5::QuietErrors quiet;
  const h5::File f = packed::detail::open_for_reading(file);
  const auto n = static_cast<std::uint64_t>(h.samples);
  const auto classes = static_cast<std::int64_t>(h.classes.size());
  if (classes > kMaxClasses)
    throw DataError(quoted(file) + ": " + std::to_string(classes) + " classes (at most " +
                    std::to_string(kMaxClasses) + ")");

  check_dims(file, kLabels, packed::detail::dims_of(f, file, kLabels), {n});
  std::vector<std::int32_t> labels32(n);
  packed::detail::read_rows(f, file, kLabels, H5T_NATIVE_INT32, 0, n, labels32.data());
  if (const auto crc = crc32_of(bytes_of(labels32)); crc != h.labels_crc32)
    throw corrupt(
        file, "the labels have CRC32 " + hex(crc) + " but the file records " + hex(h.labels_crc32));
  for (std::uint64_t i = 0; i < n; ++i)
    if (labels32[i] < 0 || labels32[i] >= classes)
      throw DataError(quoted(file) + ": sample " + std::to_string(i) + " has label " +
                      std::to_string(labels32[i]) + ", but the file names " +
                      std::to_string(classes) + " classes");
  std::vector<Label>& labels = labels32;

  const auto crc_dims = packed::detail::dims_of(f, file, kChunkCrc);
  std::vector<std::uint8_t> pixels;
  if (h.encoding == Encoding::raw) {
    const auto c = static_cast<std::uint64_t>(h.channels),
               hh = static_cast<std::uint64_t>(h.height), w = static_cast<std::uint64_t>(h.width);
    check_dims(file, kImages, packed::detail::dims_of(f, file, kImages), {n, c, hh, w});
    const std::int64_t chunks = chunk_count(h.samples, h.samples_per_chunk);
    check_dims(file, kChunkCrc, crc_dims, {static_cast<std::uint64_t>(chunks)});
    std::vector<std::uint32_t> crcs(static_cast<std::size_t>(chunks));
    packed::detail::read_rows(f, file, kChunkCrc, H5T_NATIVE_UINT32, 0, crcs.size(), crcs.data());
    pixels.resize(static_cast<std::size_t>(h.samples * h.image_bytes()));
    for (std::int64_t k = 0; k < chunks; ++k) {
      const Range r = chunk_range(k, h.samples, h.samples_per_chunk);
      std::uint8_t* out = pixels.data() + r.begin * h.image_bytes();
      packed::detail::read_rows(f, file, kImages, H5T_NATIVE_UINT8,
                                static_cast<std::uint64_t>(r.begin),
                                static_cast<std::uint64_t>(r.end - r.begin), out);
      check_chunk(file, k, chunks,
                  crc32_of({out, static_cast<std::size_t>((r.end - r.begin) * h.image_bytes())}),
                  crcs[static_cast<std::size_t>(k)], r);
    }
  } else {
    check_dims(file, kOffsets, packed::detail::dims_of(f, file, kOffsets), {n + 1});
    std::vector<std::uint64_t> offsets(n + 1);
    packed::detail::read_rows(f, file, kOffsets, H5T_NATIVE_UINT64, 0, n + 1, offsets.data());
    if (const auto crc = crc32_of(bytes_of(offsets)); crc != h.offsets_crc32)
      throw corrupt(file, "the offsets have CRC32 " + hex(crc) + " but the file records " +
                              hex(h.offsets_crc32));
    const auto total_dims = packed::detail::dims_of(f, file, kEncoded);
    if (offsets[0] != 0 || !std::is_sorted(offsets.begin(), offsets.end()) ||
        total_dims != std::vector<std::uint64_t>{offsets[n]})
      throw corrupt(file, "the offsets do not describe the encoded bytes");
    const auto total = static_cast<std::int64_t>(offsets[n]);
    const std::int64_t chunks = chunk_count(total, h.chunk_bytes);
    check_dims(file, kChunkCrc, crc_dims, {static_cast<std::uint64_t>(chunks)});
    std::vector<std::uint32_t> crcs(static_cast<std::size_t>(chunks));
    packed::detail::read_rows(f, file, kChunkCrc, H5T_NATIVE_UINT32, 0, crcs.size(), crcs.data());
    std::vector<std::uint8_t> encoded(static_cast<std::size_t>(total));
    for (std::int64_t k = 0; k < chunks; ++k) {
      const Range r = chunk_range(k, total, h.chunk_bytes);
      std::uint8_t* out = encoded.data() + r.begin;
      packed::detail::read_rows(f, file, kEncoded, H5T_NATIVE_UINT8,
                                static_cast<std::uint64_t>(r.begin),
                                static_cast<std::uint64_t>(r.end - r.begin), out);
      check_chunk(file, k, chunks, crc32_of({out, static_cast<std::size_t>(r.end - r.begin)}),
                  crcs[static_cast<std::size_t>(k)], samples_overlapping(offsets, r));
    }
    // Images of varying sizes stay encoded: the loader decodes each to data.train_size.
    if (!h.fixed_size())
      return SampleSet::encoded(quoted(file), h.channels, static_cast<int>(classes),
                                std::move(encoded), std::move(offsets), std::move(labels));
    pixels = decode_all(file, h, encoded, offsets);
  }
  return SampleSet(quoted(file), h.channels, h.height, h.width, static_cast<int>(classes),
                   std::move(pixels), std::move(labels));
}

std::vector<std::int64_t> chunk_of_samples(const fs::path& file,
                                           std::span<const std::int64_t> samples) {
  const Header h = read_header(file);
  const auto n = static_cast<std::uint64_t>(h.samples);
  std::vector<std::uint64_t> offsets;
  if (h.encoding == Encoding::encoded) {
    const h5::QuietErrors quiet;
    const h5::File f = packed::detail::open_for_reading(file);
    check_dims(file, kOffsets, packed::detail::dims_of(f, file, kOffsets), {n + 1});
    offsets.resize(n + 1);
    packed::detail::read_rows(f, file, kOffsets, H5T_NATIVE_UINT64, 0, n + 1, offsets.data());
  }
  const auto chunk = [&](std::int64_t s) -> std::int64_t {
    if (s < 0 || s >= h.samples)
      throw DataError(quoted(file) + ": sample " + std::to_string(s) +
                      " asked for, but the file holds " + std::to_string(h.samples));
    return h.encoding == Encoding::raw
               ? s / h.samples_per_chunk
               : static_cast<std::int64_t>(offsets[static_cast<std::size_t>(s)]) / h.chunk_bytes;
  };
  std::vector<std::int64_t> out;
  if (samples.empty()) {
    out.resize(static_cast<std::size_t>(h.samples));
    for (std::int64_t s = 0; s < h.samples; ++s) out[static_cast<std::size_t>(s)] = chunk(s);
  } else {
    for (const std::int64_t s : samples) out.push_back(chunk(s));
  }
  return out;
}

}  // namespace ddp::data
