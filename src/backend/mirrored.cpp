#include "ddp/backend/mirrored.hpp"

namespace ddp::backend {

Mirrored::Mirrored(Backend& be, std::int64_t count) : be_(&be), device_(be.alloc(Shape{count})) {
  host_ = be.host_addressable() ? device_ : Tensor::zeros(Shape{count});
}

void Mirrored::pull() const {
  if (be_ && !shared())
    be_->download(device_.data(), host_.data(), static_cast<std::size_t>(host_.numel()));
}

void Mirrored::push() const {
  if (be_ && !shared())
    be_->upload(host_.data(), device_.data(), static_cast<std::size_t>(host_.numel()));
}

}  // namespace ddp::backend
