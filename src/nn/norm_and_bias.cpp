#include "ddp/nn/norm_and_bias.hpp"

#include <algorithm>
#include <string_view>

namespace ddp::nn {

std::vector<std::pair<std::size_t, std::size_t>> norm_and_bias_ranges(const Model& model) {
  std::vector<NamedTensor> params = model.named_params();
  std::sort(params.begin(), params.end(),
            [](const NamedTensor& a, const NamedTensor& b) { return a.offset < b.offset; });
  const std::size_t total = model.host_params().size();
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const NamedTensor& p = params[i];
    const bool norm = model.layer(p.layer).spec().type == "batchnorm";
    if (!norm && !std::string_view(p.name).ends_with(".bias")) continue;
    const std::size_t end = i + 1 < params.size() ? params[i + 1].offset : total;
    if (!out.empty() && out.back().second == p.offset)
      out.back().second = end;
    else
      out.emplace_back(p.offset, end);
  }
  return out;
}

}  // namespace ddp::nn
