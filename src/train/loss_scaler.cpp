#include "ddp/train/loss_scaler.hpp"

#include <algorithm>
#include <cstdio>

namespace ddp::train {

LossScaler::LossScaler(double initial, double growth, double backoff, std::int64_t growth_interval)
    : enabled_(true),
      scale_(initial),
      growth_(growth),
      backoff_(backoff),
      interval_(growth_interval) {}

LossScaler LossScaler::configured(double loss_scale, bool fp16) {
  if (loss_scale > 0) return LossScaler(loss_scale);
  return fp16 ? LossScaler(65536.0) : LossScaler();
}

bool LossScaler::update(bool finite) {
  if (!enabled_) return true;
  if (!finite) {
    // Never below the smallest normal float: a scale of 0 would hide every gradient.
    scale_ = std::max(scale_ * backoff_, 1.1754943508222875e-38);
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= interval_) {
    // Stays representable as a float (the factor reaches the kernels as one).
    scale_ = std::min(scale_ * growth_, 1.7e38);
    good_ = 0;
  }
  return true;
}

bool LossScaler::update_late(bool finite, double scale_used) {
  if (!enabled_ || scale_used == scale_) return update(finite);
  // Computed with a scale changed since (by an earlier late outcome): an overflow there says
  // nothing new about the current scale, and a good step does not count towards growing it.
  if (!finite) ++skipped_;
  return finite;
}

void LossScaler::restore(double scale, std::int64_t good_steps) {
  scale_ = scale;
  good_ = good_steps;
}

std::string LossScaler::summary() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "loss scale %g, %lld overflowing step(s) skipped so far", scale_,
                static_cast<long long>(skipped_));
  return buf;
}

}  // namespace ddp::train
