#include "packed_h5.hpp"

#include "../file_io.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"

namespace ddp::data::packed::detail {

using data::detail::quoted;

h5::File open_for_reading(const std::filesystem::path& file) {
  data::detail::regular_file_size(file, "a packed dataset file (.h5, made by ddp_train pack)");
  h5::File f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) {
    throw DataError(quoted(file) +
                    ": cannot open it as HDF5 (truncated, corrupt or not an HDF5 file: " +
                    h5::last_error() + "); pack it again with ddp_train pack");
  }
  return f;
}

std::vector<std::uint64_t> dims_of(hid_t f, const std::filesystem::path& file,
                                   const std::string& path) {
  if (H5Lexists(f, path.c_str(), H5P_DEFAULT) <= 0)
    throw DataError(quoted(file) + ": no dataset " + path + "; not a complete packed file");
  h5::Dataset d(H5Dopen2(f, path.c_str(), H5P_DEFAULT));
  h5::Dataspace s(d.valid() ? H5Dget_space(d) : H5I_INVALID_HID);
  const int rank = s.valid() ? H5Sget_simple_extent_ndims(s) : -1;
  if (rank < 1 || rank > 8)
    throw DataError(quoted(file) + ": dataset " + path + " cannot be read (" + h5::last_error() +
                    ")");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(s, dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

void read_rows(hid_t f, const std::filesystem::path& file, const std::string& path, hid_t mem_type,
               std::uint64_t first, std::uint64_t count, void* out) {
  const auto dims = dims_of(f, file, path);
  if (first + count > dims[0])
    throw DataError(quoted(file) + ": dataset " + path + " holds " + std::to_string(dims[0]) +
                    " rows, fewer than the header promises (" + std::to_string(first + count) +
                    ")");
  if (count == 0) return;
  h5::Dataset d(H5Dopen2(f, path.c_str(), H5P_DEFAULT));
  h5::Dataspace fs(H5Dget_space(d));
  std::vector<hsize_t> start(dims.size(), 0), size(dims.begin(), dims.end());
  start[0] = first;
  size[0] = count;
  h5::Dataspace ms(H5Screate_simple(static_cast<int>(size.size()), size.data(), nullptr));
  if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start.data(), nullptr, size.data(), nullptr) < 0 ||
      H5Dread(d, mem_type, ms, fs, H5P_DEFAULT, out) < 0)
    throw DataError(quoted(file) + ": reading rows " + std::to_string(first) + ".." +
                    std::to_string(first + count - 1) + " of " + path + " failed (" +
                    h5::last_error() + "); the file is truncated or corrupt");
}

h5::Datatype vlen_utf8() {
  h5::Datatype t(h5::check_id(H5Tcopy(H5T_C_S1), "creating a string type"));
  h5::check(H5Tset_size(t, H5T_VARIABLE), "sizing a string type");
  h5::check(H5Tset_cset(t, H5T_CSET_UTF8), "setting string encoding");
  return t;
}

}  // namespace ddp::data::packed::detail
