#pragma once
// Shared oneDNN plumbing for the CPU backend: one engine and stream per process, memory helpers.
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

namespace ddp::backend::cpu {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine();
dnnl::stream& stream();

inline dnnl::memory::desc md(dnnl::memory::dims dims, tag t) {
  return {dims, dt::f32, t};
}

// An activation's layout: plain NCHW (block 0) or oneDNN's nChw8c / nChw16c (ConvGeom).
// check_block: Error for a block that is not one of them or does not divide the channels.
void check_block(int block, std::int64_t channels, const char* what);
inline tag activation_tag(int block) {
  return block == 16 ? tag::nChw16c : block == 8 ? tag::nChw8c : tag::nchw;
}

// A memory object whose handle is set per call: our buffers are owned by tensors and the flat
// parameter/gradient buffers, not by oneDNN. Not named bind: with a std::byte* argument, argument-
// dependent lookup found std::bind (a better match, doing nothing) wherever <functional> was seen.
inline dnnl::memory mem(const dnnl::memory::desc& d) {
  return dnnl::memory(d, engine(), DNNL_MEMORY_NONE);
}
inline void set_handle(dnnl::memory& m, const void* p) {
  m.set_data_handle(const_cast<void*>(p));
}

}  // namespace ddp::backend::cpu
