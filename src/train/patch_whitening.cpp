#include "ddp/train/patch_whitening.hpp"

#include <algorithm>
#include <cstdio>
#include <span>
#include <vector>

#include "ddp/data/subset.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/graph.hpp"
#include "ddp/nn/init_whitening.hpp"

// rng.hpp uses unsigned __int128, which -Wpedantic flags; it is a GCC/Clang extension we rely on.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include "ddp/rng.hpp"
#pragma GCC diagnostic pop

namespace ddp::train {
namespace {

// Salt of the sample's seed: another subset than data.train_limit's for the same train.seed.
constexpr std::uint64_t kWhiteningSalt = 0x77686974656e696eULL;  // "whitenin"
constexpr std::int64_t kWhiteningBatch = 256;                    // images staged at a time

bool whitened(const nn::Layer& l) {
  return l.spec().type == "conv2d" && l.spec().init == "patch_whitening";
}

const nn::NamedTensor& weight_of(const nn::Model& model, std::size_t layer) {
  for (const auto& t : model.named_params())
    if (t.layer == layer && t.name == model.layer(layer).name() + ".weight") return t;
  throw Error("internal: layer '" + model.layer(layer).name() + "' has no weight");
}

}  // namespace

bool wants_patch_whitening(const nn::Model& model) {
  for (std::size_t i = 0; i < model.num_layers(); ++i)
    if (whitened(model.layer(i))) return true;
  return false;
}

std::string apply_patch_whitening(nn::Model& model, const data::Dataset& train,
                                  const data::Normalization& norm, const data::Options& data,
                                  const nn::ModelOptions& opt, std::uint64_t seed) {
  if (!wants_patch_whitening(model)) return "";
  const Shape in = model.input_shape();
  const data::SampleSet& set = train.samples();
  const data::Augmentation aug = data::eval_augmentation(data);
  const std::int64_t n =
      opt.whitening_samples > 0 ? std::min(opt.whitening_samples, set.size()) : set.size();
  if (n < 1) throw ConfigError("model.whitening_samples: the training split has no image");
  const std::vector<std::int64_t> chosen =
      data::random_subset(set.size(), n, hash_words(seed, kWhiteningSalt), data::Split::train);

  std::string lines;
  model.pull_state();
  for (std::size_t li = 0; li < model.num_layers(); ++li) {
    const nn::Layer& layer = model.layer(li);
    if (!whitened(layer)) continue;
    const nn::LayerSpec& s = layer.spec();
    const std::string what = "model: layer '" + layer.name() + "' (init = \"patch_whitening\")";
    const auto& inputs = model.layer_inputs(li);
    if (inputs.size() != 1 || inputs[0] != nn::kModelInput)
      throw ConfigError(what + " must read the model input (the images it whitens)");
    if (s.groups != 1 || s.dilation.h != 1 || s.dilation.w != 1)
      throw ConfigError(what + " takes groups = 1 and dilation = 1");
    const std::int64_t c = in[0], kh = s.kernel.h, kw = s.kernel.w, dim = c * kh * kw;
    if (s.out_channels != 2 * dim)
      throw ConfigError(
          what + " needs out_channels = 2 x channels x kernel area = " + std::to_string(2 * dim) +
          " (each eigenvector in both signs), not " + std::to_string(s.out_channels));
    nn::PatchCovariance cov(c, kh, kw);
    std::vector<float> images;
    std::vector<std::int32_t> labels;
    for (std::int64_t first = 0; first < n; first += kWhiteningBatch) {
      const std::int64_t m = std::min(kWhiteningBatch, n - first);
      const std::span<const std::int64_t> idx(chosen.data() + first, static_cast<std::size_t>(m));
      images.resize(static_cast<std::size_t>(m * in.numel()));
      labels.resize(static_cast<std::size_t>(m));
      train.stage(idx);
      struct Release {
        const data::Dataset& ds;
        std::span<const std::int64_t> idx;
        ~Release() { ds.release(idx); }
      } release{train, idx};
      data::fill_batch(set, idx, norm, aug, seed, 0, images.data(), labels.data());
      cov.add(images.data(), m, in[1], in[2]);
    }
    const std::vector<float> w = nn::whitening_filters(cov.covariance(), dim, opt.whitening_eps);
    const nn::NamedTensor& weight = weight_of(model, li);
    if (static_cast<std::size_t>(weight.tensor.numel()) != w.size())
      throw Error("internal: whitening filters of " + std::to_string(w.size()) + " values for " +
                  weight.name);
    std::copy(w.begin(), w.end(), weight.tensor.data());
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "whitening: %s from %lld training images (%lld %lldx%lld patches, eps %g)\n",
                  weight.name.c_str(), static_cast<long long>(n),
                  static_cast<long long>(cov.patches()), static_cast<long long>(kh),
                  static_cast<long long>(kw), opt.whitening_eps);
    lines += buf;
  }
  model.push_state();
  return lines;
}

}  // namespace ddp::train
