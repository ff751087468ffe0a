#pragma once
// Helpers for the data-room tests: a scratch directory and writers for small CIFAR / IDX files.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddp/data/sample_set.hpp"
#include "ddp/error.hpp"

namespace ddp::data::test_util {

using Bytes = std::vector<std::uint8_t>;

// A fresh directory under the system temp directory, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ddp_data_test_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& p, const Bytes& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline Bytes read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Writes `bytes` gzip-compressed with zlib's gz* API (as the gzip tool would).
inline void write_gz(const std::filesystem::path& p, const Bytes& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("gzopen failed for " + p.string());
  const int n = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  if (n != static_cast<int>(bytes.size())) throw std::runtime_error("gzwrite failed");
}

inline void put_be32(Bytes& b, std::uint32_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 24));
  b.push_back(static_cast<std::uint8_t>(v >> 16));
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}

// A recognisable pixel value for (sample, channel, y, x): distinct enough to catch misplacement.
inline std::uint8_t pattern(std::int64_t sample, std::int64_t c, std::int64_t y, std::int64_t x) {
  return static_cast<std::uint8_t>((sample * 37 + c * 101 + y * 13 + x * 7 + 11) & 0xff);
}

// CIFAR records for samples [first, first + n): label bytes then R, G, B planes of 32x32.
// `labels(i)` gives the label byte(s) of sample i.
template <typename LabelFn>
Bytes cifar_records(std::int64_t first, std::int64_t n, LabelFn labels) {
  Bytes b;
  for (std::int64_t i = first; i < first + n; ++i) {
    for (std::uint8_t l : labels(i)) b.push_back(l);
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) b.push_back(pattern(i, c, y, x));
  }
  return b;
}

inline Bytes cifar10_records(std::int64_t first, std::int64_t n) {
  return cifar_records(first, n,
                       [](std::int64_t i) { return Bytes{static_cast<std::uint8_t>(i % 10)}; });
}

inline Bytes cifar100_records(std::int64_t first, std::int64_t n) {
  return cifar_records(first, n, [](std::int64_t i) {
    return Bytes{static_cast<std::uint8_t>(i % 20), static_cast<std::uint8_t>((i * 7) % 100)};
  });
}

// IDX image file content: magic 0x00000803, n, rows, cols, then pattern(i, 0, y, x).
inline Bytes idx_images(std::uint32_t n, std::uint32_t rows, std::uint32_t cols) {
  Bytes b;
  put_be32(b, 0x00000803);
  put_be32(b, n);
  put_be32(b, rows);
  put_be32(b, cols);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t y = 0; y < rows; ++y)
      for (std::uint32_t x = 0; x < cols; ++x) b.push_back(pattern(i, 0, y, x));
  return b;
}

// IDX label file content: magic 0x00000801, n, then label i % 10.
inline Bytes idx_labels(std::uint32_t n) {
  Bytes b;
  put_be32(b, 0x00000801);
  put_be32(b, n);
  for (std::uint32_t i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(i % 10));
  return b;
}

// A small in-memory dataset of n images c x h x w with pattern pixels and labels i % classes.
inline SampleSet pattern_dataset(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                 int classes = 10) {
  Bytes px;
  std::vector<data::Label> lb;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t y = 0; y < h; ++y)
        for (std::int64_t x = 0; x < w; ++x) px.push_back(pattern(i, ch, y, x));
    lb.push_back(static_cast<data::Label>(i % classes));
  }
  return SampleSet("pattern dataset", c, h, w, classes, std::move(px), std::move(lb));
}

// Runs `fn` and returns the DataError message it throws ("" and a test failure if it does not).
template <typename Fn>
std::string data_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ddp::DataError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ddp::DataError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ddp::DataError, nothing was thrown";
  return "";
}

}  // namespace ddp::data::test_util
