#include "ddp/data/dataset_geometry.hpp"

#include "ddp/data/packed_format.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

Geometry dataset_geometry(const Options& opt) {
  if (opt.dataset == "packed") {
    const auto h = packed::read_header(opt.train_file);
    if (!h.fixed_size())
      throw DataError(opt.train_file +
                      ": its images differ in size; pack it with --size HxW to train on it");
    return {h.channels, h.height, h.width, static_cast<int>(h.classes.size())};
  }
  if (opt.dataset == "mnist" || opt.dataset == "fashion_mnist") return {1, 28, 28, 10};
  return {3, 32, 32, opt.dataset == "cifar100" ? 100 : 10};
}

}  // namespace ddp::data
