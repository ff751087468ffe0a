#include "ddp/data/npy_file.hpp"

#include <cstring>
#include <filesystem>
#include <limits>

#include "../file_io.hpp"
#include "ddp/data/pack_source.hpp"
#include "ddp/data/sample_set.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

// The text after `'key':` (skipping spaces), or npos.
std::size_t value_of(const std::string& dict, const std::string& key) {
  const auto at = dict.find("'" + key + "'");
  if (at == std::string::npos) return at;
  auto colon = dict.find(':', at);
  if (colon == std::string::npos) return colon;
  ++colon;
  while (colon < dict.size() && dict[colon] == ' ') ++colon;
  return colon;
}

}  // namespace

std::int64_t NpyHeader::elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

NpyHeader parse_npy_header(std::span<const std::uint8_t> b, const std::string& name) {
  const auto bad = [&](const std::string& what) {
    return DataError(name + ": " + what + "; expected a NumPy .npy file (numpy.save)");
  };
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    throw bad("no .npy magic (\\x93NUMPY)");
  const int major = b[6];
  std::size_t len = 0, start = 0;
  if (major == 1) {
    len = b[8] | std::size_t{b[9]} << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw bad("truncated header");
    len = b[8] | std::size_t{b[9]} << 8 | std::size_t{b[10]} << 16 | std::size_t{b[11]} << 24;
    start = 12;
  } else {
    throw bad("unknown .npy format version " + std::to_string(major));
  }
  if (b.size() < start + len) throw bad("truncated header");
  const std::string dict(reinterpret_cast<const char*>(b.data() + start), len);
  NpyHeader h;
  h.data_offset = start + len;

  auto at = value_of(dict, "descr");
  if (at == std::string::npos || at >= dict.size() || (dict[at] != '\'' && dict[at] != '"'))
    throw bad("no 'descr' string in the header");
  const auto close = dict.find(dict[at], at + 1);
  const std::string descr = dict.substr(at + 1, close - at - 1);
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '>' && descr[0] != '|'))
    throw bad("dtype '" + descr + "' is not a simple numeric type");
  h.big_endian = descr[0] == '>';
  h.kind = descr[1];
  try {
    h.item_bytes = std::stoi(descr.substr(2));
  } catch (const std::exception&) {
    throw bad("dtype '" + descr + "' is not a simple numeric type");
  }

  at = value_of(dict, "fortran_order");
  if (at == std::string::npos) throw bad("no 'fortran_order' in the header");
  h.fortran_order = dict.compare(at, 4, "True") == 0;

  at = value_of(dict, "shape");
  if (at == std::string::npos || dict[at] != '(') throw bad("no 'shape' tuple in the header");
  const auto end = dict.find(')', at);
  if (end == std::string::npos) throw bad("unterminated 'shape' tuple");
  std::string num;
  for (std::size_t i = at + 1; i <= end; ++i) {
    const char c = dict[i];
    if (c >= '0' && c <= '9') {
      num += c;
    } else if (c == ',' || c == ')') {
      if (!num.empty()) {
        if (num.size() > 15) throw bad("implausible shape");
        h.shape.push_back(std::stoll(num));
      }
      num.clear();
    } else if (c != ' ' && c != 'L') {
      throw bad("malformed 'shape' tuple");
    }
  }
  return h;
}

std::vector<std::int32_t> npy_int_labels(std::span<const std::uint8_t> b, const NpyHeader& h,
                                         const std::string& name) {
  if ((h.kind != 'i' && h.kind != 'u') ||
      (h.item_bytes != 1 && h.item_bytes != 2 && h.item_bytes != 4 && h.item_bytes != 8))
    throw DataError(name +
                    ": labels must have an integer dtype (int8..int64, uint8..uint64), "
                    "not kind '" +
                    std::string(1, h.kind) + "' of " + std::to_string(h.item_bytes) + " bytes");
  if (h.shape.size() != 1)
    throw DataError(name + ": labels must be a 1-D array, not " + std::to_string(h.shape.size()) +
                    "-D");
  const auto n = static_cast<std::size_t>(h.shape[0]);
  const std::size_t w = static_cast<std::size_t>(h.item_bytes);
  if (b.size() < h.data_offset + n * w)
    throw DataError(name + ": the file is truncated (" + std::to_string(n) + " labels need " +
                    std::to_string(h.data_offset + n * w) + " bytes, it has " +
                    std::to_string(b.size()) + ")");
  std::vector<std::int32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = b.data() + h.data_offset + i * w;
    std::uint64_t u = 0;
    for (std::size_t k = 0; k < w; ++k)
      u |= std::uint64_t{p[h.big_endian ? w - 1 - k : k]} << (8 * k);
    std::int64_t v = static_cast<std::int64_t>(u);
    if (h.kind == 'i' && w < 8 && (u >> (8 * w - 1)) & 1)  // sign-extend
      v = static_cast<std::int64_t>(u | (~std::uint64_t{0} << (8 * w)));
    if (h.kind == 'u' && w == 8 && u > std::uint64_t{std::numeric_limits<std::int32_t>::max()})
      v = -1;
    if (v < 0 || v > std::numeric_limits<std::int32_t>::max())
      throw DataError(name + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                      " is out of range; labels are class indices 0, 1, ...");
    // Indices name classes 0..max: bound them before anything makes that many names.
    if (v >= kMaxClasses)
      throw DataError(name + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                      " would make " + std::to_string(v + 1) + " classes; a packed file holds " +
                      "at most " + std::to_string(kMaxClasses) +
                      " (2^24) classes, numbered from 0");
    out[i] = static_cast<std::int32_t>(v);
  }
  return out;
}

