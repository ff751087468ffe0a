#pragma once
// Typed helpers over the HDF5 C API, shared by the snapshot layout (ckpt) and the packed dataset
// format (data): float32 tensors, scalar attributes, string datasets, group listing. Paths are
// absolute ("/model/conv1/weight"). Every failure throws h5::Failure saying what was being done and
// why; the callers add the file name and choose the error type (SystemError when writing, DataError
// when reading).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddp/h5/handles.hpp"

namespace ddp::h5 {

class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Why the last HDF5 call failed: the operating system's errno text when HDF5 recorded one
// ("No space left on device"), else HDF5's innermost message. Clears the error stack.
std::string last_error();

// Return id / do nothing when the call succeeded; otherwise throw Failure("<what>: <why>").
hid_t check_id(hid_t id, const std::string& what);
void check(herr_t status, const std::string& what);

// Snapshots never go through HDF5's file I/O: it builds them in memory (the core driver, growing
// in steps of `increment` bytes, no backing store) and reads them from a verified in-memory image.
PropList memory_file_access(std::size_t increment);
PropList image_file_access(const void* image, std::size_t size);

// A group that remembers the creation order of its members, so that readers list layers in model
// order rather than alphabetically.
void create_group(hid_t file, const std::string& path);
std::vector<std::string> list_children(hid_t file, const std::string& path);
bool is_group(hid_t file, const std::string& path);

void write_tensor(hid_t file, const std::string& path, const float* data,
                  const std::vector<std::int64_t>& shape);
struct TensorData {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};
// max_bytes bounds the size (from the file size) so a corrupt shape cannot ask for terabytes.
TensorData read_tensor(hid_t file, const std::string& path, std::uint64_t max_bytes);

void write_string(hid_t file, const std::string& path, const std::string& text);
std::string read_string(hid_t file, const std::string& path, std::uint64_t max_bytes);

void set_attr_i64(hid_t file, const std::string& path, const char* name, std::int64_t value);
void set_attr_u64(hid_t file, const std::string& path, const char* name, std::uint64_t value);
void set_attr_string(hid_t file, const std::string& path, const char* name,
                     const std::string& value);
std::int64_t get_attr_i64(hid_t file, const std::string& path, const char* name);
std::uint64_t get_attr_u64(hid_t file, const std::string& path, const char* name);
std::string get_attr_string(hid_t file, const std::string& path, const char* name);
void set_attr_f64(hid_t file, const std::string& path, const char* name, double value);
double get_attr_f64(hid_t file, const std::string& path, const char* name);
bool has_attr(hid_t file, const std::string& path, const char* name);
// A one-dimensional int64 attribute (at least one value).
void set_attr_i64s(hid_t file, const std::string& path, const char* name,
                   const std::vector<std::int64_t>& values);
std::vector<std::int64_t> get_attr_i64s(hid_t file, const std::string& path, const char* name);

}  // namespace ddp::h5
