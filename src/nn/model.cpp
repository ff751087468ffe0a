#include "ddp/nn/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ddp/error.hpp"
#include "ddp/nn/activation_fusion.hpp"
#include "ddp/nn/batch_stats_reducer.hpp"
#include "ddp/nn/graph.hpp"
#include "ddp/nn/init_dirac.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "ddp/nn/layout_plan.hpp"
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
  for (const auto& spec : specs) layers_.push_back(make_layer(spec, be));
  GraphPlan plan = plan_graph(layers_, input);
  plan_layouts(layers_, plan, be.activation_block());
  fuse_activations(layers_, plan);
  std::vector<std::size_t> param_owner, buffer_owner;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    for (auto& p : layers_[i]->param_specs()) {
      param_specs_.push_back(p);
      param_owner.push_back(i);
    }
    for (auto& b : layers_[i]->buffer_specs()) {
      buffer_specs_.push_back(b);
      buffer_owner.push_back(i);
    }
  }
  const Shape shape = plan.out_shapes.back();
  out_shapes_ = plan.out_shapes;
  graph_ = std::make_unique<GraphExecutor>(layers_, std::move(plan), be_);
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
  trained_ranges_.assign(layers_.size(), {});
  for (std::size_t li = 0; li < layers_.size(); ++li)
    if (grad_ranges_[li].second > 0) trained_ranges_[li] = {grad_ranges_[li]};
}

void Model::freeze(const std::vector<bool>& frozen, bool bn_eval) {
  if (frozen.size() != named_params_.size())
    throw Error("internal: freeze flags for " + std::to_string(frozen.size()) + " of " +
                std::to_string(named_params_.size()) + " parameters");
  const std::size_t n = layers_.size();
  std::vector<bool> trains(n, false), has_params(n, false);
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> ranges(n);
  frozen_written_.clear();
  for (std::size_t j = 0; j < named_params_.size(); ++j) {
    const auto& p = named_params_[j];
    has_params[p.layer] = true;
    const std::pair<std::size_t, std::size_t> r{
        p.offset, p.offset + align_up(static_cast<std::size_t>(p.tensor.numel()))};
    if (frozen[j]) continue;
    trains[p.layer] = true;
    auto& rs = ranges[p.layer];
    if (!rs.empty() && rs.back().second == r.first)
      rs.back().second = r.second;
    else
      rs.push_back(r);
  }
  // A layer's backward runs where it trains or something below it does (layers are in
  // topological order); a batch norm that does not train normalises with its running statistics.
  std::vector<bool> eval(n, false), runs(n, false);
  for (std::size_t li = 0; li < n; ++li) {
    runs[li] = trains[li];
    for (int in : layer_inputs(li))
      if (in != kModelInput && runs[static_cast<std::size_t>(in)]) runs[li] = true;
    eval[li] = bn_eval && has_params[li] && !trains[li] && layers_[li]->spec().type == "batchnorm";
    if (eval[li] && runs[li]) {
      // Name a layer below that trains: the first one found going down its inputs.
      std::size_t below = li;
      while (!trains[below])
        for (int in : layer_inputs(below))
          if (in != kModelInput && runs[static_cast<std::size_t>(in)]) {
            below = static_cast<std::size_t>(in);
            break;
          }
      throw ConfigError("train.freeze: batch norm '" + layers_[li]->name() +
                        "' is frozen and so normalises with its running statistics (eval mode), "
                        "but '" +
                        layers_[below]->name() +
                        "' below it trains: its gradient would pass through batch norm in eval "
                        "mode, which is not implemented; freeze the layers below it too, or keep "
                        "frozen batch norm in training mode (train.frozen_bn = \"train\")");
    }
  }
  for (std::size_t j = 0; j < named_params_.size(); ++j)
    if (frozen[j] && runs[named_params_[j].layer])
      frozen_written_.push_back(
          {named_params_[j].offset, static_cast<std::size_t>(named_params_[j].tensor.numel())});
  const bool any = std::find(frozen.begin(), frozen.end(), true) != frozen.end();
  if (!any) {
    frozen_.clear();
    eval_in_training_.clear();
    runs_backward_.clear();
    for (std::size_t li = 0; li < n; ++li)
      trained_ranges_[li] = grad_ranges_[li].second > 0
                                ? std::vector<std::pair<std::size_t, std::size_t>>{grad_ranges_[li]}
                                : std::vector<std::pair<std::size_t, std::size_t>>{};
    graph_->set_frozen({}, {});
    return;
  }
  frozen_ = frozen;
  eval_in_training_ = eval;
  runs_backward_ = runs;
  trained_ranges_ = std::move(ranges);
  graph_->set_frozen(eval_in_training_, runs_backward_);
  // Layers whose backward never runs never write their gradients: they stay 0 from here on.
  be_.fill(grads_.numel(), 0.0f, grads_.data());
}

