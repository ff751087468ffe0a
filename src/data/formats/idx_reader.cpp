// IDX (MNIST / Fashion-MNIST) readers. An IDX file is a big-endian header — magic 0x0000TTDD (TT:
// the element type, 08 = unsigned byte; DD: the number of dimensions), one 32-bit size per
// dimension — followed by the elements, raw or gzip-compressed as a whole.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "../file_io.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/subset.hpp"
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
void check_file_size(const IdxFile& f, std::uint64_t header, std::uint64_t payload,
                     const std::string& claim, std::uint64_t got) {
  const std::uint64_t expected = header + payload;
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

// A label file, validated: magic, size, every label < num_classes.
IdxFile load_labels(const fs::path& labels, int num_classes) {
  if (num_classes < 1 || num_classes > 256) {
    throw DataError("read_idx: num_classes = " + std::to_string(num_classes) +
                    " is invalid; uint8 labels allow 1..256");
  }
  IdxFile lf = load(labels, "label");
  check_header(lf, kLabelMagic, 8, "label");
  const std::uint64_t n_labels = be32(lf.bytes.data() + 4);
  check_file_size(lf, 8, n_labels, std::to_string(n_labels) + " labels", lf.bytes.size());
  for (std::uint64_t i = 0; i < n_labels; ++i) {
    const std::uint8_t label = lf.bytes[8 + i];
    if (label >= num_classes) {
      throw DataError(quoted(labels) + ": label " + std::to_string(label) + " at index " +
                      std::to_string(i) + " (byte offset " + std::to_string(8 + i) +
                      ") is out of range; expected 0.." + std::to_string(num_classes - 1));
    }
  }
  return lf;
}

struct ImageGeometry {
  std::uint64_t n = 0, rows = 0, cols = 0;
  std::string claim;  // "60000 images of 28x28", for messages
};

// An image file's header (its first 16 bytes, or all of it when shorter: f.bytes), checked against
// the label count; the size check is the caller's.
ImageGeometry image_geometry(const IdxFile& f) {
  check_header(f, kImageMagic, 16, "image");
  ImageGeometry g{be32(f.bytes.data() + 4), be32(f.bytes.data() + 8), be32(f.bytes.data() + 12),
                  ""};
  g.claim =
      std::to_string(g.n) + " images of " + std::to_string(g.rows) + "x" + std::to_string(g.cols);
  if (g.n == 0 || g.rows == 0 || g.cols == 0) {
    throw DataError(quoted(f.path) + ": the header says " + g.claim +
                    "; expected a positive number of images with positive width and height");
  }
  // rows * cols < 2^64; guard the product with n before forming it.
  if (g.rows * g.cols > (std::numeric_limits<std::uint64_t>::max() - 16) / g.n) {
    throw DataError(quoted(f.path) + ": the header says " + g.claim +
                    ", an impossible size; the file is corrupt");
  }
  return g;
}

void check_counts(const ImageGeometry& g, const fs::path& images, const fs::path& labels,
                  std::uint64_t n_labels) {
  if (g.n != n_labels) {
    throw DataError(quoted(images) + " holds " + std::to_string(g.n) + " images but " +
                    quoted(labels) + " holds " + std::to_string(n_labels) +
                    " labels; the two files must describe the same samples (a train file paired "
                    "with a t10k file?)");
  }
}

struct KeptImages {
  ImageGeometry geometry;
  std::vector<std::uint8_t> pixels;
};

// The kept images (`kept`, ascending) of a gzipped image file, decompressed piece by piece: the
// whole stream is checked (checksum, size), only the kept images are held.
KeptImages kept_gzip_images(const fs::path& images, const fs::path& labels, std::uint64_t n_labels,
                            const std::vector<std::int64_t>& kept) {
  const std::uint64_t size = detail::regular_file_size(images, "an IDX image file");
  IdxFile head{.path = images, .bytes = {}, .gzip = true};
  ImageGeometry g;
  std::uint64_t image = 0;  // bytes per image, once the header is read
  std::vector<std::uint8_t> out;
  std::size_t next = 0;     // the next kept image
  std::uint64_t total = 0;  // bytes decompressed
  detail::gunzip_chunked(
      images, size, [&](const std::uint8_t* data, std::size_t bytes, std::uint64_t offset) {
        total = offset + bytes;
        if (head.bytes.size() < 16) {
          const std::size_t take = std::min<std::size_t>(16 - head.bytes.size(), bytes);
          head.bytes.insert(head.bytes.end(), data, data + take);
          if (head.bytes.size() < 16) return;
          g = image_geometry(head);
          check_counts(g, images, labels, n_labels);
          image = g.rows * g.cols;
          // The header is not checked against the content yet (that is at the end of the stream): a
          // corrupt one must not reserve terabytes. Beyond 64 MiB the output grows as it arrives.
          out.reserve(static_cast<std::size_t>(
              std::min<std::uint64_t>(kept.size() * image, std::uint64_t{64} << 20)));
        }
        // The part of each kept image that lies in [offset, offset + bytes) of the content.
        const std::uint64_t end = offset + bytes;
        while (next < kept.size()) {
          const std::uint64_t first = 16 + static_cast<std::uint64_t>(kept[next]) * image;
          if (first >= end) break;
          const std::uint64_t have = out.size() - next * image;  // of this image, copied before
          const std::uint64_t from = std::max(first + have, offset);
          const std::uint64_t to = std::min(first + image, end);
          out.insert(out.end(), data + (from - offset), data + (to - offset));
          if (to < first + image) break;  // the rest is in the next piece
          ++next;
        }
      });
  if (head.bytes.size() < 16) image_geometry(head);  // the whole file: too short, it throws
  check_file_size(head, 16, g.n * image, g.claim, total);
  return {std::move(g), std::move(out)};
}

}  // namespace

