#include "snapshot_codec.hpp"

#include <cstdint>

#include "byte_codec.hpp"
#include "snapshot_fields.hpp"

namespace ddp::ckpt {
namespace {

void put_tensors(ByteWriter& w, const std::map<std::string, std::vector<float>>& tensors) {
  w.put<std::uint64_t>(tensors.size());
  for (const auto& [name, values] : tensors) {
    w.put(name);
    w.put(values);
  }
}

std::map<std::string, std::vector<float>> get_tensors(ByteReader& r) {
  std::map<std::string, std::vector<float>> out;
  for (std::size_t i = 0, n = r.count(16); i < n; ++i) {
    std::string name = r.get_string();
    out[std::move(name)] = r.get_vector<float>();
  }
  return out;
}

}  // namespace

std::string encode_state(const SnapshotState& s) {
  ByteWriter w;
  encode_fields(w, s);
  return w.take();
}

SnapshotState decode_state(std::string_view bytes) {
  ByteReader r(bytes);
  SnapshotState s;
  decode_fields(r, s);
  if (!r.done()) throw std::runtime_error("snapshot codec: trailing bytes");
  return s;
}

std::string encode_snapshot(const Snapshot& s) {
  ByteWriter w;
  w.put(s.source.string());
  encode_fields(w, s);
  w.put<std::uint64_t>(s.shapes.size());
  for (const auto& [name, shape] : s.shapes) {
    w.put(name);
    w.put(shape);
  }
  put_tensors(w, s.model);
  w.put<std::uint64_t>(s.optimizer.size());
  for (const auto& [state, tensors] : s.optimizer) {
    w.put(state);
    put_tensors(w, tensors);
  }
  put_tensors(w, s.ema);
  return w.take();
}

Snapshot decode_snapshot(std::string_view bytes) {
  ByteReader r(bytes);
  Snapshot s;
  s.source = r.get_string();
  decode_fields(r, s);
  for (std::size_t i = 0, n = r.count(16); i < n; ++i) {
    std::string name = r.get_string();
    s.shapes.emplace_back(std::move(name), r.get_vector<std::int64_t>());
  }
  s.model = get_tensors(r);
  for (std::size_t i = 0, n = r.count(16); i < n; ++i) {
    std::string state = r.get_string();
    s.optimizer[std::move(state)] = get_tensors(r);
  }
  s.ema = get_tensors(r);
  if (!r.done()) throw std::runtime_error("snapshot codec: trailing bytes");
  return s;
}

}  // namespace ddp::ckpt
