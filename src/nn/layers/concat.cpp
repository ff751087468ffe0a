// Concatenation along channels (images: C x H x W with equal H and W; vectors: features).
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/onnx_layer.hpp"
#include "layer_util.hpp"

namespace ddp::nn {
namespace {

class Concat final : public Layer {
 public:
  Concat(const LayerSpec& spec, backend::Backend& be) : Layer(spec), be_(be) {}
  std::size_t min_inputs() const override { return 2; }
  std::size_t max_inputs() const override { return SIZE_MAX; }

  Shape infer(std::span<const Shape> in) override {
    const Shape& first = in[0];
    if (first.rank() != 3 && first.rank() != 1)
      inputs_error(*this, in, "concat takes images (channels x height x width) or vectors");
    std::int64_t channels = 0;
    per_channel_ = first.numel() / first[0];
    rows_.clear();
    for (const Shape& s : in) {
      bool same = s.rank() == first.rank();
      for (std::size_t d = 1; same && d < s.rank(); ++d) same = s[d] == first[d];
      if (!same)
        inputs_error(*this, in, "concat needs inputs that differ only in their channel count");
      channels += s[0];
      rows_.push_back(s.numel());
    }
    auto dims = first.dims();
    dims[0] = channels;
    out_row_ = channels * per_channel_;
    return Shape(dims);
  }
  void forward(std::span<const Tensor> xs, const Tensor& y, const StepContext&) override {
    const std::int64_t n = y.shape()[0];
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      be_.copy_rows(n, rows_[k], xs[k].data(), rows_[k], y.data() + offset, out_row_);
      offset += rows_[k];
    }
  }
  void backward(std::span<const Tensor>, const Tensor&, const Tensor& dy,
                std::span<const Tensor* const> dxs) override {
    const std::int64_t n = dy.shape()[0];
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < dxs.size(); ++k) {
      if (dxs[k])
        be_.copy_rows(n, rows_[k], dy.data() + offset, out_row_, dxs[k]->data(), rows_[k]);
      offset += rows_[k];
    }
  }
  bool backward_reads_output() const override { return false; }

 private:
  backend::Backend& be_;
  std::int64_t per_channel_ = 1, out_row_ = 0;
  std::vector<std::int64_t> rows_;  // floats per sample of each input
};

void to_onnx(OnnxLayer& g) {
  g.node("Concat", g.inputs(), g.output(), {{"axis", std::int64_t{1}}});
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_concat() {
  return {{.type = "concat",
           .family = "concat",
           .doc = "concatenation along channels of two or more inputs (inputs = [...])",
           .order = 810,
           .make = make_layer_of<Concat>,
           .onnx = to_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