SampleSet read_idx(const fs::path& images, const fs::path& labels, int num_classes) {
  // Labels first: they are small, so a mismatched pair fails before the large image file is read.
  const IdxFile lf = load_labels(labels, num_classes);
  const std::uint64_t n_labels = be32(lf.bytes.data() + 4);
  IdxFile imf = load(images, "image");
  const ImageGeometry g = image_geometry(imf);
  check_file_size(imf, 16, g.n * g.rows * g.cols, g.claim, imf.bytes.size());
  check_counts(g, images, labels, n_labels);
  std::vector<Label> label_values(lf.bytes.begin() + 8, lf.bytes.end());
  imf.bytes.erase(imf.bytes.begin(), imf.bytes.begin() + 16);
  return SampleSet(quoted(images), 1, static_cast<std::int64_t>(g.rows),
                   static_cast<std::int64_t>(g.cols), num_classes, std::move(imf.bytes),
                   std::move(label_values));
}

LimitedSet read_idx(const fs::path& images, const fs::path& labels, int num_classes,
                    const Limit& limit) {
  const IdxFile lf = load_labels(labels, num_classes);
  const std::uint64_t n_labels = be32(lf.bytes.data() + 4);
  const std::vector<std::int64_t> kept = limit.kept(static_cast<std::int64_t>(n_labels));
  if (kept.empty())
    return {read_idx(images, labels, num_classes), static_cast<std::int64_t>(n_labels)};
  std::vector<Label> label_values(kept.size());
  for (std::size_t k = 0; k < kept.size(); ++k)
    label_values[k] = lf.bytes[8 + static_cast<std::size_t>(kept[k])];

  // The header (and the gzip magic) from the first 16 bytes of the file.
  const std::uint64_t size = detail::regular_file_size(images, "an IDX image file");
  IdxFile head{.path = images, .bytes = {}, .gzip = false};
  head.bytes.resize(static_cast<std::size_t>(std::min<std::uint64_t>(16, size)));
  if (size > 0)
    detail::read_records(images, 0, head.bytes.size(), std::vector<std::int64_t>{0},
                         [&](const std::uint8_t* data, std::int64_t) {
                           std::copy(data, data + head.bytes.size(), head.bytes.begin());
                         });
  KeptImages kept_images;
  if (detail::is_gzip(head.bytes.data(), head.bytes.size())) {
    kept_images = kept_gzip_images(images, labels, n_labels, kept);
  } else {
    const ImageGeometry g = image_geometry(head);
    check_file_size(head, 16, g.n * g.rows * g.cols, g.claim, size);
    check_counts(g, images, labels, n_labels);
    const std::uint64_t image = g.rows * g.cols;
    kept_images = {g, std::vector<std::uint8_t>(static_cast<std::size_t>(kept.size() * image))};
    std::size_t next = 0;
    detail::read_records(
        images, 16, static_cast<std::size_t>(image), kept,
        [&](const std::uint8_t* data, std::int64_t) {
          std::copy(data, data + image,
                    kept_images.pixels.begin() + static_cast<std::ptrdiff_t>(next * image));
          ++next;
        });
  }
  const ImageGeometry& g = kept_images.geometry;
  return {SampleSet(limit.origin(quoted(images), static_cast<std::int64_t>(n_labels)), 1,
                    static_cast<std::int64_t>(g.rows), static_cast<std::int64_t>(g.cols),
                    num_classes, std::move(kept_images.pixels), std::move(label_values)),
          static_cast<std::int64_t>(n_labels)};
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

namespace {

struct IdxPair {
  fs::path images, labels;
};

IdxPair mnist_files(const fs::path& root, Split split) {
  const std::string listing =
      "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
      "t10k-labels-idx1-ubyte, raw or gzipped (.gz)";
  detail::require_directory(root, "MNIST-style", listing);
  const std::string prefix = split == Split::train ? "train" : "t10k";
  return {find_idx(root, prefix, "images", "idx3", listing),
          find_idx(root, prefix, "labels", "idx1", listing)};
}

}  // namespace

SampleSet read_mnist_dir(const fs::path& root, Split split) {
  const IdxPair f = mnist_files(root, split);
  return read_idx(f.images, f.labels, 10);
}

LimitedSet read_mnist_dir(const fs::path& root, Split split, const Limit& limit) {
  const IdxPair f = mnist_files(root, split);
  return read_idx(f.images, f.labels, 10, limit);
}

}  // namespace ddp::data
