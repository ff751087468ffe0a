// IDX (MNIST / Fashion-MNIST) readers. An IDX file is a big-endian header — magic 0x0000TTDD (TT:
// the element type, 08 = unsigned byte; DD: the number of dimensions), one 32-bit size per
// dimension — followed by the elements, raw or gzip-compressed as a whole.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "../file_io.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using detail::quoted;

namespace {

constexpr std::uint32_t kImageMagic = 0x00000803;  // unsigned bytes, 3 dims: n x rows x cols
constexpr std::uint32_t kLabelMagic = 0x00000801;  // unsigned bytes, 1 dim: n

std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 |
         std::uint32_t{p[3]};
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

struct IdxFile {
  fs::path path;
  std::vector<std::uint8_t> bytes;  // decompressed content
  bool gzip = false;

  // " (after gzip decompression)" where sizes refer to the decompressed content.
  std::string decompressed_note() const { return gzip ? " (after gzip decompression)" : ""; }
};

// Checks the magic and that the file holds at least the header; `what` is "image" or "label".
void check_header(const IdxFile& f, std::uint32_t magic, std::size_t header_bytes,
                  const char* what) {
  const std::string expected = "an IDX " + std::string(what) + " file (magic " + hex32(magic) + ")";
  if (f.bytes.empty()) {
    throw DataError(quoted(f.path) + ": the file is empty (0 bytes" + f.decompressed_note() +
                    "); expected " + expected);
  }
  if (f.bytes.size() < 4) {
    throw DataError(quoted(f.path) + ": " + std::to_string(f.bytes.size()) + " bytes" +
                    f.decompressed_note() + " is too short for an IDX header; expected " +
                    expected);
  }
  const std::uint32_t got = be32(f.bytes.data());
  if (got != magic) {
    std::string msg = quoted(f.path) + ": bad IDX magic number " + hex32(got) + "; expected " +
                      hex32(magic) + " for an IDX " + what + " file";
    if (got == kImageMagic || got == kLabelMagic) {
      msg += "; this is an IDX " + std::string(got == kImageMagic ? "image" : "label") +
             " file: are the image and label files swapped?";
    } else if ((got >> 16) == 0 && (got & 0xFF) == (magic & 0xFF)) {
      msg += "; element type " + hex32((got >> 8) & 0xFF) +
             " is not supported (only 0x08, unsigned byte)";
    }
    throw DataError(msg);
  }
  if (f.bytes.size() < header_bytes) {
    throw DataError(quoted(f.path) + ": " + std::to_string(f.bytes.size()) + " bytes" +
                    f.decompressed_note() + " is too short for the " +
                    std::to_string(header_bytes) + "-byte IDX " + what + " header; the file is " +
                    "truncated");
  }
}

// Throws unless the file holds exactly header + payload bytes.
void check_size(const IdxFile& f, std::uint64_t header, std::uint64_t payload,
                const std::string& claim) {
  const std::uint64_t expected = header + payload;
  const std::uint64_t got = f.bytes.size();
  if (got == expected) return;
  std::string msg = quoted(f.path) + ": the header says " + claim + " (" +
                    std::to_string(expected) + " bytes including the " + std::to_string(header) +
                    "-byte header), but the file holds " + std::to_string(got) + " bytes" +
                    f.decompressed_note();
  msg += got < expected ? "; it is truncated"
                        : ": " + std::to_string(got - expected) + " unexpected trailing bytes";
  throw DataError(msg);
}

IdxFile load(const fs::path& path, const char* what) {
  IdxFile f;
  f.path = path;
  f.bytes = detail::read_maybe_gzip(path, "an IDX " + std::string(what) + " file", &f.gzip);
  return f;
}

}  // namespace

SampleSet read_idx(const fs::path& images, const fs::path& labels, int num_classes) {
  if (num_classes < 1 || num_classes > 256) {
    throw DataError("read_idx: num_classes = " + std::to_string(num_classes) +
                    " is invalid; uint8 labels allow 1..256");
  }
  // Labels first: they are small, so a mismatched pair fails before the large image file is read.
  IdxFile lf = load(labels, "label");
  check_header(lf, kLabelMagic, 8, "label");
  const std::uint64_t n_labels = be32(lf.bytes.data() + 4);
  check_size(lf, 8, n_labels, std::to_string(n_labels) + " labels");

  IdxFile imf = load(images, "image");
  check_header(imf, kImageMagic, 16, "image");
  const std::uint64_t n = be32(imf.bytes.data() + 4);
  const std::uint64_t rows = be32(imf.bytes.data() + 8);
  const std::uint64_t cols = be32(imf.bytes.data() + 12);
  const std::string claim =
      std::to_string(n) + " images of " + std::to_string(rows) + "x" + std::to_string(cols);
  if (n == 0 || rows == 0 || cols == 0) {
    throw DataError(quoted(images) + ": the header says " + claim +
                    "; expected a positive number of images with positive width and height");
  }
  // rows * cols < 2^64; guard the product with n before forming it.
  if (rows * cols > (std::numeric_limits<std::uint64_t>::max() - 16) / n) {
    throw DataError(quoted(images) + ": the header says " + claim +
                    ", an impossible size; the file is corrupt");
  }
  check_size(imf, 16, n * rows * cols, claim);

  if (n != n_labels) {
    throw DataError(quoted(images) + " holds " + std::to_string(n) + " images but " +
                    quoted(labels) + " holds " + std::to_string(n_labels) +
                    " labels; the two files must describe the same samples (a train file paired "
                    "with a t10k file?)");
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint8_t label = lf.bytes[8 + i];
    if (label >= num_classes) {
      throw DataError(quoted(labels) + ": label " + std::to_string(label) + " at index " +
                      std::to_string(i) + " (byte offset " + std::to_string(8 + i) +
                      ") is out of range; expected 0.." + std::to_string(num_classes - 1));
    }
  }
  std::vector<Label> label_values(lf.bytes.begin() + 8, lf.bytes.end());
  imf.bytes.erase(imf.bytes.begin(), imf.bytes.begin() + 16);
  return SampleSet(quoted(images), 1, static_cast<std::int64_t>(rows),
                   static_cast<std::int64_t>(cols), num_classes, std::move(imf.bytes),
                   std::move(label_values));
}

namespace {

// The names MNIST-style files go by: the official hyphenated ones (Debian's dataset-fashion-mnist
// ships them gzipped) and the dotted variant some mirrors use, each raw or gzipped.
fs::path find_idx(const fs::path& root, const std::string& prefix, const std::string& kind,
                  const std::string& idx, const std::string& listing) {
  const std::string names[] = {prefix + "-" + kind + "-" + idx + "-ubyte",
                               prefix + "-" + kind + "." + idx + "-ubyte"};
  for (const std::string& name : names)
    if (auto p = detail::raw_or_gzip(root / name, "an IDX file")) return *p;
  throw DataError(quoted(root / names[0]) + " (or .gz): no such file; an MNIST-style directory " +
                  "holds " + listing);
}

}  // namespace

SampleSet read_mnist_dir(const fs::path& root, Split split) {
  const std::string listing =
      "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
      "t10k-labels-idx1-ubyte, raw or gzipped (.gz)";
  detail::require_directory(root, "MNIST-style", listing);
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const fs::path images = find_idx(root, prefix, "images", "idx3", listing);
  const fs::path labels = find_idx(root, prefix, "labels", "idx1", listing);
  return read_idx(images, labels, 10);
}

}  // namespace ddp::data
