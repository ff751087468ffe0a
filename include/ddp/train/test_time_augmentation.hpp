#pragma once
// Test-time augmentation (eval.tta): the model scores several views of each test image and the
// logits are averaged as airbench's `infer` averages them (KellerJordan/cifar10-airbench):
//   flip:           0.5 * f(x) + 0.5 * f(mirror(x))
//   flip_translate: 0.5 * flip(x) + 0.5 * mean(flip(shift(x, -s)), flip(shift(x, +s)))
// where shift(x, d) moves the image by d pixels down and right (-s: up and left), reflecting it at
// the borders (a crop of torch's reflect padding), and `flip(v)` is the flip average of view v.
// Views are made on the backend (Backend::image_view); the average is taken on the host in float,
// in this order, so it rounds as torch's expression does.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ddp/shape.hpp"
#include "ddp/train/options.hpp"

namespace ddp::train {

struct TtaView {
  std::int64_t dy = 0, dx = 0;  // the view's pixel (r, c) reads the image's (r + dy, c' + dx)
  bool flip = false;            // c' = width - 1 - c
};

class TestTimeAugmentation {
 public:
  TestTimeAugmentation() = default;  // none: the image alone
  // eval.tta and eval.tta_shift for images of `input` [c, h, w]. ConfigError naming the key when
  // the shift does not fit in the image.
  TestTimeAugmentation(const EvalOptions& eval, const Shape& input);

  const std::string& name() const { return name_; }
  // The views, in the order combine() takes their logits: none: the image; flip: the image, its
  // mirror; flip_translate: those, then (-s, -s), mirrored, (+s, +s), mirrored.
  const std::vector<TtaView>& views() const { return views_; }
  // out[k] = the average of views[v][k] as above (views.size() spans of equal length).
  void combine(std::span<const std::vector<float>> view_logits, std::span<float> out) const;

 private:
  std::string name_ = "none";
  std::vector<TtaView> views_{TtaView{}};
};

}  // namespace ddp::train
