#include "ddp/train/test_time_augmentation.hpp"

#include <algorithm>

#include "ddp/error.hpp"

namespace ddp::train {

TestTimeAugmentation::TestTimeAugmentation(const EvalOptions& eval, const Shape& input)
    : name_(eval.tta) {
  views_ = {TtaView{}};
  if (name_ == "none") return;
  if (name_ != "flip" && name_ != "flip_translate")
    throw ConfigError("eval.tta = '" + name_ + "': unknown (none, flip, flip_translate)");
  views_.push_back({0, 0, true});
  if (name_ == "flip") return;
  const std::int64_t s = eval.tta_shift;
  if (input.rank() != 3 || s < 1 || s >= std::min(input[1], input[2]))
    throw ConfigError("eval.tta_shift = " + std::to_string(s) + " does not fit images of " +
                      input.str() + ": a reflected shift must be at least 1 and smaller than " +
                      "the image's height and width");
  views_.push_back({-s, -s, false});
  views_.push_back({-s, -s, true});
  views_.push_back({s, s, false});
  views_.push_back({s, s, true});
}

void TestTimeAugmentation::combine(std::span<const std::vector<float>> v,
                                   std::span<float> out) const {
  if (v.size() != views_.size())
    throw Error("internal: " + std::to_string(v.size()) + " views' logits for " +
                std::to_string(views_.size()) + " views");
  for (const auto& l : v)
    if (l.size() < out.size()) throw Error("internal: a view's logits are short");
  const std::size_t n = out.size();
  if (views_.size() == 1) {
    std::copy_n(v[0].begin(), n, out.begin());
    return;
  }
  // airbench's infer_mirror: 0.5 * net(x) + 0.5 * net(x.flip(-1)).
  const auto mirror = [&](std::size_t a, std::size_t k) {
    return 0.5f * v[a][k] + 0.5f * v[a + 1][k];
  };
  for (std::size_t k = 0; k < n; ++k) {
    const float m = mirror(0, k);
    if (views_.size() == 2) {
      out[k] = m;
      continue;
    }
    // torch.stack([...]).mean(0) of the two shifted views, then 0.5 * logits + 0.5 * that.
    const float shifted = (mirror(2, k) + mirror(4, k)) / 2.0f;
    out[k] = 0.5f * m + 0.5f * shifted;
  }
}

}  // namespace ddp::train
