// load_config: the TOML file, then the command-line overrides, each key checked against the schema
// as it is read; then the model and the checks that involve several keys.
#include "ddp/app/config.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "ddp/app/config_detail.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/data/dataset_geometry.hpp"
#include "ddp/data/registry.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/memory_estimate.hpp"
#include "ddp/runtime/signals.hpp"

namespace ddp::app {
namespace {

namespace fs = std::filesystem;
using detail::describe_node;
using detail::did_you_mean;
using detail::format_float;
using detail::format_value;
using detail::from_node;
using detail::layer_label;
using detail::node_text;
using detail::parse_layers;
using detail::parse_text;
using detail::same_layers;
using detail::type_noun;

// What the model is built for (data/dataset_geometry.hpp: the registry's shape, or the packed
// training file's header, or data.train_size), with the longer image side.
struct ModelShape {
  std::int64_t classes = 10, channels = 3, side = 32;
};
ModelShape model_shape(const data::Options& d) {
  const data::Geometry g = data::dataset_geometry(d);
  return {g.classes, g.channels, std::max(g.height, g.width)};
}

std::vector<std::string> all_key_names() {
  std::vector<std::string> out;
  for (const auto& k : config_keys()) out.emplace_back(k.name);
  out.emplace_back("model.layers");
  out.emplace_back("optim.groups");
  return out;
}

// "; did you mean 'optim.lr'?" for a key in the wrong section or with a typo, else the keys the
// section does have.
std::string suggest_key(const std::string& name) {
  const auto dot = name.find('.');
  const std::string section = dot == std::string::npos ? "" : name.substr(0, dot);
  if (auto key = detail::nearest_key(name)) return "; did you mean '" + *key + "'?";
  std::string keys;
  for (const auto& k : config_keys())
    if (k.section() == section) keys += (keys.empty() ? "" : ", ") + std::string(k.leaf());
  if (section == "model") keys += ", layers";
  if (section == "optim") keys += ", groups";
  return keys.empty() ? "" : "; the keys of [" + section + "] are: " + keys;
}

std::string type_hint(ValueType t) {
  switch (t) {
    case ValueType::kBool:
      return " (true/false, yes/no, 1/0)";
    case ValueType::kFloatList:
      return " (e.g. 0.5 or 0.5,0.5,0.5)";
    case ValueType::kIntPair:
      return " (e.g. 3 or 3,1)";
    case ValueType::kWordOrNumbers:
      return " (e.g. auto or 3,1,2)";
    default:
      return "";
  }
}

int line_of(const toml::key& key) {
  return static_cast<int>(key.source().begin.line);
}

struct Origin {
  std::string where;  // "FILE:LINE" or "command line"
  bool command_line = false;
};

class Loader {
 public:
  explicit Loader(Config& cfg) : cfg_(cfg) {}

  void read_file(const fs::path& path) {
    cfg_.source = path;
    file_ = path.string();  // read_text's messages name it
    read_toml(read_text(path), path.string());
  }

  // `origin` stands for the file in messages ("FILE:LINE").
  void read_toml(const std::string& text, const std::string& origin) {
    file_ = origin;
    const toml::table root = parse(text);
    const auto sections = config_sections();
    for (auto&& [key, node] : root) {
      const std::string name(key.str());
      if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
        if (node.is_table()) {
          throw ConfigError(at(line_of(key)) + ": unknown section '" + name + "'" +
                            section_hint(name, sections));
        }
        throw ConfigError(at(line_of(key)) + ": unknown key '" + name + "' outside any section" +
                          suggest_key(name));
      }
      const auto* table = node.as_table();
      if (!table) {
        throw ConfigError(at(line_of(key)) + ": " + name + ": expected a table ([" + name +
                          "]), got " + describe_node(node));
      }
      for (auto&& [leaf, value] : *table)
        read_entry(name + "." + std::string(leaf.str()), leaf, value);
    }
  }

  void apply_overrides(const Overrides& overrides) {
    for (const auto& [name, text] : overrides) {
      if (name == "model.layers") {
        throw ConfigError(
            "command line: --model.layers: layers can only be given in a config file "
            "([[model.layers]]); use --model.preset for a built-in model");
      }
      if (name == "optim.groups")
        throw ConfigError(
            "command line: --optim.groups: parameter groups can only be given in a "
            "config file ([[optim.groups]])");
      const ConfigKey* key = find_config_key(name);
      if (!key) throw ConfigError("command line: unknown key '" + name + "'" + suggest_key(name));
      const auto value = parse_text(key->type(), text);
      if (!value) {
        throw ConfigError("command line: --" + name + " '" + text + "': expected " +
                          std::string(type_noun(key->type())) + type_hint(key->type()));
      }
      if (auto problem = key->check(*value))
        throw ConfigError("command line: --" + name + " '" + text + "': " + *problem);
      key->set(cfg_, *value);
      origins_[name] = {"command line", true};
    }
  }

