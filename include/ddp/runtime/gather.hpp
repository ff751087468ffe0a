#pragma once
// Gathering one variable-length record per rank onto every rank: the rank table, and what
// `doctor` learns on each host (interfaces, dataset, devices). Records are built with
// RecordWriter and read back with RecordReader, so no struct layout travels between processes.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
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

// A collective that gathers every rank's `mine` (the same size on all ranks) into `all`, in rank
// order: comm::Communicator::allgather, which waits under the job's timeout and names a rank that
// never arrives. It is passed in, rather than this room calling MPI itself, so that every
// collective from start-up on runs under that timeout (a plain MPI_Allgather waits forever for a
// rank that failed) while runtime still needs nothing from comm.
using AllgatherBytes =
    std::function<void(std::span<const std::byte> mine, std::span<std::byte> all)>;

// Every rank's `mine`, on every rank, index = rank: the lengths first, then the records padded to
// the longest. Collective over the `size` ranks that `allgather` reaches.
std::vector<std::string> allgather_strings(const std::string& mine, int size,
                                           const AllgatherBytes& allgather);

// The same over a communicator (comm::Communicator, or anything with size() and
// allgather(mine, all)).
template <class Comm>
std::vector<std::string> allgather_strings(const std::string& mine, Comm& comm) {
  return allgather_strings(
      mine, comm.size(),
      [&comm](std::span<const std::byte> m, std::span<std::byte> a) { comm.allgather(m, a); });
}

}  // namespace ddp::runtime
