#pragma once
// Dynamic loss scaling (PyTorch's GradScaler rules): the loss gradient is multiplied by `scale` so
// that small fp16 gradients do not flush to zero; after the all-reduce the gradients are divided by
// it again. A step whose gradients hold an inf or NaN on any rank is skipped (the all-reduced sum
// carries one rank's overflow to every rank, so all ranks decide alike) and halves the scale;
// `growth_interval` good steps in a row double it.
#include <cstdint>
#include <string>

namespace ddp::train {

class LossScaler {
 public:
  LossScaler() = default;  // disabled: scale 1, every step applied
  explicit LossScaler(double initial, double growth = 2.0, double backoff = 0.5,
                      std::int64_t growth_interval = 2000);
  // What the configuration asks for: train.loss_scale > 0 turns it on at that scale on any
  // precision; 0 turns it on for fp16 (whose gradients underflow without it) at 2^16, else off.
  static LossScaler configured(double loss_scale, bool fp16);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  // The outcome of a step: `finite` = no inf/NaN in the (all-reduced) gradients. Returns whether
  // the optimizer step is to be applied, and updates the scale.
  bool update(bool finite);
  // The same for an outcome learnt late (on a GPU, a step after the device acted on it), of a step
  // computed with `scale_used`: when the scale has changed since, the outcome only counts the skip
  // (the scale is not halved twice for two overflowing steps in a row, nor grown).
  bool update_late(bool finite, double scale_used);
  std::int64_t skipped() const { return skipped_; }
  // "loss scale 32768, 3 overflowing step(s) skipped so far"
  std::string summary() const;

  // For snapshots: the scale and the good steps since it last changed.
  std::int64_t good_steps() const { return good_; }
  void restore(double scale, std::int64_t good_steps);

 private:
  bool enabled_ = false;
  double scale_ = 1.0, growth_ = 2.0, backoff_ = 0.5;
  std::int64_t interval_ = 2000, good_ = 0, skipped_ = 0;
};

}  // namespace ddp::train
