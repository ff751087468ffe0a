#include "ddp/train/training_data.hpp"

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/data/class_names.hpp"
#include "ddp/data/normalization.hpp"
#include "ddp/data/open_dataset.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/error.hpp"

namespace ddp::train {
namespace {

std::string dims(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t classes) {
  return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) + " in " +
         std::to_string(classes) + " classes";
}

}  // namespace

void check_test_split(const data::Options& d, const data::SampleSet& test, const Shape& input,
                      std::int64_t classes, const std::string& reference) {
  // With data.train_size both splits are resized to it, so only channels and classes must agree.
  const bool sized = data::transform_output_side(d) > 0;
  if (test.channels() != input[0] || test.num_classes() != classes ||
      (!sized && (test.height() != input[1] || test.width() != input[2])))
    throw DataError("data.root = '" + d.root + "' (" + d.dataset +
                    "): the test split's images are " +
                    dims(test.channels(), test.height(), test.width(), test.num_classes()) +
                    " but " + reference + " are " + dims(input[0], input[1], input[2], classes) +
                    ": both splits must have the same channels, size and classes");
}

TrainingData open_training_data(const data::Options& d, std::uint64_t seed,
                                comm::Communicator& comm) {
  TrainingData t;
  // In memory, shared per node or streamed from disk (limits applied): the loader reads each alike.
  t.train =
      data::open_dataset(d, data::Split::train, seed, comm, backend::compute_threads(), t.note);
  t.test = data::open_dataset(d, data::Split::test, seed, comm, backend::compute_threads(), t.note);
  if (d.shuffle_window > 0) t.chunks = t.train->chunk_of_samples();
  // A limited set says which samples it holds (start-up line): a subset of one class would score
  // a fake accuracy.
  for (const data::Dataset* set : {t.train.get(), t.test.get()})
    if (set->samples().size() < set->source_size())
      t.note += "data subset: " + set->samples().origin() + ", " +
                std::to_string(data::classes_present(set->samples())) + " of " +
                std::to_string(set->samples().num_classes()) + " classes present\n";
  const data::SampleSet& train = t.train->samples();
  const std::int64_t side = data::transform_output_side(d);
  t.input =
      Shape{train.channels(), side > 0 ? side : train.height(), side > 0 ? side : train.width()};
  check_test_split(d, t.test->samples(), Shape{train.channels(), train.height(), train.width()},
                   train.num_classes(), "the training split's");
  t.norm = data::make_normalization(d, train.channels(), &train);
  t.class_names = data::class_names(d, train.num_classes());
  return t;
}

}  // namespace ddp::train