  void resolve_model() {
    auto& model = cfg_.model;
    const auto preset_origin = origins_.find("model.preset");
    const bool preset_given = preset_origin != origins_.end();
    // A preset named on the command line replaces the file's model: overrides win.
    if (preset_given && preset_origin->second.command_line && !model.preset.empty())
      file_layers_.reset();

    if (!file_layers_) {
      if (model.preset.empty()) {
        throw ConfigError(subject(*find_config_key("model.preset")) +
                          ": no model: name a preset (" + presets_text() +
                          ") or give [[model.layers]]");
      }
      check_preset_keys(model.preset);
      model.layers = nn::preset_layers(model.preset, preset_options(cfg_));
      return;
    }
    if (preset_given && !model.preset.empty()) {
      check_preset_keys(model.preset);
      // Equal layers are allowed next to the preset: that is what a resolved configuration holds.
      if (!same_layers(nn::preset_layers(model.preset, preset_options(cfg_)), *file_layers_)) {
        throw ConfigError(subject(*find_config_key("model.preset")) + ": both a preset and " +
                          "[[model.layers]] (line " + std::to_string(file_layers_->front().line) +
                          ") describe the model; give only one");
      }
    }
    if (!preset_given) model.preset.clear();
    if (model.preset.empty()) check_preset_keys("");
    model.layers = std::move(*file_layers_);

    const auto& last = model.layers.back();
    const auto classes = model_shape(cfg_.data).classes;
    if (last.type == "linear" && last.out_features != classes) {
      throw ConfigError(at(last.line) + ": " + layer_label(model.layers.size() - 1, last) +
                        ": out_features = " + std::to_string(last.out_features) +
                        ", but data.dataset = " + cfg_.data.dataset + " has " +
                        std::to_string(classes) + " classes");
    }
  }

  void cross_check() const {
    // data.train_size / eval_crop / eval_resize agree, data.rrc_scale / rrc_ratio are ranges.
    data::transform_output_side(cfg_.data);
    // A padding of more than half the side makes most random crops blank (or all of them).
    if (cfg_.data.augment && cfg_.data.train_size == 0) {
      const auto side = model_shape(cfg_.data).side;
      if (cfg_.data.crop_padding * 2 > side)
        fail("data.crop_padding", "must be at most half the image side (" + std::to_string(side) +
                                      " px for " + cfg_.data.dataset +
                                      "): most random crops would show only the padding");
    }
    if (cfg_.data.dataset == "packed") check_packed_files();
    // Counted in 64 bits (steps x epochs, batch x ranks): bounded where the products still fit,
    // far beyond any run (the memory estimate refuses a large batch with its own figures).
    if (cfg_.train.epochs > 1000000000)
      fail("train.epochs", "must be at most 1000000000 (a schedule's steps must fit 64 bits)");
    if (cfg_.train.batch_size > (std::int64_t{1} << 40))
      fail("train.batch_size", "must be at most 2^40 (the global batch must fit 64 bits)");
    const auto& s = cfg_.schedule;
    const auto& o = cfg_.optim;
    if (s.warmup_epochs > static_cast<double>(cfg_.train.epochs)) {
      fail("schedule.warmup_epochs",
           "must be <= train.epochs (" + std::to_string(cfg_.train.epochs) + ")");
    }
    if (s.name == "onecycle" && s.warmup_epochs > 0) {
      fail("schedule.warmup_epochs",
           "does not apply to schedule.name = onecycle, which warms up by itself "
           "(schedule.pct_start)");
    }
    if (s.name == "cosine" && s.min_lr > o.lr)
      fail("schedule.min_lr", "must be <= optim.lr (" + format_float(o.lr) + ")");
    if (o.name == "sgd" && o.nesterov && o.momentum == 0.0)
      fail("optim.nesterov", "needs optim.momentum > 0");
    if (cfg_.data.normalize == "config") {
      const auto channels = static_cast<std::size_t>(model_shape(cfg_.data).channels);
      for (const char* name : {"data.mean", "data.std"}) {
        const auto n = std::get<std::vector<double>>(find_config_key(name)->get(cfg_)).size();
        if (n != 1 && n != channels) {
          fail(name, cfg_.data.dataset + " images have " + std::to_string(channels) +
                         " channel(s); give 1 value or " + std::to_string(channels));
        }
      }
    }
  }

