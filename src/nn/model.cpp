#include "ddp/nn/model.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "ddp/error.hpp"
#include "ddp/nn/batch_stats_reducer.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "ddp/rng.hpp"

namespace ddp::nn {
namespace {

// Each tensor starts on a 64-byte boundary inside the flat buffers (aligned SIMD access; the
// padding is zero in both buffers and stays zero under every optimizer).
constexpr std::size_t kAlign = 16;
std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Lays out specs back to back, returning the total size and each tensor's offset.
std::size_t layout(const std::vector<ParamSpec>& specs, std::vector<std::size_t>& offsets) {
  std::size_t total = 0;
  for (const auto& s : specs) {
    offsets.push_back(total);
    total += align_up(static_cast<std::size_t>(s.shape.numel()));
  }
  return total;
}

}  // namespace

Model::Model(const std::vector<LayerSpec>& specs, const Shape& input, std::int64_t num_classes,
             backend::Backend& be)
    : be_(be), input_(input), num_classes_(num_classes) {
  if (specs.empty()) throw ConfigError("model: no layers");
  Shape shape = input;
  std::vector<std::size_t> param_owner, buffer_owner;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    layers_.push_back(make_layer(specs[i], be));
    shape = layers_.back()->infer(shape);
    out_shapes_.push_back(shape);
    for (auto& p : layers_.back()->param_specs()) {
      param_specs_.push_back(p);
      param_owner.push_back(i);
    }
    for (auto& b : layers_.back()->buffer_specs()) {
      buffer_specs_.push_back(b);
      buffer_owner.push_back(i);
    }
  }
  if (shape != Shape{num_classes}) {
    const auto& last = *layers_.back();
    throw ConfigError("model: the last layer '" + last.name() + "' produces " + shape.str() +
                      " values per sample, but the dataset has " + std::to_string(num_classes) +
                      " classes; end the model with a linear layer of out_features = " +
                      std::to_string(num_classes));
  }

  std::vector<std::size_t> poff, boff;
  const auto nparams = static_cast<std::int64_t>(layout(param_specs_, poff));
  params_ = backend::Mirrored(be_, nparams);
  grads_ = be_.alloc(Shape{nparams});
  buffers_ = backend::Mirrored(be_, static_cast<std::int64_t>(layout(buffer_specs_, boff)));
  const Device dev = be_.device();
  float* const pdev = params_.device().data();
  float* const phost = params_.host().data();
  float* const bdev = buffers_.device().data();
  float* const bhost = buffers_.host().data();

  grad_ranges_.assign(layers_.size(), {0, 0});
  for (std::size_t li = 0; li < layers_.size(); ++li) {
    std::vector<Tensor> p, g, b;
    std::size_t begin = SIZE_MAX, end = 0;
    for (std::size_t j = 0; j < param_specs_.size(); ++j) {
      if (param_owner[j] != li) continue;
      const auto& s = param_specs_[j];
      p.push_back(Tensor::view(pdev + poff[j], s.shape, dev));
      g.push_back(Tensor::view(grads_.data() + poff[j], s.shape, dev));
      named_params_.push_back({layers_[li]->name() + "." + s.name,
                               Tensor::view(phost + poff[j], s.shape), poff[j], li});
      begin = std::min(begin, poff[j]);
      end = std::max(end, poff[j] + align_up(static_cast<std::size_t>(s.shape.numel())));
    }
    for (std::size_t j = 0; j < buffer_specs_.size(); ++j) {
      if (buffer_owner[j] != li) continue;
      const auto& s = buffer_specs_[j];
      b.push_back(Tensor::view(bdev + boff[j], s.shape, dev));
      named_buffers_.push_back({layers_[li]->name() + "." + s.name,
                                Tensor::view(bhost + boff[j], s.shape), boff[j], li});
    }
    if (end > 0) grad_ranges_[li] = {begin, end};
    layers_[li]->bind(p, g, b);
  }
}

std::int64_t Model::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& p : named_params_) n += p.tensor.numel();
  return n;
}

std::pair<std::size_t, std::size_t> Model::grad_range(std::size_t layer) const {
  return grad_ranges_.at(layer);
}

double Model::forward_flops() const {
  double f = 0;
  for (const auto& l : layers_) f += l->forward_flops();
  return f;
}

void Model::init_parameters(std::uint64_t seed) {
  auto init = [&](const std::vector<NamedTensor>& named, const std::vector<ParamSpec>& specs,
                  std::uint64_t salt) {
    for (std::size_t j = 0; j < named.size(); ++j) {
      float* d = named[j].tensor.data();
      const std::int64_t n = named[j].tensor.numel();
      const auto& s = specs[j];
      if (s.init == Init::uniform_fan_in) {
        // PyTorch: kaiming_uniform_(a=sqrt(5)) gives bound gain*sqrt(3/fan_in) = 1/sqrt(fan_in);
        // the bias uses the same bound.
        const double bound = 1.0 / std::sqrt(static_cast<double>(s.fan_in));
        CounterRng rng(hash_words(seed, static_cast<std::uint64_t>(RngStream::init), salt, j));
        for (std::int64_t i = 0; i < n; ++i)
          d[i] = static_cast<float>((2.0 * rng.next_double() - 1.0) * bound);
      } else {
        const float v = s.init == Init::ones ? 1.0f : 0.0f;
        for (std::int64_t i = 0; i < n; ++i) d[i] = v;
      }
    }
  };
  init(named_params_, param_specs_, 0);
  init(named_buffers_, buffer_specs_, 1);
  push_state();
}

