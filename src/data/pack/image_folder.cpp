// Listing PATH/<class>/<image> in torchvision's ImageFolder order (rules in image_folder.hpp).
#include "ddp/data/image_folder.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "../file_io.hpp"
#include "ddp/data/pack_source.hpp"
#include "ddp/data/utf8_names.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using detail::quoted;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// What a listed file that is not an image goes by in the summary: its extension, lower case.
std::string extension_of(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos || dot == 0 ? "(no extension)" : lower(name.substr(dot));
}

// A directory's identity: what a symbolic link leads to, whatever path it is reached by.
struct DirId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const DirId&) const = default;
};

bool dir_id(const std::string& path, DirId& id) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;  // follows links, as os.walk does
  id = {st.st_dev, st.st_ino};
  return true;
}

// One class's walk: every directory under it (itself included), following symbolic links as
// os.walk(..., followlinks=True) does, as path strings built the way os.path.join builds them. A
// link back to a directory on the current path (or to the image folder itself) is a loop that
// os.walk would follow until the path grew too long, listing the same images again and again:
// it is not followed, and named in `loops`.
class ClassWalk {
 public:
  ClassWalk(const std::function<bool()>& cancelled, const fs::path& root,
            std::vector<std::string>& loops)
      : cancelled_(cancelled), root_(root), loops_(loops) {}

  std::vector<std::string> dirs(const std::string& class_dir) {
    out_.clear();
    stack_.clear();
    DirId root_id;
    if (dir_id(root_.string(), root_id)) stack_.push_back({root_id, root_.string()});
    walk(class_dir);
    return std::move(out_);
  }

  // Throws when a signal asked the program to stop (the walk can take long on a huge tree).
  void check_cancelled(const std::string& where) const {
    if (cancelled_ && cancelled_())
      throw DataError("pack interrupted by a signal while listing " + quoted(fs::path(where)) +
                      "; no file was written");
  }

 private:
  void walk(const std::string& dir) {
    check_cancelled(dir);
    DirId id;
    if (!dir_id(dir, id)) return;  // os.walk skips what it cannot read
    for (const auto& [seen, text] : stack_) {
      if (seen == id) {
        loops_.push_back(quoted(fs::path(dir)) + " leads back to " + quoted(fs::path(text)) +
                         " (a symbolic-link loop): not followed");
        return;
      }
    }
    stack_.push_back({id, dir});
    out_.push_back(dir);
    std::vector<std::string> children;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      check_cancelled(dir);
      std::error_code ec2;
      if (it->is_directory(ec2)) children.push_back(it->path().filename().string());
    }
    for (const std::string& child : children) walk(dir + "/" + child);
    stack_.pop_back();
  }

  const std::function<bool()>& cancelled_;
  const fs::path& root_;
  std::vector<std::string>& loops_;
  std::vector<std::pair<DirId, std::string>> stack_;
  std::vector<std::string> out_;
};

std::vector<std::string> sorted_files(const fs::path& dir, const ClassWalk& walk) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    walk.check_cancelled(dir.string());
    std::error_code ec2;
    if (!it->is_directory(ec2)) names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

constexpr std::string_view kExtensions[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                            ".pgm", ".tif",  ".tiff", ".webp"};

std::string extension_list() {
  std::string out;
  for (std::string_view ext : kExtensions) {
    if (!out.empty()) out += ' ';  // appended piecewise: GCC 12's -Wrestrict false positive
    out += ext;
  }
  return out;
}

}  // namespace

bool has_image_extension(std::string_view name) {
  const std::string l = lower(name);
  return std::any_of(std::begin(kExtensions), std::end(kExtensions),
                     [&](std::string_view ext) { return l.ends_with(ext); });
}

std::vector<std::string> sorted_walk_roots(std::vector<std::string> walk_roots) {
  std::sort(walk_roots.begin(), walk_roots.end());  // char_traits<char>: byte order
  return walk_roots;
}

PackSource list_image_folder(const fs::path& root, const std::function<bool()>& cancelled) {
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
                    ": no class folders; an image folder holds one sub-directory of images per "
                    "class (PATH/<class>/<image>)");
  for (const std::string& c : src.classes)
    if (!is_valid_utf8(c))
      throw DataError(quoted(root) + ": class folder '" + escape_bytes(c) +
                      "' has a name that is not valid UTF-8; class names are written as text " +
                      "(metrics, reports, TensorBoard): rename the folder (e.g. convmv -f " +
                      "latin1 -t utf-8 -r --notest DIR)");
  const std::string base = root.string();
  std::vector<std::string> loops;
  std::map<std::string, std::int64_t> not_images;  // extension -> files left out
  ClassWalk walk(cancelled, root, loops);
  for (std::size_t c = 0; c < src.classes.size(); ++c) {
    const fs::path class_dir = root / src.classes[c];
    const std::string class_text = (base.ends_with('/') ? base : base + "/") + src.classes[c];
    const std::size_t before = src.files.size();
    for (const std::string& dir : sorted_walk_roots(walk.dirs(class_text))) {
      for (const std::string& name : sorted_files(dir, walk)) {
        if (has_image_extension(name))
          src.files.push_back({fs::path(dir) / name, static_cast<std::int32_t>(c), ""});
        else
          ++not_images[extension_of(name)];
      }
    }
    if (src.files.size() == before)
      throw DataError(quoted(class_dir) + ": class folder '" + src.classes[c] +
                      "' holds no image (" + extension_list() +
                      ", any case); add images or remove the folder");
  }
  constexpr std::size_t kLoopsShown = 20;  // a lattice of links can hold thousands
  for (std::size_t i = 0; i < loops.size() && i < kLoopsShown; ++i) src.notes.push_back(loops[i]);
  if (loops.size() > kLoopsShown)
    src.notes.push_back("... and " + std::to_string(loops.size() - kLoopsShown) +
                        " more symbolic-link loops, not followed");
  if (!not_images.empty()) {
    std::int64_t total = 0;
    std::string by_type;
    for (const auto& [ext, n] : not_images) {
      total += n;
      if (!by_type.empty()) by_type += ", ";
      by_type += std::to_string(n) + " " + ext;
    }
    src.notes.push_back("left out " + std::to_string(total) + " file(s) whose names are not " +
                        "those of images (" + by_type + "; ImageFolder reads " + extension_list() +
                        ")");
  }
  return src;
}

}  // namespace ddp::data
