#include "ddp/h5/io.hpp"

namespace ddp::h5 {
namespace {

constexpr int kMaxRank = 8;

struct StackText {
  std::string innermost;   // the first record walking upward: where the error was detected
  std::string errno_text;  // "No space left on device", from HDF5's own I/O messages
};

herr_t collect(unsigned n, const H5E_error2_t* err, void* out) {
  auto& text = *static_cast<StackText*>(out);
  const std::string desc = err->desc ? err->desc : "";
  if (n == 0) text.innermost = desc;
  // HDF5's POSIX driver records "..., errno = 28, error message = 'No space left on device', ...".
  const std::string key = "error message = '";
  if (const auto at = desc.find(key); text.errno_text.empty() && at != std::string::npos) {
    const auto begin = at + key.size();
    const auto end = desc.find('\'', begin);
    if (end != std::string::npos) text.errno_text = desc.substr(begin, end - begin);
  }
  return 0;
}

Dataspace scalar_space() {
  return Dataspace(check_id(H5Screate(H5S_SCALAR), "creating a dataspace"));
}

// A fixed-length, NUL-terminated UTF-8 string type holding text (h5dump prints it as text).
Datatype string_type(const std::string& text) {
  Datatype t(check_id(H5Tcopy(H5T_C_S1), "creating a string type"));
  check(H5Tset_size(t, text.size() + 1), "sizing a string type");
  check(H5Tset_strpad(t, H5T_STR_NULLTERM), "setting string padding");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "setting string encoding");
  return t;
}

// Reads a fixed-length string through type t, read(mem_type, buffer) doing the actual read.
template <typename Read>
std::string read_fixed_string(hid_t type, const std::string& what, std::uint64_t max_bytes,
                              Read read) {
  if (H5Tget_class(type) != H5T_STRING) throw Failure(what + ": not a string");
  if (H5Tis_variable_str(type) > 0) throw Failure(what + ": variable-length strings are not used");
  const std::size_t size = H5Tget_size(type);
  if (size == 0 || size > max_bytes + 1) throw Failure(what + ": implausible string size");
  std::string buf(size + 1, '\0');  // one spare NUL for NULLPAD/SPACEPAD strings
  check(read(type, buf.data()), "reading " + what);
  buf.resize(buf.find('\0'));
  return buf;
}

void write_attr(hid_t file, const std::string& path, const char* name, hid_t file_type,
                hid_t mem_type, const void* value) {
  const std::string what = "attribute " + path + " " + name;
  Object obj(check_id(H5Oopen(file, path.c_str(), H5P_DEFAULT), "opening " + path));
  const Dataspace space = scalar_space();
  Attribute a(check_id(H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT),
                       "creating " + what));
  check(H5Awrite(a, mem_type, value), "writing " + what);
}

// Reads a single attribute of type class `cls` (H5T_INTEGER, H5T_FLOAT) into *out through mem_type
// (HDF5 converts between widths).
void read_scalar_attr(hid_t file, const std::string& path, const char* name, H5T_class_t cls,
                      hid_t mem_type, void* out) {
  const std::string what = "attribute " + path + " " + name;
  // Through the object, which stays open while the attribute is in use.
  Object obj(check_id(H5Oopen(file, path.c_str(), H5P_DEFAULT), "opening " + path));
  Attribute a(check_id(H5Aopen(obj, name, H5P_DEFAULT), "opening " + what));
  Datatype t(check_id(H5Aget_type(a), "reading the type of " + what));
  if (H5Tget_class(t) != cls)
    throw Failure(what +
                  (cls == H5T_INTEGER ? ": not an integer" : ": not a floating-point number"));
  Dataspace s(check_id(H5Aget_space(a), "reading the shape of " + what));
  if (H5Sget_simple_extent_npoints(s) != 1) throw Failure(what + ": not a single value");
  check(H5Aread(a, mem_type, out), "reading " + what);
}

}  // namespace

std::string last_error() {
  StackText text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &text);
  H5Eclear2(H5E_DEFAULT);
  if (!text.errno_text.empty()) return text.errno_text;
  return text.innermost.empty() ? "unknown HDF5 error" : text.innermost;
}

hid_t check_id(hid_t id, const std::string& what) {
  if (id < 0) throw Failure(what + ": " + last_error());
  return id;
}

void check(herr_t status, const std::string& what) {
  if (status < 0) throw Failure(what + ": " + last_error());
}

