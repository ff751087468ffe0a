#pragma once
// Error types. Every error is an exception whose message a user can act on; main() prints it once,
// prefixed with the failing rank, and exits non-zero.
#include <stdexcept>
#include <string>

namespace ddp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad configuration: a config file key, a command-line override or the model it describes.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Bad or missing input data (dataset files).
class DataError : public Error {
 public:
  using Error::Error;
};

// A failure of the system underneath us (MPI, oneDNN, file system, CUDA).
class SystemError : public Error {
 public:
  using Error::Error;
};

}  // namespace ddp
