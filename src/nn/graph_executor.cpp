#include "ddp/nn/graph_executor.hpp"

#include <algorithm>

#include "ddp/error.hpp"

namespace ddp::nn {

GraphExecutor::GraphExecutor(const std::vector<std::unique_ptr<Layer>>& layers, GraphPlan plan,
                             backend::Backend& be)
    : layers_(layers), plan_(std::move(plan)), be_(be) {
  plan_gradients();
}

// Decides, once, where every backward writes each input gradient and which gradient buffers share
// memory. Walking the layers back to front: the gradient of a stored output comes to life when the
// first layer reading it writes it (later readers add theirs through a scratch buffer) and dies
// after its producer's backward; a buffer freed by one layer is handed out from the next layer on,
// never to the layer that freed it (it still reads its output gradient while writing the input's).
void GraphExecutor::plan_gradients() {
  const std::size_t n = layers_.size();
  targets_.assign(n, {});
  grad_slot_.assign(n, -1);
  std::vector<std::int64_t> slot_size;  // floats per sample
  std::vector<int> free_slots;
  std::vector<std::int64_t> scratch_size;
  std::vector<bool> started(n, false);

  auto allocate = [&](int root) {
    const std::int64_t need = plan_.out_shapes[static_cast<std::size_t>(root)].numel();
    int best = -1;
    for (int s : free_slots)
      if (slot_size[static_cast<std::size_t>(s)] >= need &&
          (best < 0 ||
           slot_size[static_cast<std::size_t>(s)] < slot_size[static_cast<std::size_t>(best)]))
        best = s;
    if (best >= 0) {
      free_slots.erase(std::find(free_slots.begin(), free_slots.end(), best));
    } else {
      best = static_cast<int>(slot_size.size());
      slot_size.push_back(need);
    }
    grad_slot_[static_cast<std::size_t>(root)] = best;
    started[static_cast<std::size_t>(root)] = true;
  };

  const int last_root = plan_.storage[n - 1];
  if (last_root != kModelInput) allocate(last_root);
  for (std::size_t i = n; i-- > 0;) {
    if (layers_[i]->is_view()) continue;  // shares its input's memory: nothing to compute
    std::size_t scratch_used = 0;
    for (int p : plan_.inputs[i]) {
      GradTarget t;
      t.root = p == kModelInput ? kModelInput : plan_.storage[static_cast<std::size_t>(p)];
      if (t.root != kModelInput) {
        const auto r = static_cast<std::size_t>(t.root);
        if (t.root == plan_.storage[i]) {
          // In place: the input gradient is written over the output gradient.
        } else if (!started[r]) {
          allocate(t.root);
        } else {
          t.scratch = static_cast<int>(scratch_used++);
          if (scratch_size.size() < scratch_used) scratch_size.push_back(0);
          scratch_size[scratch_used - 1] =
              std::max(scratch_size[scratch_used - 1], plan_.out_shapes[r].numel());
        }
      }
      targets_[i].push_back(t);
    }
    if (plan_.owns_storage(i) && grad_slot_[i] >= 0) free_slots.push_back(grad_slot_[i]);
  }
  grad_slots_.assign(slot_size.size(), Tensor());
  scratch_.assign(scratch_size.size(), Tensor());
  slot_floats_ = std::move(slot_size);
  scratch_floats_ = std::move(scratch_size);
}

void GraphExecutor::reserve(std::int64_t max_batch) {
  if (max_batch <= max_batch_) return;
  max_batch_ = max_batch;
  const std::size_t n = layers_.size();
  acts_.assign(n, Tensor());
  for (std::size_t i = 0; i < n; ++i)
    if (plan_.owns_storage(i)) acts_[i] = be_.alloc(plan_.out_shapes[i].with_batch(max_batch));
  for (std::size_t s = 0; s < grad_slots_.size(); ++s)
    grad_slots_[s] = be_.alloc(Shape{slot_floats_[s] * max_batch});
  for (std::size_t s = 0; s < scratch_.size(); ++s)
    scratch_[s] = be_.alloc(Shape{scratch_floats_[s] * max_batch});
  outs_.assign(n, Tensor());
}

std::int64_t GraphExecutor::activation_floats() const {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < acts_.size(); ++i)
    if (plan_.owns_storage(i)) total += acts_[i].numel();  // the others hold no buffer
  return total;
}

std::int64_t GraphExecutor::gradient_floats() const {
  std::int64_t total = 0;
  for (const auto& t : grad_slots_) total += t.numel();
  for (const auto& t : scratch_) total += t.numel();
  return total;
}

