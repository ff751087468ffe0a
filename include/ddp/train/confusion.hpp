#pragma once
// The confusion matrix of an evaluation: counts[true][predicted] over every test sample (each
// counted once over all ranks: the counts are all-reduced), and what is derived from it: per-class
// accuracy, the metrics.jsonl fields, confusion.csv. Beyond kMatrixClasses classes (ImageNet's
// 1,000: a million counts per evaluation, in every metrics line) only each class's correct and
// total counts are kept: per-class accuracy, no matrix.
#include <cstdint>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"

namespace ddp::train {

class Confusion {
 public:
  static constexpr std::int64_t kMatrixClasses = 256;

  Confusion() = default;
  explicit Confusion(std::int64_t classes);

  // Counts n samples: logits [n, classes] in host memory, the labels of the same samples. The
  // prediction is the first largest logit (the loss' argmax).
  void add(const float* logits, const std::int32_t* labels, std::int64_t n);
  // Sums every rank's counts (every rank must call it).
  void allreduce(comm::Communicator& comm);

  std::int64_t classes() const { return classes_; }
  // Whether the whole matrix is kept (classes <= kMatrixClasses); count() needs it.
  bool has_matrix() const { return matrix_; }
  std::int64_t count(std::int64_t truth, std::int64_t predicted) const {
    return counts_[static_cast<std::size_t>(truth * classes_ + predicted)];
  }
  std::int64_t correct(std::int64_t truth) const;  // of that true class
  std::int64_t samples(std::int64_t truth) const;  // of that true class
  double accuracy(std::int64_t truth) const;       // of that true class; 0 when it has no sample
  bool empty() const { return classes_ == 0; }
  const std::vector<std::int64_t>& counts() const { return counts_; }

  // ,"per_class":[{"class":"cat","accuracy":0.8,"samples":1000},...],"confusion":[[...],...]
  // (rows: true class, columns: predicted; without the matrix, no "confusion"), to append to a
  // JSON object.
  std::string json_fields(const std::vector<std::string>& names) const;
  // A header row "true\predicted,name0,name1,..." then one row per true class.
  std::string csv(const std::vector<std::string>& names) const;
  // "  cat          80.00%  (800/1000)" lines, one per class.
  std::string table(const std::vector<std::string>& names) const;

 private:
  std::int64_t classes_ = 0;
  bool matrix_ = false;
  std::vector<std::int64_t> counts_;  // the matrix, or [correct per class | samples per class]
};

}  // namespace ddp::train
