#pragma once
// Where and how a rank computes (the [runtime] section of the configuration), defined here and
// aggregated by app::Config.
#include <cstdint>
#include <string>

namespace ddp::runtime {

struct Options {
  std::string device = "auto";  // auto | cpu | cuda
  // fp32 | bf16 | fp16: the precision of convolutions and linear layers on GPUs (tensor cores);
  // master weights, activations and everything else stay fp32. fp16 implies dynamic loss scaling.
  std::string precision = "fp32";
  std::int64_t threads = 0;  // compute threads per rank (0 = the cores this rank may use)
};

}  // namespace ddp::runtime
