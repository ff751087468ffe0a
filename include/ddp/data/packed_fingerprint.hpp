#pragma once
// A cheap fingerprint of a packed dataset file (docs/dataset_format.md), for checking that every
// rank of a job sees the same copy (`ddp_train doctor`): the CRC32 of the checksums the file
// already stores (one per ~2 MiB chunk of pixels, the labels', the offsets') and of its shape
// attributes and class names, plus the file's size. It reads a few KiB per GB of data, not the
// pixels, so it is affordable on files larger than memory; two copies that differ anywhere in their
// pixels, labels or classes differ in it (the per-chunk CRCs cover every byte), as does a truncated
// copy (its size).
#include <cstdint>
#include <filesystem>
#include <string>

namespace ddp::data::packed {

struct Fingerprint {
  std::int64_t samples = 0;
  std::uint64_t file_bytes = 0;
  std::uint32_t crc = 0;  // over the stored checksums, shape attributes and class names
  std::string shape;      // "3x32x32 raw, 10 classes", "3xvariable encoded, 5 classes"

  // "50000 samples (3x32x32 raw, 10 classes), 158123456 bytes, fingerprint 1a2b3c4d"
  std::string describe() const;
};

// DataError naming the file when it is missing, not a packed file, or its checksum array does not
// have the length its attributes call for.
Fingerprint fingerprint(const std::filesystem::path& file);

}  // namespace ddp::data::packed
