#pragma once
// Writes a packed dataset file (docs/dataset_format.md) sample by sample, chunk by chunk, so
// packing needs memory for one chunk, not the dataset. The file is built under a temporary name
// in the output's directory and renamed into place by commit() after an fsync: a file under the
// output name is always complete. Destroyed without commit() (an error, an interruption), it
// removes the temporary file.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

#include "ddp/data/packed_format.hpp"

namespace ddp::data {

class PackedWriter {
 public:
  // `h` gives encoding, channels, source and classes; for raw also height and width, and
  // optionally samples (raw) or chunk_bytes (encoded: the total size, if known) as upper bounds
  // that cap the chunk size. Its counts, chunk sizes and
  // checksums are filled in by the writer.
  PackedWriter(std::filesystem::path output, packed::Header h);
  ~PackedWriter();
  PackedWriter(const PackedWriter&) = delete;
  PackedWriter& operator=(const PackedWriter&) = delete;

  // raw: `data` is one CHW image of the header's size. encoded: the file's bytes, of an image of
  // height x width (the file records a fixed size only when all samples share one).
  void add(std::span<const std::uint8_t> data, std::int32_t label, std::int64_t height,
           std::int64_t width);
  // Writes labels, offsets, checksums and attributes, closes, fsyncs, renames into place.
  void commit();
  // commit() in two steps, so that two files written together (pack --val-fraction) appear
  // together: finish() does all that can fail for want of space, publish() renames.
  void finish();
  void publish();

  std::int64_t samples() const;
  std::uint64_t payload_bytes() const;  // pixel or encoded bytes written so far

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ddp::data
