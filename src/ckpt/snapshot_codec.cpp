#include "snapshot_codec.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ddp::ckpt {
namespace {

class Writer {
 public:
  template <typename T>
  requires std::is_arithmetic_v<T>
  void put(T v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void put(const std::string& s) {
    put<std::uint64_t>(s.size());
    out_.append(s);
  }
  template <typename T>
  void put(const std::vector<T>& v) {
    put<std::uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  requires std::is_arithmetic_v<T> T get() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string get_string() {
    const std::size_t n = count(1);
    return std::string(take(n), n);
  }
  template <typename T>
  std::vector<T> get_vector() {
    const std::size_t n = count(sizeof(T));
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));
    return v;
  }
  // A count of elements of `size` bytes that fit in what is left.
  std::size_t count(std::size_t size) {
    const auto n = get<std::uint64_t>();
    if (n > (in_.size() - at_) / size) throw std::runtime_error("snapshot codec: bad length");
    return static_cast<std::size_t>(n);
  }
  bool done() const { return at_ == in_.size(); }

 private:
  const char* take(std::size_t n) {
    if (n > in_.size() - at_) throw std::runtime_error("snapshot codec: short input");
    const char* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  std::string_view in_;
  std::size_t at_ = 0;
};

void put_tensors(Writer& w, const std::map<std::string, std::vector<float>>& tensors) {
  w.put<std::uint64_t>(tensors.size());
  for (const auto& [name, values] : tensors) {
    w.put(name);
    w.put(values);
  }
}

std::map<std::string, std::vector<float>> get_tensors(Reader& r) {
  std::map<std::string, std::vector<float>> out;
  for (std::size_t i = 0, n = r.count(16); i < n; ++i) {
    std::string name = r.get_string();
    out[std::move(name)] = r.get_vector<float>();
  }
  return out;
}

}  // namespace

std::string encode_snapshot(const Snapshot& s) {
  Writer w;
  w.put(s.source.string());
  const SnapshotMeta& m = s.meta;
  const EpochProgress& e = m.epoch_progress;
  for (auto v : {m.position.epoch, m.position.step_in_epoch, m.position.samples_seen,
                 m.position.global_step, m.world_size, m.loss_scale_good_steps, m.format_version,
                 m.global_batch, e.correct, e.samples, e.steps})
    w.put(v);
  w.put(m.seed);
  for (auto v : {m.loss_scale, m.run_train_s, e.loss_sum, e.train_s, e.comm_wait_s}) w.put(v);
  w.put(m.run_id);
  w.put(m.config_toml);
  w.put(m.metrics_jsonl);
  w.put(m.program_version);
  w.put(m.rank_shares);
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
  w.put(s.optimizer_name);
  w.put(s.optimizer_steps);
  return w.take();
}

Snapshot decode_snapshot(std::string_view bytes) {
  Reader r(bytes);
  Snapshot s;
  s.source = r.get_string();
  SnapshotMeta& m = s.meta;
  EpochProgress& e = m.epoch_progress;
  for (auto* v : {&m.position.epoch, &m.position.step_in_epoch, &m.position.samples_seen,
                  &m.position.global_step, &m.world_size, &m.loss_scale_good_steps,
                  &m.format_version, &m.global_batch, &e.correct, &e.samples, &e.steps})
    *v = r.get<std::int64_t>();
  m.seed = r.get<std::uint64_t>();
  for (auto* v : {&m.loss_scale, &m.run_train_s, &e.loss_sum, &e.train_s, &e.comm_wait_s})
    *v = r.get<double>();
  m.run_id = r.get_string();
  m.config_toml = r.get_string();
  m.metrics_jsonl = r.get_string();
  m.program_version = r.get_string();
  m.rank_shares = r.get_vector<std::int64_t>();
  for (std::size_t i = 0, n = r.count(16); i < n; ++i) {
    std::string name = r.get_string();
    s.shapes.emplace_back(std::move(name), r.get_vector<std::int64_t>());
  }
  s.model = get_tensors(r);
  for (std::size_t i = 0, n = r.count(16); i < n; ++i) {
    std::string state = r.get_string();
    s.optimizer[std::move(state)] = get_tensors(r);
  }
  s.optimizer_name = r.get_string();
  s.optimizer_steps = r.get<std::int64_t>();
  if (!r.done()) throw std::runtime_error("snapshot codec: trailing bytes");
  return s;
}

}  // namespace ddp::ckpt