 private:
  std::string at(int line) const { return file_ + ":" + std::to_string(line); }

  // Packed files are checked here, from their headers, so that a mismatch names the file: the two
  // splits must agree, and the model must take the images (otherwise the error would name only a
  // layer).
  void check_packed_files() const {
    const auto& d = cfg_.data;
    const data::Geometry g = data::dataset_geometry(d);  // first: "varying sizes: set ..."
    data::check_packed_splits(d);
    const bool sized = data::transform_output_side(d) > 0;
    try {
      const auto be = backend::make_cpu_backend();
      nn::estimate_memory(cfg_.model.layers, Shape{g.channels, g.height, g.width}, *be);
    } catch (const ConfigError& e) {
      throw ConfigError("data.train_file = '" + d.train_file + "' holds " +
                        std::to_string(g.channels) + "x" + std::to_string(g.height) + "x" +
                        std::to_string(g.width) +
                        (sized ? " images (data.train_size)" : " images") +
                        ", which the model does not take (pack it with --size HxW or set "
                        "data.train_size for this model, or choose another model): " +
                        e.what());
    }
  }

  std::string read_text(const fs::path& path) const {
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (!fs::exists(status)) {
      throw ConfigError("config file '" + file_ +
                        "': " + (ec ? ec.message() : std::string("no such file")));
    }
    if (fs::is_directory(status))
      throw ConfigError("config file '" + file_ + "' is a directory, not a file");
    if (!fs::is_regular_file(status)) return read_stream(path);
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    if (in) text << in.rdbuf();
    if (!in || in.bad()) {
      throw ConfigError("config file '" + file_ + "' cannot be read: " + std::strerror(errno));
    }
    return text.str();
  }

  // A FIFO, a pipe (--config <(...), /dev/stdin) or a device: read until its writer closes it,
  // waiting in poll() so that a stop signal (SIGTERM, SIGINT) ends the wait: a blocking open or
  // read would not return for the signal, whose handler only sets a flag.
  std::string read_stream(const fs::path& path) const {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      throw ConfigError("config file '" + file_ + "' cannot be opened: " + std::strerror(errno));
    std::string text;
    std::string error;
    char buf[65536];
    for (;;) {
      if (runtime::stop_requested()) {
        error = std::string("stopped by ") + strsignal(runtime::stop_signal()) +
                " while waiting for it to be written (it is not a regular file: a FIFO or pipe " +
                "whose writer has not finished)";
        break;
      }
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, 200);
      if (ready < 0 && errno != EINTR) {
        error = std::strerror(errno);
        break;
      }
      if (ready <= 0) continue;
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > (std::size_t{64} << 20)) {
          error = "more than 64 MiB: not a configuration";
          break;
        }
        continue;
      }
      if (n == 0) break;  // the writer closed it (poll reports that only after a writer came)
      if (errno != EAGAIN && errno != EINTR) {
        error = std::strerror(errno);
        break;
      }
    }
    ::close(fd);
    if (!error.empty()) throw ConfigError("config file '" + file_ + "': " + error);
    return text;
  }

  toml::table parse(const std::string& text) const {
    try {
      return toml::parse(std::string_view(text), std::string_view(file_));
    } catch (const toml::parse_error& e) {
      throw ConfigError(file_ + ":" + std::to_string(e.source().begin.line) + ":" +
                        std::to_string(e.source().begin.column) +
                        ": TOML syntax error: " + std::string(e.description()));
    }
  }

  void read_entry(const std::string& name, const toml::key& key, const toml::node& node) {
    const int line = line_of(key);
    if (name == "model.layers") {
      file_layers_ = parse_layers(node, file_);
      return;
    }
    if (name == "optim.groups") {
      cfg_.optim.groups = detail::parse_groups(node, file_);
      return;
    }
    const ConfigKey* k = find_config_key(name);
    if (!k) throw ConfigError(at(line) + ": unknown key '" + name + "'" + suggest_key(name));
    const auto value = from_node(k->type(), node);
    if (!value) {
      throw ConfigError(at(line) + ": " + name + ": expected " + std::string(type_noun(k->type())) +
                        ", got " + describe_node(node));
    }
    if (auto problem = k->check(*value))
      throw ConfigError(at(line) + ": " + name + " = " + node_text(node) + ": " + *problem);
    k->set(cfg_, *value);
    origins_[name] = {at(line), false};
  }

  std::string section_hint(const std::string& name,
                           const std::vector<std::string>& sections) const {
    if (auto hint = did_you_mean(name, sections); !hint.empty()) return hint;
    std::string all;
    for (const auto& s : sections) all += (all.empty() ? "" : ", ") + s;
    return "; the sections are: " + all;
  }

  static std::string presets_text() {
    std::string out;
    for (auto p : nn::preset_names()) out += (out.empty() ? "" : ", ") + std::string(p);
    return out;
  }

  // "FILE:LINE: train.epochs = 5", "command line: --train.epochs '5'" or "train.epochs = 10
  // (default)": the key as the user wrote it, for checks made after all keys are read.
  std::string subject(const ConfigKey& key) const {
    const std::string name(key.name);
    const Value v = key.get(cfg_);
    const auto it = origins_.find(name);
    if (it != origins_.end() && it->second.command_line)
      return "command line: --" + name + " '" + format_value(v) + "'";
    const auto* s = std::get_if<std::string>(&v);
    const auto* wn = std::get_if<WordOrNumbers>(&v);
    const std::string text = s                           ? "\"" + *s + "\""
                             : wn && wn->numbers.empty() ? "\"" + wn->word + "\""
                                                         : format_value(v);
    if (it == origins_.end()) return name + " = " + text + " (default)";
    return it->second.where + ": " + name + " = " + text;
  }

  // model.stem and model.zero_init_residual against the preset ("" for [[model.layers]]).
  void check_preset_keys(const std::string& preset) const {
    if (auto problem = nn::preset_option_problem(preset, preset_options(cfg_)))
      fail(problem->first, problem->second);
  }

  [[noreturn]] void fail(std::string_view key, const std::string& problem) const {
    throw ConfigError(subject(*find_config_key(key)) + ": " + problem);
  }

  Config& cfg_;
  std::string file_;
  std::map<std::string, Origin, std::less<>> origins_;  // the keys given, by full name
  std::optional<std::vector<nn::LayerSpec>> file_layers_;
};

}  // namespace

