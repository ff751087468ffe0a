#pragma once
// Values as a flat byte string and back, for the snapshot codec and the field table's encoding.
// Both ends are the same program (a child process and its parent, or the ranks of one job), so
// values travel in native byte order; reading checks every length against what is left.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ddp::ckpt {

class ByteWriter {
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

// Throws std::runtime_error("snapshot codec: ...") on input that put() did not write.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
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

}  // namespace ddp::ckpt