Tensor GraphExecutor::output_view(int storage, const Shape& shape, std::int64_t n) const {
  if (storage == kModelInput) return input_.reshaped(shape.with_batch(n));
  return Tensor::view(acts_[static_cast<std::size_t>(storage)].data(), shape.with_batch(n),
                      be_.device());
}

Tensor GraphExecutor::grad_view(int storage, const Shape& shape, std::int64_t n) const {
  const int slot = grad_slot_[static_cast<std::size_t>(storage)];
  return Tensor::view(grad_slots_[static_cast<std::size_t>(slot)].data(), shape.with_batch(n),
                      be_.device());
}

const Tensor& GraphExecutor::forward(const Tensor& x, const StepContext& ctx) {
  const std::int64_t n = x.shape()[0];
  reserve(n);
  input_ = x;
  last_n_ = n;
  last_mode_ = ctx.mode;
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    outs_[i] = output_view(plan_.storage[i], plan_.out_shapes[i], n);
    if (layers_[i]->is_view()) continue;
    xs.clear();
    for (int p : plan_.inputs[i]) xs.push_back(p == kModelInput ? input_ : outs_[p]);
    if (probe_) probe_(LayerPass::forward, i, true);
    if (ctx.mode == Mode::train && !eval_in_training_.empty() && eval_in_training_[i]) {
      StepContext eval = ctx;
      eval.mode = Mode::eval;
      layers_[i]->forward(xs, outs_[i], eval);
    } else {
      layers_[i]->forward(xs, outs_[i], ctx);
    }
    if (probe_) probe_(LayerPass::forward, i, false);
  }
  return outs_.back();
}

void GraphExecutor::set_frozen(std::vector<bool> eval_in_training,
                               std::vector<bool> runs_backward) {
  eval_in_training_ = std::move(eval_in_training);
  runs_backward_ = std::move(runs_backward);
}

void GraphExecutor::backward(const Tensor& dy_last,
                             const std::function<void(std::size_t)>& on_layer_done) {
  if (last_mode_ != Mode::train) throw Error("internal: backward after an evaluation forward");
  const std::int64_t n = last_n_;
  const std::size_t count = layers_.size();
  if (dy_last.shape() != plan_.out_shapes[count - 1].with_batch(n))
    throw Error("internal: output gradient " + dy_last.shape().str() + " for a forward of " +
                plan_.out_shapes[count - 1].with_batch(n).str());
  const int last_root = plan_.storage[count - 1];
  if (last_root != kModelInput) {
    const Tensor dy = grad_view(last_root, plan_.out_shapes[count - 1], n);
    if (dy.data() != dy_last.data()) be_.copy(dy.numel(), dy_last.data(), dy.data());
  }
  std::vector<Tensor> xs, dxs;
  std::vector<const Tensor*> dx_ptrs;
  const auto runs = [&](std::size_t i) { return runs_backward_.empty() || runs_backward_[i]; };
  for (std::size_t i = count; i-- > 0;) {
    if (!layers_[i]->is_view() && runs(i)) {
      const auto& in = plan_.inputs[i];
      xs.clear();
      dxs.assign(in.size(), Tensor());
      dx_ptrs.assign(in.size(), nullptr);
      for (std::size_t k = 0; k < in.size(); ++k) {
        const int p = in[k];
        xs.push_back(p == kModelInput ? input_ : outs_[static_cast<std::size_t>(p)]);
        const GradTarget& t = targets_[i][k];
        if (t.root == kModelInput || !runs(static_cast<std::size_t>(p))) continue;
        dxs[k] = t.scratch >= 0
                     ? Tensor::view(scratch_[static_cast<std::size_t>(t.scratch)].data(),
                                    xs[k].shape(), be_.device())
                     : grad_view(t.root, plan_.out_shapes[static_cast<std::size_t>(p)], n);
        dx_ptrs[k] = &dxs[k];
      }
      const Tensor dy = grad_view(plan_.storage[i], plan_.out_shapes[i], n);
      if (probe_) probe_(LayerPass::backward, i, true);
      layers_[i]->backward(xs, outs_[i], dy, dx_ptrs);
      for (std::size_t k = 0; k < in.size(); ++k) {
        const GradTarget& t = targets_[i][k];
        if (t.scratch < 0 || !dx_ptrs[k]) continue;
        const Tensor sum = grad_view(t.root, plan_.out_shapes[static_cast<std::size_t>(in[k])], n);
        be_.add(dxs[k].numel(), dxs[k].data(), sum.data());
      }
      if (probe_) probe_(LayerPass::backward, i, false);
    }
    if (on_layer_done) on_layer_done(i);
  }
}

}  // namespace ddp::nn
