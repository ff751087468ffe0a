#pragma once
// The snapshot's own header in HDF5's user block (the first 512 bytes, which HDF5 leaves to the
// application and h5dump/h5py skip): a few lines of text with the training position, the file's
// length and a CRC-32 of everything after the header.
//  - Readers verify length and CRC before HDF5 parses a byte: HDF5 1.10 rejects truncated files
//    by itself but can crash on corrupt metadata.
//  - Listing a run directory (find_latest, prune) orders snapshots and spots truncated ones from
//    these 512 bytes alone, instead of reading every file.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "ddp/ckpt/snapshot.hpp"

namespace ddp::ckpt {

inline constexpr std::size_t kHeaderBytes = 512;  // HDF5: a power of two, at least 512

struct Header {
  std::int64_t format_version = 0;
  TrainingPosition position;
  std::uint64_t bytes = 0;  // of the whole file
  std::uint32_t crc32 = 0;  // zlib's CRC-32 of bytes [kHeaderBytes, end)
  std::string run_id;       // "run_id" line; "" in headers written before runs had an identity
};

// Fills the first kHeaderBytes of a complete file image (built with that user block size).
void stamp_header(std::span<char> image, const TrainingPosition& position,
                  const std::string& run_id);

// The header at the start of `file` (at least its first kHeaderBytes + 8, to see HDF5's signature
// behind it); nullopt for files without ours (other writers, or a header zeroed on purpose), which
// readers parse only in a child process (see snapshot_read.cpp). Sets *error, and returns nullopt,
// for a header that is ours but unreadable or damaged ("corrupt header: ...", e.g. a flipped bit in
// its first line).
std::optional<Header> parse_header(std::span<const char> file, std::string* error);

// "" when the whole file matches its header; otherwise why not ("truncated: ...", "checksum
// mismatch: ...").
std::string verify_file(std::span<const char> file, const Header& header);

// Reads only the header and the file's size: nullopt without a header; *error when it is ours
// but unreadable or the length differs (a truncated or extended file).
std::optional<Header> read_header(const std::filesystem::path& file, std::string* error);

// Reads the whole file and checks it against its header (verify_file); "" when it matches.
std::string verify_whole_file(const std::filesystem::path& file, const Header& header);

}  // namespace ddp::ckpt
