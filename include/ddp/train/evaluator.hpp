#pragma once
// Exact evaluation on the test set, shared by training (after its epochs) and `ddp_train eval`:
// each rank scores a contiguous shard of the test set sized by its share of the global batch,
// without padding, and the sums, counts and confusion matrix are all-reduced, so every sample
// counts exactly once whatever the number of ranks and their shares.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/nn/loss.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/train/batch_feed.hpp"
#include "ddp/train/confusion.hpp"
#include "ddp/train/metrics.hpp"
#include "ddp/train/test_time_augmentation.hpp"

namespace ddp::train {

struct EvalResult {
  double loss = 0.0;         // mean over all test samples
  double accuracy = 0.0;     // fraction
  std::int64_t samples = 0;  // counted exactly once each over all ranks
  Confusion confusion;       // all-reduced: every rank holds every test sample's count
};

// The evaluation into an epoch's metrics row (its confusion matrix named by class_names).
void record_evaluation(const EvalResult& e, const std::vector<std::string>& class_names,
                       EpochMetrics& m);

class Evaluator {
 public:
  // Scores `model` (on `be`, reserved for batches of `batch`) on `test`, its images normalised by
  // `norm` after data's evaluation transform. Collective over `comm`: this rank takes the shard
  // slice_sizes(test size, shares) gives it (shares empty: equal), in batches of at most `batch`.
  Evaluator(nn::Model& model, backend::Backend& be, const data::Dataset& test,
            data::Normalization norm, const data::Options& data, std::uint64_t seed,
            comm::Communicator& comm, std::vector<std::int64_t> shares, std::int64_t batch);
  ~Evaluator();

  // Other shares and batch size from now on (the trainer's shares changed).
  void set_shares(std::vector<std::int64_t> shares, std::int64_t batch);
  // The batch slots to stage batches in (the trainer's, shared with training: it must outlive the
  // next evaluate); null: the evaluator's own, made at first use.
  void use_feed(BatchFeed* feed) { feed_ = feed; }
  // Scores every test image through these views (eval.tta), their logits averaged; the default is
  // the image alone.
  void set_tta(TestTimeAugmentation tta) { tta_ = std::move(tta); }
  const TestTimeAugmentation& tta() const { return tta_; }

  // Every rank gets the same result. logits: when given, receives every test sample's logits
  // ([test samples, classes], dataset order) on every rank.
  EvalResult evaluate(std::vector<float>* logits = nullptr);

 private:
  nn::Model& model_;
  backend::Backend& be_;
  const data::Dataset& test_;
  data::Normalization norm_;
  data::Augmentation aug_;
  std::uint64_t seed_;
  bool prefetch_;
  comm::Communicator& comm_;
  std::vector<std::int64_t> shares_;
  std::int64_t batch_;
  nn::SoftmaxCrossEntropy loss_;  // plain cross-entropy: evaluation scores without smoothing
  BatchFeed* feed_ = nullptr;
  std::unique_ptr<BatchFeed> own_feed_;
  TestTimeAugmentation tta_;
  // With several views: one view of a batch, each view's logits on the host, their average (on
  // the host, and in the backend's memory for the loss).
  Tensor view_images_, averaged_, averaged_view_;
  std::vector<std::vector<float>> view_logits_;
  std::vector<float> host_logits_;  // the views' average, or the logits downloaded

  // The logits of batch x (n images): the model's, or the views' average. Valid until the next
  // call.
  const Tensor& score_views(const Tensor& x, std::int64_t n);
  // Those logits on the host (waits for a device).
  const float* on_host(const Tensor& logits);
};

}  // namespace ddp::train
