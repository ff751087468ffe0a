#include "ddp/data/class_names.hpp"

#include "ddp/data/packed_format.hpp"

namespace ddp::data {
namespace {

// CIFAR-10's batches.meta.txt, CIFAR-100's fine labels (meta), Fashion-MNIST's as torchvision
// lists them; MNIST's classes are its digits.
const std::vector<std::string> kCifar10 = {"airplane", "automobile", "bird",  "cat",  "deer",
                                           "dog",      "frog",       "horse", "ship", "truck"};
const std::vector<std::string> kFashionMnist = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};
const std::vector<std::string> kCifar100 = {
    "apple",       "aquarium_fish", "baby",      "bear",       "beaver",       "bed",
    "bee",         "beetle",        "bicycle",   "bottle",     "bowl",         "boy",
    "bridge",      "bus",           "butterfly", "camel",      "can",          "castle",
    "caterpillar", "cattle",        "chair",     "chimpanzee", "clock",        "cloud",
    "cockroach",   "couch",         "crab",      "crocodile",  "cup",          "dinosaur",
    "dolphin",     "elephant",      "flatfish",  "forest",     "fox",          "girl",
    "hamster",     "house",         "kangaroo",  "keyboard",   "lamp",         "lawn_mower",
    "leopard",     "lion",          "lizard",    "lobster",    "man",          "maple_tree",
    "motorcycle",  "mountain",      "mouse",     "mushroom",   "oak_tree",     "orange",
    "orchid",      "otter",         "palm_tree", "pear",       "pickup_truck", "pine_tree",
    "plain",       "plate",         "poppy",     "porcupine",  "possum",       "rabbit",
    "raccoon",     "ray",           "road",      "rocket",     "rose",         "sea",
    "seal",        "shark",         "shrew",     "skunk",      "skyscraper",   "snail",
    "snake",       "spider",        "squirrel",  "streetcar",  "sunflower",    "sweet_pepper",
    "table",       "tank",          "telephone", "television", "tiger",        "tractor",
    "train",       "trout",         "tulip",     "turtle",     "wardrobe",     "whale",
    "willow_tree", "wolf",          "woman",     "worm"};

std::vector<std::string> numbered(int classes) {
  std::vector<std::string> names;
  for (int i = 0; i < classes; ++i) names.push_back(std::to_string(i));
  return names;
}

}  // namespace

std::vector<std::string> class_names(const Options& opt, int classes) {
  std::vector<std::string> names;
  if (opt.dataset == "cifar10") names = kCifar10;
  if (opt.dataset == "cifar100") names = kCifar100;
  if (opt.dataset == "fashion_mnist") names = kFashionMnist;
  if (opt.dataset == "packed" && !opt.train_file.empty())
    names = packed::read_header(opt.train_file).classes;
  if (static_cast<int>(names.size()) != classes) return numbered(classes);
  return names;
}

}  // namespace ddp::data
