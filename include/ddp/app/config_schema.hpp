#pragma once
// The configuration schema: one table holding every `section.key` of Config (its type, its default,
// the values it allows, a line of help and the field it is stored in) and one holding every key of
// a
// [[model.layers]] entry. Parsing, validation, --help, command-line overrides and the resolved TOML
// are all driven by these tables, so a key is described exactly once.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ddp/app/config.hpp"
#include "ddp/nn/layer_spec.hpp"

namespace CLI {
class App;
}

namespace ddp::app {

// kIntPair: an integer for both, or [h, w] (kernel, stride, ...); kStringList: names (inputs);
// kWordOrNumbers: one of the key's choices or numbers (train.rank_shares, train.max_micro_batch).
enum class ValueType {
  kInt,
  kFloat,
  kBool,
  kString,
  kFloatList,
  kIntPair,
  kStringList,
  kWordOrNumbers
};

using IntPair = std::array<std::int64_t, 2>;

// A parsed value; the alternative matches the key's ValueType.
using Value = std::variant<std::int64_t, double, bool, std::string, std::vector<double>, IntPair,
                           std::vector<std::string>, WordOrNumbers>;

// Numeric bounds (for a list: of each element); an unset side is unbounded.
struct Range {
  std::optional<double> lo, hi;
  bool lo_open = false;  // lo itself excluded
  bool hi_open = false;

  bool contains(double v) const;
  std::string text() const;  // ">= 1", "> 0", "in [0, 1)"; "" when unbounded
};

// The Config field a key is stored in. The pointer's type fixes the key's ValueType, so the table
// cannot declare a type that disagrees with the struct.
using ConfigField = std::variant<std::int64_t*, std::uint64_t*, double*, bool*, std::string*,
                                 std::vector<double>*, WordOrNumbers*, std::vector<std::string>*>;

struct ConfigKey {
  std::string_view name;  // "train.epochs"
  ConfigField (*field)(Config&);
  std::string_view help;                  // one line, for --help
  Range range;                            // numbers; lists: each element
  std::vector<std::string_view> choices;  // strings, kWordOrNumbers: the allowed words
  std::vector<std::size_t> sizes;         // lists: the allowed lengths (empty: any but 0)
  bool non_empty = false;                 // strings: "" is not allowed
  bool whole = false;                     // numbers of a kWordOrNumbers key: integers only

  ValueType type() const;
  std::string_view section() const;  // "train"
  std::string_view leaf() const;     // "epochs"
  // The default (read from a default-constructed Config), as written on the command line.
  std::string default_text() const;
  // The allowed values in words: "sgd|adam|adamw", ">= 1", "1 or 3 values, each > 0".
  std::string constraint_text() const;
  // Why `v` is not allowed ("must be >= 1"), or nullopt when it is.
  std::optional<std::string> check(const Value& v) const;
  Value get(const Config& c) const;
  void set(Config& c, const Value& v) const;  // v must hold the alternative of type()

 private:
  std::optional<std::string> check_word_or_numbers(const WordOrNumbers& v) const;
};

// Every configuration key, grouped by section in the order --help lists them.
const std::vector<ConfigKey>& config_keys();
const ConfigKey* find_config_key(std::string_view name);  // nullptr when unknown
std::vector<std::string> config_sections();               // "run", "data", ...

// One key of a [[model.layers]] entry: type, name, input(s), and the keys each layer type
// registers (nn/layer_registry.hpp).
using LayerField = nn::LayerField;

struct LayerKey {
  std::string_view name;  // "kernel"
  LayerField (*field)(nn::LayerSpec&);
  std::string_view help;
  Range range;
  std::vector<std::string_view> choices;
  bool every_type = false;    // type, name, input(s); otherwise the types whose registration
                              // (nn/layer_registry.hpp) defines the key
  bool identifier = false;    // strings (and each name of a list): letters, digits, '_', '-', '.'
  bool alias = false;         // another spelling of the next key (input for inputs): not written
  std::size_t max_items = 0;  // lists: at most this many (0: any)

  ValueType type() const;
  bool applies(std::string_view layer_type) const;
  bool required(std::string_view layer_type) const;
  std::optional<std::string> check(const Value& v) const;
  Value get(const nn::LayerSpec& s) const;
  void set(nn::LayerSpec& s, const Value& v) const;
};

const std::vector<LayerKey>& layer_keys();
const LayerKey* find_layer_key(std::string_view name);
const std::vector<std::string_view>& layer_types();  // conv2d, relu, ... (the registry's)

// Every layer type with its keys, types, defaults and help (`ddp_train layers`, --help's footer).
std::string layers_help();

// Registers `--section.key VALUE` for every schema key (plus `--run-dir` for run.dir); each
// occurrence appends {"section.key", VALUE} to `out`, in command-line order. Values are checked
// later, by load_config, with the same rules as the config file.
void add_config_options(CLI::App& app, Overrides& out);

// The error for command-line arguments that `app` (and its subcommands) did not take (CLI11's
// remaining()): each unknown option with the suggestion a config file gets for the same typo
// ("unknown option '--train.epoch'; did you mean '--train.epochs'?"), or the nearest other option.
std::string unexpected_arguments(const std::vector<std::string>& extras, const CLI::App& app);

}  // namespace ddp::app
