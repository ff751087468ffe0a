#include "ddp/train/trace.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"

namespace ddp::train {
namespace {

constexpr std::size_t kFlushBytes = 1u << 20;

std::filesystem::path rank_file(const std::filesystem::path& run_dir, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%04d.json", rank);
  return run_dir / "trace" / name;
}

// A JSON string without quotes or control characters (host names, fixed phase names).
std::string plain(const std::string& s) {
  std::string out;
  for (const char c : s)
    if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) out += c;
  return out;
}

}  // namespace

Trace::Trace(const std::filesystem::path& run_dir, comm::Communicator& comm)
    : run_dir_(run_dir), path_(rank_file(run_dir, comm.rank())), comm_(comm) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::error_code ec;
  std::filesystem::create_directories(path_.parent_path(), ec);
  file_ = ec ? nullptr : std::fopen(path_.c_str(), "wb");
  if (!file_)
    throw SystemError("run.trace: rank " + std::to_string(comm.rank()) + " cannot create " +
                      path_.string() + ": " + (ec ? ec.message() : std::strerror(errno)));
  // The process and thread names the viewers show.
  const int r = comm.rank();
  std::ostringstream meta;
  meta << "[{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << r
       << ", \"args\": {\"name\": \"rank " << r << " (" << plain(host) << ")\"}},\n"
       << "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " << r
       << ", \"args\": {\"sort_index\": " << r << "}},\n"
       << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << r
       << ", \"tid\": 0, \"args\": {\"name\": \"compute\"}}";
  buffer_ = meta.str();
  flush();
  comm_.barrier();
  t0_ = Clock::now();
}

Trace::~Trace() {
  if (file_) {
    flush();
    std::fclose(file_);
  }
}

void Trace::complete(const char* name, int tid, Clock::time_point t0, Clock::time_point t1,
                     std::int64_t step, std::int64_t bucket) {
  using us = std::chrono::duration<double, std::micro>;
  char buf[256];
  const int n =
      std::snprintf(buf, sizeof buf,
                    ",\n{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                    "\"dur\": %.3f, \"args\": {\"step\": %lld",
                    name, comm_.rank(), tid, us(t0 - t0_).count(), us(t1 - t0).count(),
                    static_cast<long long>(step));
  buffer_.append(buf, static_cast<std::size_t>(n));
  if (bucket >= 0) buffer_ += ", \"bucket\": " + std::to_string(bucket);
  buffer_ += "}}";
  if (buffer_.size() >= kFlushBytes) flush();
}

void Trace::all_reduce(std::size_t bucket, Clock::time_point t0, Clock::time_point t1,
                       std::int64_t step) {
  const int tid = 1 + static_cast<int>(bucket);
  for (; named_buckets_ <= bucket; ++named_buckets_)
    buffer_ +=
        ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + std::to_string(comm_.rank()) +
        ", \"tid\": " + std::to_string(1 + named_buckets_) +
        ", \"args\": {\"name\": \"all-reduce bucket " + std::to_string(named_buckets_) + "\"}}";
  complete("all-reduce", tid, t0, t1, step, static_cast<std::int64_t>(bucket));
}

void Trace::flush() {
  if (!file_ || buffer_.empty()) return;
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size() ||
      std::fflush(file_) != 0)
    throw SystemError("writing " + path_.string() + " failed (disk full?)");
  buffer_.clear();
}

void Trace::finish(std::ostream& out) {
  buffer_ += "\n]\n";
  flush();
  std::fclose(file_);
  file_ = nullptr;
  comm_.barrier();  // every rank's file is complete
  if (comm_.rank() != 0) return;
  std::string merged = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  std::vector<int> missing;
  bool first = true;
  for (int r = 0; r < comm_.size(); ++r) {
    std::ifstream in(rank_file(run_dir_, r), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    // The rank's array without its brackets.
    const auto open = s.find('['), close = s.rfind(']');
    if (!in || open == std::string::npos || close == std::string::npos || close < open) {
      missing.push_back(r);
      continue;
    }
    merged += (first ? "" : ",\n") + s.substr(open + 1, close - open - 1);
    first = false;
  }
  merged += "]}\n";
  const auto path = run_dir_ / "trace.json";
  ckpt::write_file_atomically(path, merged);
  out << "trace: " << path.string() << " (" << comm_.size() - std::ssize(missing) << " of "
      << comm_.size() << " rank(s)";
  if (!missing.empty()) {
    out << "; not found here, run.dir is not shared:";
    for (const int r : missing) out << " " << rank_file(run_dir_, r).string();
  }
  out << ")\n";
}

}  // namespace ddp::train