PackSource load_npy(const std::filesystem::path& images, const std::filesystem::path& labels) {
  const std::string iname = detail::quoted(images), lname = detail::quoted(labels);
  const auto lb = detail::read_maybe_gzip(labels, "a .npy file of integer labels");
  const NpyHeader lh = parse_npy_header(lb, lname);
  const auto label_values = npy_int_labels(lb, lh, lname);

  auto ib = detail::read_maybe_gzip(images, "a .npy file of uint8 images");
  const NpyHeader ih = parse_npy_header(ib, iname);
  if (ih.kind != 'u' || ih.item_bytes != 1)
    throw DataError(iname + ": images must be uint8 ('|u1'), not '" + std::string(1, ih.kind) +
                    std::to_string(ih.item_bytes) + "'; convert with images.astype(np.uint8)");
  if (ih.fortran_order)
    throw DataError(iname + ": a Fortran-order array; save it with np.ascontiguousarray");
  // N x H x W: grey. N x H x W x C when the last dimension is 1 or 3 (checked first), else N x C x
  // H x W when the second is 1 or 3.
  const auto& s = ih.shape;
  bool nhwc = false;
  std::int64_t c = 1, h = 0, w = 0;
  if (s.size() == 3) {
    h = s[1];
    w = s[2];
  } else if (s.size() == 4 && (s[3] == 1 || s[3] == 3)) {
    nhwc = true;
    h = s[1];
    w = s[2];
    c = s[3];
  } else if (s.size() == 4 && (s[1] == 1 || s[1] == 3)) {
    c = s[1];
    h = s[2];
    w = s[3];
  } else {
    throw DataError(iname +
                    ": shape must be N x H x W, N x H x W x C or N x C x H x W with C = "
                    "1 or 3 (got " +
                    std::to_string(s.size()) + " dimensions)");
  }
  const std::int64_t n = s[0];
  if (n != static_cast<std::int64_t>(label_values.size()))
    throw DataError(iname + " holds " + std::to_string(n) + " images but " + lname + " holds " +
                    std::to_string(label_values.size()) + " labels");
  if (n < 1 || h < 1 || w < 1) throw DataError(iname + ": no images (an empty dimension)");
  const std::uint64_t bytes = static_cast<std::uint64_t>(ih.elements());
  if (ib.size() < ih.data_offset + bytes)
    throw DataError(iname + ": the file is truncated (" + std::to_string(ih.data_offset + bytes) +
                    " bytes expected, " + std::to_string(ib.size()) + " found)");
  PackSource src;
  src.description = "npy:" + std::filesystem::absolute(images).lexically_normal().string() + "," +
                    std::filesystem::absolute(labels).lexically_normal().string();
  src.channels = c;
  src.height = h;
  src.width = w;
  src.labels = label_values;
  std::int32_t max = 0;
  for (auto v : label_values) max = std::max(max, v);
  for (std::int32_t k = 0; k <= max; ++k) src.classes.push_back(std::to_string(k));
  const std::uint8_t* data = ib.data() + ih.data_offset;
  if (!nhwc) {
    src.pixels.assign(data, data + bytes);
    return src;
  }
  src.pixels.resize(bytes);
  const std::int64_t plane = h * w;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t p = 0; p < plane; ++p)
      for (std::int64_t k = 0; k < c; ++k)
        src.pixels[static_cast<std::size_t>((i * c + k) * plane + p)] =
            data[(i * plane + p) * c + k];
  return src;
}

}  // namespace ddp::data