void Model::pull_state() const {
  params_.pull();
  buffers_.pull();
}

void Model::push_state() {
  params_.push();
  buffers_.push();
}

void Model::reserve(std::int64_t max_batch) {
  if (max_batch <= max_batch_) return;
  max_batch_ = max_batch;
  acts_.clear();
  dacts_.clear();
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Shape s = out_shapes_[i].with_batch(max_batch);
    if (layers_[i]->is_view()) {
      // Reinterpret the previous layer's buffers (set per call in forward/backward).
      acts_.emplace_back();
      dacts_.emplace_back();
    } else if (runs_in_place(i)) {
      acts_.push_back(acts_[i - 1]);
      dacts_.push_back(dacts_[i - 1]);
    } else {
      acts_.push_back(be_.alloc(s));
      dacts_.push_back(be_.alloc(s));
    }
  }
  views_act_.assign(layers_.size(), Tensor());
}

bool Model::runs_in_place(std::size_t i) const {
  // The layer below must own buffers (not a view, whose buffers belong to a layer further down)
  // and not need its output in backward; the model input is the caller's and is never written.
  return i > 0 && layers_[i]->can_run_in_place() && !layers_[i - 1]->is_view() &&
         !layers_[i - 1]->backward_reads_output();
}

const Tensor& Model::forward(const Tensor& x, const StepContext& ctx) {
  const std::int64_t n = x.shape()[0];
  if (x.shape() != input_.with_batch(n))
    throw Error("internal: model input " + x.shape().str() + " does not match " +
                input_.with_batch(n).str());
  reserve(n);
  input_view_ = x;
  last_n_ = n;
  last_mode_ = ctx.mode;
  const Tensor* prev = &input_view_;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Shape s = out_shapes_[i].with_batch(n);
    if (layers_[i]->is_view()) {
      views_act_[i] = prev->reshaped(s);
    } else {
      views_act_[i] = acts_[i].first(n).reshaped(s);
      layers_[i]->forward(*prev, views_act_[i], ctx);
    }
    prev = &views_act_[i];
  }
  return views_act_.back();
}

void Model::backward(const Tensor& dlogits, const std::function<void(std::size_t)>& on_layer_done) {
  const std::int64_t n = last_n_;
  if (last_mode_ != Mode::train) throw Error("internal: backward after an evaluation forward");
  if (dlogits.shape() != out_shapes_.back().with_batch(n))
    throw Error("internal: dlogits shape " + dlogits.shape().str());
  Tensor dy = dlogits;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const Tensor& x = i == 0 ? input_view_ : views_act_[i - 1];
    if (layers_[i]->is_view()) {
      // Empty below the lowest layer that computes: no input gradient is needed there.
      if (!dy.empty()) dy = dy.reshaped(x.shape());
    } else {
      // Gradient w.r.t. this layer's input lives in the buffer of the nearest non-view layer
      // below; none is needed when only the model input (or a view of it) lies below.
      Tensor dx;
      if (i > 0) {
        std::size_t below = i - 1;
        while (below > 0 && layers_[below]->is_view()) --below;
        if (!layers_[below]->is_view()) dx = dacts_[below].first(n).reshaped(x.shape());
      }
      layers_[i]->backward(x, views_act_[i], dy, dx.empty() ? nullptr : &dx);
      dy = dx;
    }
    if (on_layer_done && grad_ranges_[i].second > 0) on_layer_done(i);
  }
}

void Model::set_batch_stats_reducer(BatchStatsReducer* reducer) {
  for (auto& l : layers_)
    if (auto* u = dynamic_cast<UsesBatchStatsReducer*>(l.get()))
      u->set_batch_stats_reducer(reducer);
}

void Model::step_without_samples(const std::function<void(std::size_t)>& on_layer_done) {
  for (auto& l : layers_)
    if (auto* u = dynamic_cast<UsesBatchStatsReducer*>(l.get())) u->forward_without_samples();
  for (std::size_t i = layers_.size(); i-- > 0;) {
    if (auto* u = dynamic_cast<UsesBatchStatsReducer*>(layers_[i].get()))
      u->backward_without_samples();
    if (on_layer_done && grad_ranges_[i].second > 0) on_layer_done(i);
  }
}

std::uint64_t Model::digest() const {
  pull_state();
  std::uint64_t h = 0x6a09e667f3bcc908ULL;
  for (const Tensor* t : {&params_.host(), &buffers_.host()}) {
    const auto* w = reinterpret_cast<const std::uint32_t*>(t->data());
    for (std::int64_t i = 0; i < t->numel(); ++i) h = mix64(h ^ w[i]);
  }
  return h;
}

std::string Model::summary() const {
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof line, "  %-12s %-10s %-14s %10s\n", "layer", "type", "output",
                "params");
  os << line;
  std::snprintf(line, sizeof line, "  %-12s %-10s %-14s %10s\n", "input", "", input_.str().c_str(),
                "");
  os << line;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    std::int64_t np = 0;
    for (const auto& p : named_params_)
      if (p.layer == i) np += p.tensor.numel();
    std::snprintf(line, sizeof line, "  %-12s %-10s %-14s %10lld\n", layers_[i]->name().c_str(),
                  layers_[i]->spec().type.c_str(), out_shapes_[i].str().c_str(),
                  static_cast<long long>(np));
    os << line;
  }
  os << "  total trainable parameters: " << num_parameters();
  return os.str();
}

}  // namespace ddp::nn
