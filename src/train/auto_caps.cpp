#include "ddp/train/auto_caps.hpp"

#include <span>

#include "ddp/nn/memory_estimate.hpp"

namespace ddp::train {

std::vector<std::int64_t> gather_auto_caps(const BatchPlan& plan, backend::Backend& be,
                                           nn::Model& model,
                                           const std::vector<nn::LayerSpec>& layers,
                                           comm::Communicator& comm, std::ostream& out) {
  std::vector<std::int64_t> caps = plan.caps();
  const auto rank = static_cast<std::size_t>(comm.rank());
  if (be.device() != Device::cpu) {
    const Shape input = model.input_shape();
    DeviceMemoryFigures m;
    m.rank = comm.rank();
    m.free_bytes = static_cast<double>(be.free_memory_bytes());
    m.activations_per_sample = nn::estimate_memory(layers, input, be).activations_per_sample();
    m.classes = model.num_classes();
    m.sample_floats = input.numel();
    m.rank_batch = plan.rank_batch();
    m.gradient_floats = static_cast<std::int64_t>(model.grads().size());
    caps[rank] = auto_micro_batch_cap(m);
  }
  if (comm.size() > 1) {
    const std::int64_t mine = caps[rank];
    comm.allgather(std::as_bytes(std::span<const std::int64_t>(&mine, 1)),
                   std::as_writable_bytes(std::span<std::int64_t>(caps)));
  }
  if (be.device() != Device::cpu) {
    out << "train.max_micro_batch = auto: micro-batches of at most ";
    for (std::size_t r = 0; r < caps.size(); ++r) out << (r ? ", " : "") << caps[r];
    out << " sample(s) (rank 0 first)\n";
  }
  return caps;
}

}  // namespace ddp::train
