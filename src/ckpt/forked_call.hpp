#pragma once
// Runs a piece of work in a forked child process and brings its result back through a pipe, so
// that a crash or a hang in it (HDF5 parsing an unverified, possibly corrupt file) cannot take the
// calling process down. The child does only the work, writes the answer and leaves with _exit: no
// MPI, no CUDA, no atexit handlers, no threads of its own (a fork copies only the calling thread,
// so the work must not need locks other threads may hold: HDF5 is used by one thread only). It
// ignores the stop signals (the parent handles them) and dies with the parent.
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

namespace ddp::ckpt {

class ForkedCallFailure : public std::runtime_error {
 public:
  enum class Kind {
    kThrew,       // the work threw: what() is the exception's message
    kDied,        // killed by a signal: "crashed (signal 11, Segmentation fault)", or no answer
    kTimedOut,    // ran past the time limit and was killed: "did not finish within 30 s"
    kNotStarted,  // fork or pipe failed: "cannot start a child process: ..."
  };
  ForkedCallFailure(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// The string work() returned in the child. Throws ForkedCallFailure otherwise.
std::string call_in_child(const std::function<std::string()>& work,
                          std::chrono::seconds time_limit);

}  // namespace ddp::ckpt
