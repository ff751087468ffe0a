#pragma once
// The rules of torchvision.datasets.ImageFolder (torchvision 0.14, datasets/folder.py), so that a
// packed image folder has its class indices and sample order:
//   classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
//   for each class: for root, _, files in sorted(os.walk(class_dir, followlinks=True)):
//                       for f in sorted(files): keep it if f.lower().endswith(extensions)
// Python sorts str by code point, which for UTF-8 names is byte order. Note that sorting the
// os.walk tuples sorts directories by their whole path string, so "a b/" and "a-b/" come before
// "a/z/" (' ' and '-' sort before '/'): not a depth-first walk.
#include <string>
#include <string_view>
#include <vector>

namespace ddp::data {

// torchvision's IMG_EXTENSIONS (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp), in any case.
bool has_image_extension(std::string_view name);

// The directories of one class in the order sorted(os.walk(...)) visits them: `walk_roots` are
// their path strings (class_dir and class_dir + "/" + relative path); returns them sorted.
std::vector<std::string> sorted_walk_roots(std::vector<std::string> walk_roots);

}  // namespace ddp::data
