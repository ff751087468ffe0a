#pragma once
// Gathering one variable-length record per rank onto every rank: the rank table, and what
// `doctor` learns on each host (interfaces, dataset, devices). Records are built with
// RecordWriter and read back with RecordReader, so no struct layout travels between processes.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddp::runtime {

// Appends fixed-size little-endian fields and length-prefixed strings to a byte string.
class RecordWriter {
 public:
  RecordWriter& put(std::int64_t v);
  RecordWriter& put(double v);
  RecordWriter& put(const std::string& s);
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

// Reads what a RecordWriter wrote, in the same order. A record shorter than what is read is a
// ddp::SystemError ("a rank sent a truncated record").
class RecordReader {
 public:
  explicit RecordReader(const std::string& bytes) : p_(bytes.data()), end_(p_ + bytes.size()) {}
  std::int64_t get_int();
  double get_double();
  std::string get_str();

 private:
  void need(std::size_t n) const;
  const char* p_;
  const char* end_;
};

// Every rank's `mine`, on every rank, index = rank (MPI_Allgather of the lengths, then
// MPI_Allgatherv). Collective over `comm`. MPI failures are ddp::SystemError.
std::vector<std::string> allgather_strings(const std::string& mine, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace ddp::runtime
