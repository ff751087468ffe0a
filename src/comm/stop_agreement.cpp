#include "ddp/comm/stop_agreement.hpp"

#include <span>

namespace ddp::comm {

StopAgreement::Verdict StopAgreement::verdict() const {
  return {flags_[0] > 0.0f, static_cast<int>(flags_[1])};
}

StopAgreement::Verdict StopAgreement::step(bool stop, bool nonfinite) {
  if (comm_.size() == 1) {
    flags_[0] = stop ? 1.0f : 0.0f;
    flags_[1] = nonfinite ? 1.0f : 0.0f;
    return verdict();
  }
  if (!request_.empty()) comm_.wait(request_);  // started a step ago
  const Verdict agreed = verdict();
  flags_[0] = stop ? 1.0f : 0.0f;
  flags_[1] = nonfinite ? 1.0f : 0.0f;
  request_ = comm_.iallreduce_sum(std::span<float>(flags_, 2));
  return agreed;
}

StopAgreement::Verdict StopAgreement::finish() {
  if (!request_.empty()) comm_.wait(request_);
  const Verdict agreed = verdict();
  flags_[0] = flags_[1] = 0.0f;
  return agreed;
}

}  // namespace ddp::comm
