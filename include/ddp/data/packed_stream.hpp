#pragma once
// The streaming implementation of a dataset over a packed file (docs/dataset_format.md), for
// data.cache_mb > 0: samples are read on demand in whole HDF5 chunks, each checked against its
// CRC32, through a bounded LRU chunk cache filled by loader threads that also decode encoded
// samples and prefetch the chunks of the next batch. Memory stays near cache_mb whatever the file
// size.
//
// The streaming implementation of Dataset: samples() holds the labels in memory, and its pixels are
// a reserved, untouched address range into which stage() writes a batch's samples at their dataset
// index and release() hands the pages back. fill_batch addresses samples by dataset index (the
// augmentation draws depend on it), so this keeps the transforms unchanged: a streamed batch is
// the same bytes at the same index as the in-memory one, hence bitwise the same training. A file
// of encoded images that vary in size is served encoded (SampleSet::encoded, its bytes staged
// undecoded), as read_packed holds it, for data.train_size's per-sample decode and resize.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "ddp/data/dataset.hpp"

namespace ddp::data {

struct StreamOptions {
  std::int64_t cache_bytes = 0;  // the chunk cache's bound (at least one chunk is held)
  int workers = 1;               // loader threads reading, checking and decoding chunks
};

class PackedStream final : public Dataset {
 public:
  // Opens `file` and reads its header, labels (and offsets) -- checked as read_packed does -- but
  // no pixels. `samples`: the file's samples this stream serves, dataset index i being file
  // sample samples[i] (a data.train_limit subset); empty = all, in file order. DataError naming
  // the file on any problem.
  PackedStream(const std::filesystem::path& file, StreamOptions opt,
               std::vector<std::int64_t> samples = {});
  ~PackedStream();
  PackedStream(const PackedStream&) = delete;
  PackedStream& operator=(const PackedStream&) = delete;

  // The samples this stream serves; their bytes are valid only while staged. The stream must
  // outlive the loaders that stage into it.
  const SampleSet& samples() const override { return view_; }

  // Writes the samples at these dataset indices into view()'s pixels (decoding on the loader
  // threads), each chunk coming from the cache or the file. DataError naming the file and the
  // chunk (with its samples) whose CRC fails, or the sample that does not decode.
  void stage(std::span<const std::int64_t> indices) const override;
  // Gives back the memory of these samples' pixels in view() (after their batch is filled).
  void release(std::span<const std::int64_t> indices) const override;
  // Starts loading these samples' chunks into the cache in the background (as many as fit in half
  // the cache), so the next stage() finds them there. Errors surface in that stage().
  void prefetch(std::span<const std::int64_t> indices) const override;

  // The samples in the file (samples() may serve a subset of them).
  std::int64_t source_size() const override;
  // For each dataset index, the chunk its sample starts in (data.shuffle_window's order).
  std::vector<std::int64_t> chunk_of_samples() const override;
  // Chunks read from the file so far (tests: the cache and prefetch work).
  std::int64_t chunks_read() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
  SampleSet view_;
};

}  // namespace ddp::data