std::optional<std::string> detail::nearest_key(const std::string& name) {
  const auto dot = name.find('.');
  const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
  for (const auto& k : config_keys())
    if (k.leaf() == leaf) return std::string(k.name);
  return detail::nearest(name, all_key_names());
}

nn::PresetOptions preset_options(const Config& cfg) {
  nn::PresetOptions o;
  o.stem = cfg.model.stem;
  const ModelShape shape = model_shape(cfg.data);
  o.image_side = shape.side;
  o.zero_init_residual = cfg.model.zero_init_residual;
  o.classes = shape.classes;
  return o;
}

Config load_config(const std::filesystem::path& path, const Overrides& overrides) {
  Config cfg;
  Loader loader(cfg);
  if (!path.empty()) loader.read_file(path);
  loader.apply_overrides(overrides);
  loader.resolve_model();
  loader.cross_check();
  cfg.resolved_toml = detail::to_toml(cfg);
  return cfg;
}

Config load_config_for_doctor(const std::filesystem::path& path, const Overrides& overrides,
                              std::string& problem) {
  problem.clear();
  // The keys as given (file and overrides, the model not resolved): what the ranks compare. A
  // rank whose files differ (a missing or truncated dataset) must get its [FAIL] line, not a
  // "different configurations" refusal because its model could not be resolved.
  Config given;
  {
    Loader loader(given);
    try {
      if (!path.empty()) loader.read_file(path);
      loader.apply_overrides(overrides);
    } catch (const Error&) {
    }
  }
  const std::string given_toml = detail::to_toml(given);
  Config cfg;
  try {
    cfg = load_config(path, overrides);
  } catch (const Error& e) {
    problem = e.what();
    cfg = std::move(given);  // what could be read stays, for the doctor's other checks
  }
  cfg.resolved_toml = given_toml;
  return cfg;
}

Config load_config_text(const std::string& toml_text, const std::string& origin,
                        const Overrides& overrides) {
  Config cfg;
  Loader loader(cfg);
  loader.read_toml(toml_text, origin);
  loader.apply_overrides(overrides);
  loader.resolve_model();
  loader.cross_check();
  cfg.resolved_toml = detail::to_toml(cfg);
  return cfg;
}

}  // namespace ddp::app
