#pragma once
// RAII owners for HDF5 ids (file, group, dataset, dataspace, datatype, attribute, property list,
// generic object) and a guard that silences HDF5's own error printing while we work: every failure
// becomes one of our exceptions with a message of our own instead of a stack dump on stderr.
#include <hdf5.h>

#include <utility>

namespace ddp::h5 {

template <herr_t (*Close)(hid_t)>
class Id {
 public:
  Id() = default;
  explicit Id(hid_t id) : id_(id) {}
  Id(Id&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Id& operator=(Id&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() { reset(); }

  // Implicit so that handles pass straight into the C API.
  operator hid_t() const { return id_; }  // NOLINT(google-explicit-constructor)
  bool valid() const { return id_ >= 0; }

  // Closes now and returns the status: closing a file writes its last metadata and can fail (a
  // full disk), which a destructor could not report.
  herr_t close() {
    const herr_t status = id_ >= 0 ? Close(id_) : 0;
    id_ = H5I_INVALID_HID;
    return status;
  }

 private:
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t id_ = H5I_INVALID_HID;
};

using File = Id<H5Fclose>;
using Group = Id<H5Gclose>;
using Dataset = Id<H5Dclose>;
using Dataspace = Id<H5Sclose>;
using Datatype = Id<H5Tclose>;
using Attribute = Id<H5Aclose>;
using PropList = Id<H5Pclose>;
using Object = Id<H5Oclose>;

// Turns off HDF5's automatic error-stack printing for the current thread and restores whatever
// handler was installed before (other rooms may read HDF5 datasets and keep their own setting).
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace ddp::h5
