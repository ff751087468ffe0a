#include "ddp/train/evaluator.hpp"

#include <algorithm>
#include <span>

#include "ddp/data/loader.hpp"
#include "ddp/data/sampler.hpp"

namespace ddp::train {

void record_evaluation(const EvalResult& e, const std::vector<std::string>& class_names,
                       EpochMetrics& m) {
  m.evaluated = true;
  m.test_loss = e.loss;
  m.test_acc = e.accuracy;
  m.test_samples = e.samples;
  m.confusion = e.confusion;
  m.class_names = class_names;
}

Evaluator::Evaluator(nn::Model& model, backend::Backend& be, const data::Dataset& test,
                     data::Normalization norm, const data::Options& data, std::uint64_t seed,
                     comm::Communicator& comm, std::vector<std::int64_t> shares, std::int64_t batch)
    : model_(model),
      be_(be),
      test_(test),
      norm_(std::move(norm)),
      aug_(data::eval_augmentation(data)),
      seed_(seed),
      prefetch_(data.prefetch),
      comm_(comm),
      shares_(std::move(shares)),
      batch_(batch),
      loss_(be, model.num_classes(), 0.0) {}

Evaluator::~Evaluator() = default;

void Evaluator::set_shares(std::vector<std::int64_t> shares, std::int64_t batch) {
  shares_ = std::move(shares);
  if (own_feed_ && batch > batch_) own_feed_.reset();
  batch_ = batch;
}

const Tensor& Evaluator::score_views(const Tensor& x, std::int64_t n) {
  const nn::StepContext eval_ctx{nn::Mode::eval, 0, nullptr};
  const auto& views = tta_.views();
  if (views.size() == 1) return model_.forward(x, eval_ctx);
  const Shape input = model_.input_shape();
  const std::int64_t classes = model_.num_classes();
  if (view_images_.numel() < input.with_batch(n).numel()) {
    view_images_ = be_.alloc(input.with_batch(std::max(n, batch_)));
    averaged_ = be_.alloc(Shape{std::max(n, batch_), classes});
  }
  const auto count = static_cast<std::size_t>(n * classes);
  view_logits_.resize(views.size());
  for (std::size_t v = 0; v < views.size(); ++v) {
    const TtaView& view = views[v];
    Tensor in = x;
    if (view.dy != 0 || view.dx != 0 || view.flip) {
      in = Tensor::view(view_images_.data(), input.with_batch(n), be_.device());
      be_.image_view(n, input[0], input[1], input[2], view.dy, view.dx, view.flip, x.data(),
                     in.data());
    }
    const Tensor& logits = model_.forward(in, eval_ctx);
    view_logits_[v].resize(count);
    if (be_.host_addressable())
      std::copy_n(logits.data(), count, view_logits_[v].begin());
    else
      be_.download(logits.data(), view_logits_[v].data(), count);
  }
  host_logits_.resize(count);
  tta_.combine(view_logits_, host_logits_);
  averaged_view_ = Tensor::view(averaged_.data(), Shape{n, classes}, be_.device());
  be_.upload(host_logits_.data(), averaged_view_.data(), count);
  return averaged_view_;
}

const float* Evaluator::on_host(const Tensor& logits) {
  if (tta_.views().size() > 1) return host_logits_.data();  // averaged there
  if (be_.host_addressable()) return logits.data();
  host_logits_.resize(static_cast<std::size_t>(logits.numel()));
  be_.download(logits.data(), host_logits_.data(), host_logits_.size());
  return host_logits_.data();
}

EvalResult Evaluator::evaluate(std::vector<float>* all_logits) {
  const data::SampleSet& test = test_.samples();
  // Each rank takes a contiguous shard of the test set sized by its share; no padding, so every
  // sample counts once.
  auto batches = data::eval_batches(test.size(), comm_.size(), comm_.rank(), shares_, batch_);
  // The samples in the order the batches bring them: their labels and places for the confusion
  // matrix and the logits.
  std::vector<std::int64_t> order;
  for (const auto& rb : batches) order.insert(order.end(), rb.indices.begin(), rb.indices.end());
  data::BatchLoader loader(test_, norm_, aug_, seed_, batch_, prefetch_);
  loader.start(std::move(batches), 0);
  const Shape input = model_.input_shape();
  if (!feed_ && !own_feed_) own_feed_ = std::make_unique<BatchFeed>(be_, input.numel(), batch_);
  BatchFeed& feed = feed_ ? *feed_ : *own_feed_;
  feed.begin(loader);
  const std::int64_t classes = model_.num_classes();
  EvalResult e;
  e.confusion = Confusion(classes);
  if (all_logits) all_logits->assign(static_cast<std::size_t>(test.size() * classes), 0.0f);
  std::vector<std::int32_t> labels;
  std::int64_t counts[2] = {0, 0};  // correct, samples
  while (auto b = feed.take()) {
    const Tensor x =
        Tensor::view(const_cast<float*>(b->images), input.with_batch(b->size), be_.device());
    const Tensor& logits = score_views(x, b->size);
    loss_.score(logits, b->labels);
    feed.prefetch();  // staged while the device computes these logits
    // The predictions, on the host (a few floats per sample), for the confusion matrix.
    const float* host = on_host(logits);
    labels.resize(static_cast<std::size_t>(b->size));
    for (std::int64_t i = 0; i < b->size; ++i)
      labels[static_cast<std::size_t>(i)] =
          test.label(order[static_cast<std::size_t>(counts[1] + i)]);
    e.confusion.add(host, labels.data(), b->size);
    if (all_logits)
      for (std::int64_t i = 0; i < b->size; ++i)
        std::copy_n(host + i * classes, classes,
                    all_logits->data() + order[static_cast<std::size_t>(counts[1] + i)] * classes);
    counts[1] += b->size;
  }
  const auto res = loss_.take();
  double loss = res.loss_sum;
  counts[0] = res.correct;
  if (comm_.size() > 1) {
    comm_.allreduce_sum(std::span<double>(&loss, 1));
    comm_.allreduce_sum(std::span<std::int64_t>(counts, 2));
    // Every rank filled only its own samples' rows (the rest are 0), so the sum is every row.
    if (all_logits) comm_.allreduce_sum(std::span<float>(*all_logits));
  }
  e.confusion.allreduce(comm_);
  e.samples = counts[1];
  if (e.samples > 0) {
    e.loss = loss / static_cast<double>(e.samples);
    e.accuracy = static_cast<double>(counts[0]) / static_cast<double>(e.samples);
  }
  return e;
}

}  // namespace ddp::train