PropList memory_file_access(std::size_t increment) {
  PropList fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "creating file access properties"));
  // Closing the file closes everything in it: no id can outlive it by mistake.
  check(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "setting the close degree");
  check(H5Pset_fapl_core(fapl, increment, false), "selecting the in-memory file driver");
  return fapl;
}

PropList image_file_access(const void* image, std::size_t size) {
  PropList fapl = memory_file_access(size);
  // HDF5 copies the image (its API is not const-correct).
  check(H5Pset_file_image(fapl, const_cast<void*>(image), size), "handing over the file image");
  return fapl;
}

void create_group(hid_t file, const std::string& path) {
  PropList gcpl(check_id(H5Pcreate(H5P_GROUP_CREATE), "creating group properties"));
  check(H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        "tracking creation order");
  Group g(check_id(H5Gcreate2(file, path.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT),
                   "creating group " + path));
}

std::vector<std::string> list_children(hid_t file, const std::string& path) {
  Group g(check_id(H5Gopen2(file, path.c_str(), H5P_DEFAULT), "opening group " + path));
  H5G_info_t info;
  check(H5Gget_info(g, &info), "listing group " + path);
  // Creation order where the writer tracked it (ours does), else alphabetical.
  PropList gcpl(check_id(H5Gget_create_plist(g), "reading properties of " + path));
  unsigned order = 0;
  check(H5Pget_link_creation_order(gcpl, &order), "reading properties of " + path);
  const H5_index_t index = (order & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(g, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n < 0) throw Failure("listing group " + path + ": " + last_error());
    std::string name(static_cast<std::size_t>(n) + 1, '\0');
    if (H5Lget_name_by_idx(g, ".", index, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT) <
        0)
      throw Failure("listing group " + path + ": " + last_error());
    name.resize(static_cast<std::size_t>(n));
    names.push_back(std::move(name));
  }
  return names;
}

bool is_group(hid_t file, const std::string& path) {
  Object obj(check_id(H5Oopen(file, path.c_str(), H5P_DEFAULT), "opening " + path));
  return H5Iget_type(obj) == H5I_GROUP;
}

void write_tensor(hid_t file, const std::string& path, const float* data,
                  const std::vector<std::int64_t>& shape) {
  std::vector<hsize_t> dims;
  std::size_t numel = 1;
  for (auto d : shape) {
    dims.push_back(static_cast<hsize_t>(d));
    numel *= static_cast<std::size_t>(d);
  }
  Dataspace space(
      check_id(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               "creating the dataspace of " + path));
  // Contiguous layout (the default): see docs/snapshot_format.md for why no chunks/compression.
  Dataset ds(check_id(
      H5Dcreate2(file, path.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      "creating dataset " + path));
  if (numel > 0)
    check(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "writing " + path);
}

TensorData read_tensor(hid_t file, const std::string& path, std::uint64_t max_bytes) {
  Dataset ds(check_id(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening dataset " + path));
  Datatype type(check_id(H5Dget_type(ds), "reading the type of " + path));
  if (H5Tget_class(type) != H5T_FLOAT) throw Failure(path + ": not a floating-point dataset");
  Dataspace space(check_id(H5Dget_space(ds), "reading the shape of " + path));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > kMaxRank) throw Failure(path + ": implausible rank");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) check(H5Sget_simple_extent_dims(space, dims.data(), nullptr), "shape of " + path);
  TensorData out;
  std::uint64_t numel = H5Sget_simple_extent_type(space) == H5S_NULL ? 0 : 1;
  const std::uint64_t limit = max_bytes / sizeof(float);
  for (hsize_t d : dims) {
    out.shape.push_back(static_cast<std::int64_t>(d));
    if (d != 0 && numel > limit / d) throw Failure(path + ": shape larger than the file");
    numel *= d;
  }
  out.values.resize(static_cast<std::size_t>(numel));
  if (numel > 0)
    check(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.values.data()),
          "reading " + path);
  return out;
}

void write_string(hid_t file, const std::string& path, const std::string& text) {
  const Datatype type = string_type(text);
  const Dataspace space = scalar_space();
  Dataset ds(
      check_id(H5Dcreate2(file, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               "creating dataset " + path));
  check(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.c_str()), "writing " + path);
}

