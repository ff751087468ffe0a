#pragma once
// What the loader reads a split from: a set of samples (SampleSet: shape, labels, where each
// sample's bytes lie) plus the staging that makes a batch's bytes readable. Two implementations:
// InMemoryDataset (every sample always readable; staging costs nothing) and PackedStream (a packed
// file read in chunks through a bounded cache as batches are staged). The loader and the trainer
// see only this interface, so a split held in memory, shared per node or streamed from disk trains
// through the same code, to bitwise the same result.
#include <cstdint>
#include <span>
#include <vector>

#include "ddp/data/sample_set.hpp"

namespace ddp::data {

class Dataset {
 public:
  virtual ~Dataset() = default;

  // The samples served (after data.train_limit / test_limit). A sample's bytes may be read only
  // between stage() and release() of its index.
  virtual const SampleSet& samples() const = 0;
  // The samples the source holds before any limit (the start-up line's "subset of N").
  virtual std::int64_t source_size() const { return samples().size(); }

  // Make these samples' bytes readable in samples() / hand their memory back / start reading them
  // in the background for a later stage(). One loader stages and releases at a time (release()
  // may free a page a neighbouring sample shares); prefetch() may come from any thread. Const
  // because they change what is resident, never what a sample holds. A corrupt chunk surfaces in
  // stage() as a DataError naming the file, chunk and samples; a sample that does not decode, in
  // stage() or (kept encoded) when the loader decodes it.
  virtual void stage(std::span<const std::int64_t> /*indices*/) const {}
  virtual void release(std::span<const std::int64_t> /*indices*/) const {}
  virtual void prefetch(std::span<const std::int64_t> /*indices*/) const {}

  // For each sample, the storage chunk it starts in (data.shuffle_window's chunk-wise order); empty
  // when the source has no chunks (in memory, where a full shuffle costs nothing).
  virtual std::vector<std::int64_t> chunk_of_samples() const { return {}; }

 protected:
  Dataset() = default;
  Dataset(const Dataset&) = default;
  Dataset& operator=(const Dataset&) = default;
};

// A split held whole in memory (read by this rank, or shared once per node): nothing to stage.
class InMemoryDataset final : public Dataset {
 public:
  // source_size: the samples before a limit picked `samples` from them (0: samples.size()).
  // chunks: each sample's chunk in the packed file it was read from, for data.shuffle_window over
  // a file held once per node (data.cache = "node"); empty otherwise.
  explicit InMemoryDataset(SampleSet samples, std::int64_t source_size = 0,
                           std::vector<std::int64_t> chunks = {})
      : samples_(std::move(samples)),
        source_size_(source_size > 0 ? source_size : samples_.size()),
        chunks_(std::move(chunks)) {}
  const SampleSet& samples() const override { return samples_; }
  std::int64_t source_size() const override { return source_size_; }
  std::vector<std::int64_t> chunk_of_samples() const override { return chunks_; }

 private:
  SampleSet samples_;
  std::int64_t source_size_;
  std::vector<std::int64_t> chunks_;
};

}  // namespace ddp::data
