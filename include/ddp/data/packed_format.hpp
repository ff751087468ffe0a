#pragma once
// The packed dataset format (docs/dataset_format.md): one HDF5 file per split holding labels,
// class names, the pixels (raw uint8 N×C×H×W, or each sample's original JPEG/PNG bytes) and a
// CRC32 per chunk of the pixel data. This header names the layout and its chunk arithmetic, which
// the writer, the whole-file reader and (phase 2) a chunk-by-chunk streaming reader share.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ddp::data::packed {

inline constexpr const char* kFormatName = "ddp_train.packed";
inline constexpr std::int64_t kFormatVersion = 1;

// HDF5 dataset and attribute names.
inline constexpr const char* kLabels = "/labels";
inline constexpr const char* kClasses = "/classes";
inline constexpr const char* kImages = "/images";    // raw
inline constexpr const char* kEncoded = "/encoded";  // encoded
inline constexpr const char* kOffsets = "/offsets";  // encoded
inline constexpr const char* kChunkCrc = "/chunk_crc32";

enum class Encoding { raw, encoded };
std::string encoding_name(Encoding e);

// The root attributes of a packed file, plus the class names (its `classes` dataset).
struct Header {
  Encoding encoding = Encoding::raw;
  std::int64_t channels = 0;
  std::int64_t height = 0;  // 0 when the images do not share one size (encoded only)
  std::int64_t width = 0;
  std::int64_t samples = 0;
  std::string source;  // what was packed, e.g. "imagefolder:/data/train"
  // raw: samples per HDF5 chunk of `images`, and per CRC.
  std::int64_t samples_per_chunk = 0;
  // encoded: bytes per HDF5 chunk of `encoded`, and per CRC.
  std::int64_t chunk_bytes = 0;
  std::uint32_t labels_crc32 = 0;   // of the labels as little-endian int32
  std::uint32_t offsets_crc32 = 0;  // encoded: of the offsets as little-endian uint64
  std::vector<std::string> classes;
  // Set when `pack --val-fraction` split the source: "train" or "validation", the fraction of
  // each class that went to validation, and the seed that chose them (optional attributes).
  std::string split;
  double split_fraction = 0;
  std::uint64_t split_seed = 0;

  bool fixed_size() const { return height > 0 && width > 0; }
  std::int64_t image_bytes() const { return channels * height * width; }
};

// Chunk arithmetic. A raw chunk k holds samples [k*S, min((k+1)*S, N)); an encoded chunk k holds
// bytes [k*B, min((k+1)*B, total)) of `encoded`.
struct Range {
  std::int64_t begin = 0, end = 0;
};
std::int64_t chunk_count(std::int64_t items, std::int64_t per_chunk);
Range chunk_range(std::int64_t k, std::int64_t items, std::int64_t per_chunk);
// The samples whose bytes overlap [bytes.begin, bytes.end) of `encoded`, from the offsets (N+1).
Range samples_overlapping(std::span<const std::uint64_t> offsets, Range bytes);

// Chunk sizes aiming at ~2 MiB per chunk (large enough for efficient reads, small enough for a
// streaming reader to hold a few per loader thread).
inline constexpr std::int64_t kTargetChunkBytes = std::int64_t{2} << 20;
std::int64_t raw_samples_per_chunk(std::int64_t image_bytes);

// zlib's crc32 of a byte range (any length; zlib's length argument is 32-bit).
std::uint32_t crc32_of(std::span<const std::uint8_t> bytes);

// Reads and checks the root attributes and class names (no pixel data). DataError naming the file
// when it is not a packed file, has an unknown format_version, or its attributes disagree.
Header read_header(const std::filesystem::path& file);

}  // namespace ddp::data::packed