std::string read_string(hid_t file, const std::string& path, std::uint64_t max_bytes) {
  Dataset ds(check_id(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening dataset " + path));
  Datatype type(check_id(H5Dget_type(ds), "reading the type of " + path));
  Dataspace space(check_id(H5Dget_space(ds), "reading the shape of " + path));
  if (H5Sget_simple_extent_npoints(space) != 1) throw Failure(path + ": not a single string");
  return read_fixed_string(type, path, max_bytes, [&](hid_t mem, char* buf) {
    return H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  });
}

void set_attr_i64(hid_t file, const std::string& path, const char* name, std::int64_t value) {
  write_attr(file, path, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void set_attr_u64(hid_t file, const std::string& path, const char* name, std::uint64_t value) {
  write_attr(file, path, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
}

void set_attr_string(hid_t file, const std::string& path, const char* name,
                     const std::string& value) {
  const Datatype type = string_type(value);
  write_attr(file, path, name, type, type, value.c_str());
}

std::int64_t get_attr_i64(hid_t file, const std::string& path, const char* name) {
  std::int64_t v = 0;
  read_scalar_attr(file, path, name, H5T_INTEGER, H5T_NATIVE_INT64, &v);
  return v;
}

std::uint64_t get_attr_u64(hid_t file, const std::string& path, const char* name) {
  std::uint64_t v = 0;
  read_scalar_attr(file, path, name, H5T_INTEGER, H5T_NATIVE_UINT64, &v);
  return v;
}

void set_attr_f64(hid_t file, const std::string& path, const char* name, double value) {
  write_attr(file, path, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

double get_attr_f64(hid_t file, const std::string& path, const char* name) {
  double v = 0;
  read_scalar_attr(file, path, name, H5T_FLOAT, H5T_NATIVE_DOUBLE, &v);
  return v;
}

void set_attr_i64s(hid_t file, const std::string& path, const char* name,
                   const std::vector<std::int64_t>& values) {
  const std::string what = "attribute " + path + " " + name;
  if (values.empty()) throw Failure(what + ": no values");
  Object obj(check_id(H5Oopen(file, path.c_str(), H5P_DEFAULT), "opening " + path));
  const hsize_t n = values.size();
  Dataspace space(check_id(H5Screate_simple(1, &n, nullptr), "creating the dataspace of " + what));
  Attribute a(check_id(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT),
                       "creating " + what));
  check(H5Awrite(a, H5T_NATIVE_INT64, values.data()), "writing " + what);
}

std::vector<std::int64_t> get_attr_i64s(hid_t file, const std::string& path, const char* name) {
  const std::string what = "attribute " + path + " " + name;
  Object obj(check_id(H5Oopen(file, path.c_str(), H5P_DEFAULT), "opening " + path));
  Attribute a(check_id(H5Aopen(obj, name, H5P_DEFAULT), "opening " + what));
  Datatype t(check_id(H5Aget_type(a), "reading the type of " + what));
  if (H5Tget_class(t) != H5T_INTEGER) throw Failure(what + ": not integers");
  Dataspace s(check_id(H5Aget_space(a), "reading the shape of " + what));
  const hssize_t n = H5Sget_simple_extent_npoints(s);
  // Attributes live in the object header (64 KiB at most): a corrupt count cannot ask for more.
  if (n < 1 || n > (1 << 13)) throw Failure(what + ": implausible length");
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  check(H5Aread(a, H5T_NATIVE_INT64, out.data()), "reading " + what);
  return out;
}

bool has_attr(hid_t file, const std::string& path, const char* name) {
  const htri_t r = H5Aexists_by_name(file, path.c_str(), name, H5P_DEFAULT);
  if (r < 0) throw Failure("looking for attribute " + path + " " + name + ": " + last_error());
  return r > 0;
}

std::string get_attr_string(hid_t file, const std::string& path, const char* name) {
  const std::string what = "attribute " + path + " " + name;
  // Through the object, which stays open while the attribute is in use.
  Object obj(check_id(H5Oopen(file, path.c_str(), H5P_DEFAULT), "opening " + path));
  Attribute a(check_id(H5Aopen(obj, name, H5P_DEFAULT), "opening " + what));
  Datatype type(check_id(H5Aget_type(a), "reading the type of " + what));
  // Attributes live in the object header: 64 KiB is HDF5's own limit for compact storage.
  return read_fixed_string(type, what, std::uint64_t{1} << 16,
                           [&](hid_t mem, char* buf) { return H5Aread(a, mem, buf); });
}

}  // namespace ddp::h5
