// Listing PATH/<class>/<image> in torchvision's ImageFolder order (rules in image_folder.hpp).
#include "ddp/data/image_folder.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "ddp/data/pack_source.hpp"
#include "ddp/error.hpp"
#include "file_io.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using detail::quoted;

bool has_image_extension(std::string_view name) {
  std::string lower(name);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (std::string_view ext : {".jpg", ".jpeg", ".png"})
    if (lower.ends_with(ext)) return true;
  return false;
}

std::vector<std::string> sorted_walk_roots(std::vector<std::string> walk_roots) {
  std::sort(walk_roots.begin(), walk_roots.end());  // char_traits<char>: byte order
  return walk_roots;
}

namespace {

// Every directory under `dir` (itself included), following symbolic links as os.walk(...,
// followlinks=True) does, as path strings built the way os.path.join builds them.
void collect_dirs(const fs::path& dir, const std::string& as_text, std::vector<std::string>& out,
                  int depth) {
  out.push_back(as_text);
  if (depth > 64) return;  // a symbolic-link loop; Python would recurse until it failed
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2))
      collect_dirs(it->path(), as_text + "/" + it->path().filename().string(), out, depth + 1);
  }
}

std::vector<std::string> sorted_files(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_directory(ec2)) names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

PackSource list_image_folder(const fs::path& root) {
  detail::require_directory(root, "image folder", "one sub-directory of images per class");
  PackSource src;
  src.description = "imagefolder:" + fs::absolute(root).lexically_normal().string();
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2)) src.classes.push_back(it->path().filename().string());
  }
  if (ec) throw DataError(quoted(root) + ": cannot list the image folder: " + ec.message());
  std::sort(src.classes.begin(), src.classes.end());
  if (src.classes.empty())
    throw DataError(quoted(root) +
                    ": no class folders; an image folder holds one sub-directory of .jpg/.jpeg/"
                    ".png images per class (PATH/<class>/<image>)");
  const std::string base = root.string();
  for (std::size_t c = 0; c < src.classes.size(); ++c) {
    const fs::path class_dir = root / src.classes[c];
    const std::string class_text = (base.ends_with('/') ? base : base + "/") + src.classes[c];
    std::vector<std::string> roots;
    collect_dirs(class_dir, class_text, roots, 0);
    const std::size_t before = src.files.size();
    for (const std::string& dir : sorted_walk_roots(std::move(roots))) {
      for (const std::string& name : sorted_files(dir))
        if (has_image_extension(name))
          src.files.push_back({fs::path(dir) / name, static_cast<std::int32_t>(c), ""});
    }
    if (src.files.size() == before)
      throw DataError(quoted(class_dir) + ": class folder '" + src.classes[c] +
                      "' holds no .jpg, .jpeg or .png image (any case); add images or remove "
                      "the folder");
  }
  return src;
}

}  // namespace ddp::data