std::vector<std::pair<std::size_t, std::size_t>> Model::trained_buffer_ranges() const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  const std::size_t total = static_cast<std::size_t>(buffers_.host().numel());
  // Named buffers lie in layer order; each reaches up to the next (padding included).
  for (std::size_t j = 0; j < named_buffers_.size(); ++j) {
    const auto& b = named_buffers_[j];
    if (eval_in_training(b.layer)) continue;
    const std::size_t end = j + 1 < named_buffers_.size() ? named_buffers_[j + 1].offset : total;
    if (!out.empty() && out.back().second == b.offset)
      out.back().second = end;
    else
      out.emplace_back(b.offset, end);
  }
  return out;
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
      CounterRng rng(hash_words(seed, static_cast<std::uint64_t>(RngStream::init), salt, j));
      // PyTorch: kaiming_uniform_(a=sqrt(5)) gives bound gain*sqrt(3/fan_in) = 1/sqrt(fan_in);
      // the bias uses the same bound.
      const auto uniform_fan_in = [&] {
        const double bound = 1.0 / std::sqrt(static_cast<double>(s.fan_in));
        for (std::int64_t i = 0; i < n; ++i)
          d[i] = static_cast<float>((2.0 * rng.next_double() - 1.0) * bound);
      };
      switch (s.init) {
        case Init::uniform_fan_in:
          uniform_fan_in();
          break;
        case Init::dirac:
          dirac_init(d, s.shape, s.groups, named[j].name);
          break;
        case Init::partial_dirac:
          uniform_fan_in();
          partial_dirac_init(d, s.shape, named[j].name);
          break;
        case Init::patch_whitening:
          if (s.shape.rank() != 4)
            throw ConfigError("model: init = \"patch_whitening\" takes a convolution weight; '" +
                              named[j].name + "' is " + s.shape.str());
          uniform_fan_in();  // until the trainer sets it from the data
          break;
        case Init::kaiming_normal_fan_out:
        case Init::normal_001: {
          // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / fan_out).
          const double stddev =
              s.init == Init::normal_001 ? 0.01 : std::sqrt(2.0 / static_cast<double>(s.fan_out));
          for (std::int64_t i = 0; i < n; ++i)
            d[i] = static_cast<float>(stddev * rng.next_normal());
          break;
        }
        case Init::ones:
        case Init::zeros: {
          const float v = s.init == Init::ones ? 1.0f : 0.0f;
          for (std::int64_t i = 0; i < n; ++i) d[i] = v;
          break;
        }
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

Model::~Model() = default;

void Model::reserve(std::int64_t max_batch) {
  graph_->reserve(max_batch);
}

bool Model::runs_in_place(std::size_t i) const {
  return graph_->plan().runs_in_place(i, *layers_[i]);
}

const std::vector<int>& Model::layer_inputs(std::size_t i) const {
  return graph_->plan().inputs.at(i);
}

const Tensor& Model::forward(const Tensor& x, const StepContext& ctx) {
  const std::int64_t n = x.shape()[0];
  if (x.shape() != input_.with_batch(n))
    throw Error("internal: model input " + x.shape().str() + " does not match " +
                input_.with_batch(n).str());
  return graph_->forward(x, ctx);
}

void Model::backward(const Tensor& dlogits, const std::function<void(std::size_t)>& on_layer_done) {
  if (dlogits.shape() != Shape{num_classes_}.with_batch(dlogits.shape()[0]))
    throw Error("internal: dlogits shape " + dlogits.shape().str());
  graph_->backward(dlogits, [&](std::size_t i) {
    if (on_layer_done && grad_ranges_[i].second > 0) on_layer_done(i);
  });
  // Frozen parameters of layers whose backward ran (a gradient passed through them): their
  // gradients are no one's, and the loss scaler's overflow check reads every gradient.
  for (const auto& [offset, count] : frozen_written_)
    be_.fill(static_cast<std::int64_t>(count), 0.0f, grads_.data() + offset);
}

void Model::set_batch_stats_reducer(BatchStatsReducer* reducer) {
  for (auto& l : layers_)
    if (auto* u = dynamic_cast<UsesBatchStatsReducer*>(l.get()))
      u->set_batch_stats_reducer(reducer);
}

void Model::step_without_samples(const std::function<void(std::size_t)>& on_layer_done) {
  // As a forward and backward with samples would: no statistics of layers in eval mode, no
  // backward where none runs.
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (auto* u = dynamic_cast<UsesBatchStatsReducer*>(layers_[i].get()))
      if (!eval_in_training(i)) u->forward_without_samples();
  for (std::size_t i = layers_.size(); i-- > 0;) {
    if (auto* u = dynamic_cast<UsesBatchStatsReducer*>(layers_[i].get()))
      if (runs_backward(i)) u->backward_without_samples();
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
  char line[256];
  // Names as long as torchvision's ("layer4.1.downsample.0") widen the first column.
  int width = 12;
  for (const auto& l : layers_) width = std::max(width, static_cast<int>(l->name().size()));
  width = std::min(width, 64);
  std::snprintf(line, sizeof line, "  %-*s %-14s %-14s %10s\n", width, "layer", "type", "output",
                "params");
  os << line;
  std::snprintf(line, sizeof line, "  %-*s %-14s %-14s %10s\n", width, "input", "",
                input_.str().c_str(), "");
  os << line;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    std::int64_t np = 0;
    for (const auto& p : named_params_)
      if (p.layer == i) np += p.tensor.numel();
    std::snprintf(line, sizeof line, "  %-*s %-14s %-14s %10lld\n", width,
                  layers_[i]->name().c_str(), layers_[i]->spec().type.c_str(),
                  out_shapes_[i].str().c_str(), static_cast<long long>(np));
    os << line;
  }
  os << "  total trainable parameters: " << num_parameters();
  return os.str();
}

}  // namespace ddp::nn
