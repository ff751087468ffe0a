#include "ddp/nn/layout_plan.hpp"

#include <numeric>

namespace ddp::nn {
namespace {

struct Groups {
  std::vector<std::size_t> parent;
  explicit Groups(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  std::size_t find(std::size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(std::size_t a, std::size_t b) { parent[find(a)] = find(b); }
};

}  // namespace

std::vector<int> plan_layouts(const std::vector<std::unique_ptr<Layer>>& layers,
                              const GraphPlan& plan, int block) {
  const std::size_t n = layers.size();
  std::vector<int> blocks(n, 0);
  if (block <= 0 || n == 0) return blocks;

  // Activation i is layer i's output. Layers that keep their input's layout join their output's
  // group with their inputs'.
  Groups groups(n);
  std::vector<bool> plain(n, false);  // indexed by activation; resolved per group below
  for (std::size_t i = 0; i < n; ++i) {
    const LayoutUse use = layers[i]->layout_use();
    const bool keeps = use == LayoutUse::elementwise || use == LayoutUse::same;
    if (use == LayoutUse::plain) plain[i] = true;  // it writes plain
    const Shape& s = plan.out_shapes[i];
    if (s.rank() != 3 || s[0] % block != 0) plain[i] = true;
    for (const int p : plan.inputs[i]) {
      if (p == kModelInput) {
        if (keeps) plain[i] = true;  // the model input is the caller's, plain
        continue;
      }
      const auto pi = static_cast<std::size_t>(p);
      if (use == LayoutUse::plain) plain[pi] = true;  // it reads plain
      if (keeps) groups.join(i, pi);
    }
  }
  plain[n - 1] = true;  // the logits, read by the loss

  std::vector<bool> group_plain(n, false);
  for (std::size_t i = 0; i < n; ++i)
    if (plain[i]) group_plain[groups.find(i)] = true;
  for (std::size_t i = 0; i < n; ++i) blocks[i] = group_plain[groups.find(i)] ? 0 : block;

  for (std::size_t i = 0; i < n; ++i) {
    const LayoutUse use = layers[i]->layout_use();
    if (use != LayoutUse::same && use != LayoutUse::independent) continue;
    const int p = plan.inputs[i][0];
    const int in = p == kModelInput ? 0 : blocks[static_cast<std::size_t>(p)];
    layers[i]->set_layouts(in, blocks[i]);  // plain too: a layer planned before forgets it
  }
  return blocks;
}

}  // namespace ddp::nn
