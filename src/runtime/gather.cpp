#include "ddp/runtime/gather.hpp"

#include <algorithm>
#include <cstring>

#include "ddp/error.hpp"

namespace ddp::runtime {
namespace {

template <class T>
void append(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

RecordWriter& RecordWriter::put(std::int64_t v) {
  append(out_, v);
  return *this;
}
RecordWriter& RecordWriter::put(double v) {
  append(out_, v);
  return *this;
}
RecordWriter& RecordWriter::put(const std::string& s) {
  put(static_cast<std::int64_t>(s.size()));
  out_ += s;
  return *this;
}

void RecordReader::need(std::size_t n) const {
  if (static_cast<std::size_t>(end_ - p_) < n)
    throw SystemError("gathering per-rank records: a rank sent a truncated record");
}
std::int64_t RecordReader::get_int() {
  std::int64_t v = 0;
  need(sizeof v);
  std::memcpy(&v, p_, sizeof v);
  p_ += sizeof v;
  return v;
}
double RecordReader::get_double() {
  double v = 0;
  need(sizeof v);
  std::memcpy(&v, p_, sizeof v);
  p_ += sizeof v;
  return v;
}
std::string RecordReader::get_str() {
  const auto n = get_int();
  if (n < 0) throw SystemError("gathering per-rank records: a rank sent a negative length");
  need(static_cast<std::size_t>(n));
  std::string s(p_, static_cast<std::size_t>(n));
  p_ += n;
  return s;
}

std::vector<std::string> allgather_strings(const std::string& mine, int size,
                                           const AllgatherBytes& allgather) {
  const auto n = static_cast<std::size_t>(size);
  std::vector<std::int64_t> lens(n);
  const auto len = static_cast<std::int64_t>(mine.size());
  allgather(std::as_bytes(std::span(&len, 1)), std::as_writable_bytes(std::span(lens)));
  std::int64_t longest = 0;
  for (const auto l : lens) {
    if (l < 0) throw SystemError("gathering per-rank records: a rank sent a negative length");
    longest = std::max(longest, l);
  }
  // Same-size pieces (the collective needs them): each record padded to the longest.
  const auto width = static_cast<std::size_t>(longest);
  if (width == 0) return std::vector<std::string>(n);  // every rank sees the same lengths
  std::string padded = mine;
  padded.resize(width, '\0');
  std::string all(width * n, '\0');
  allgather(std::as_bytes(std::span(padded.data(), padded.size())),
            std::as_writable_bytes(std::span(all.data(), all.size())));
  std::vector<std::string> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(all.substr(i * width, static_cast<std::size_t>(lens[i])));
  return out;
}

}  // namespace ddp::runtime
