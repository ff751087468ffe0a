#include "ddp/runtime/gather.hpp"

#include <cstring>

#include "ddp/error.hpp"

namespace ddp::runtime {
namespace {

template <class T>
void append(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw SystemError(std::string(what) +
                    " failed: " + std::string(msg, static_cast<std::size_t>(len)));
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

std::vector<std::string> allgather_strings(const std::string& mine, MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size)), offsets(lens.size());
  check_mpi(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm), "MPI_Allgather");
  int total = 0;
  for (std::size_t i = 0; i < lens.size(); ++i) {
    offsets[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  check_mpi(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(),
                           MPI_CHAR, comm),
            "MPI_Allgatherv");
  std::vector<std::string> out;
  out.reserve(lens.size());
  for (std::size_t i = 0; i < lens.size(); ++i)
    out.push_back(
        all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lens[i])));
  return out;
}

}  // namespace ddp::runtime
