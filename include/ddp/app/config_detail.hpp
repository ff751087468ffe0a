#pragma once
// Helpers shared by the configuration sources (src/app/config*.cpp, presets.cpp). Not an interface
// for other rooms: use load_config / config_keys instead.
#include <toml++/toml.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ddp/app/config.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/nn/layer_spec.hpp"

namespace ddp::app::detail {

// "an integer", "a float", "a boolean", "a string", "a list of floats".
std::string_view type_noun(ValueType t);
std::string type_label(ValueType t);  // INT, FLOAT, ... (command-line placeholders)

// Shortest text that parses back to exactly `v` ("0.05", "1e-08").
std::string format_float(double v);
// Numbers as written on the command line: 0.5,0.5,0.5.
std::string format_floats(const std::vector<double>& values);
// A value as written on the command line: 5, 0.05, true, sgd, 0.5,0.5,0.5.
std::string format_value(const Value& v);

// Command-line text -> value of type `t`; nullopt when the text is not of that type. Integers
// reject "5.5" and "5x"; booleans take true/false/1/0/yes/no; lists take "0.5,0.5" or "[0.5, 0.5]".
std::optional<Value> parse_text(ValueType t, std::string_view text);
// A TOML node -> value of type `t` (an integer is accepted where a float is expected, a single
// number where a list is); nullopt when the node is of another type.
std::optional<Value> from_node(ValueType t, const toml::node& node);
// For messages: `string "ten"`, `float 5.5`, `array [ 1, "a" ]`, `table`.
std::string describe_node(const toml::node& node);
// The node as TOML text: `"ten"`, `5.5`, `[ 0.5, 0 ]`.
std::string node_text(const toml::node& node);

// The candidate nearest to `word` by edit distance (with transpositions), if it is near enough to
// be a plausible typo.
std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string>& candidates);
// "; did you mean 'x'?" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);
// The configuration key a mistyped `name` most likely means: the key with the same leaf in another
// section ("train.lr" -> "optim.lr"), else the nearest key by edit distance ("train.epoch" ->
// "train.epochs"); nullopt when none is near. The file and the command line suggest the same.
std::optional<std::string> nearest_key(const std::string& name);

// Every field of two layers equal, ignoring `line`.
bool same_layers(const std::vector<nn::LayerSpec>& a, const std::vector<nn::LayerSpec>& b);
using nn::layer_label;

// Reads `[[model.layers]]` (node = the value of model.layers); `file` prefixes messages.
std::vector<nn::LayerSpec> parse_layers(const toml::node& node, const std::string& file);

// Reads `[[optim.groups]]` (node = the value of optim.groups); `file` prefixes messages.
std::vector<optim::GroupOptions> parse_groups(const toml::node& node, const std::string& file);
// The groups as the resolved configuration writes them.
toml::array groups_to_toml(const std::vector<optim::GroupOptions>& groups);

// The full configuration (every schema key and the layer list) as TOML text that load_config reads
// back to the same Config.
std::string to_toml(const Config& cfg);

}  // namespace ddp::app::detail
