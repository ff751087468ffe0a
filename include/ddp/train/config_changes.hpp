#pragma once
// What changed between two resolved configurations (the TOML text a snapshot keeps and the one a
// resumed run resolved), key by key, and which of those changes a resume may accept.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddp::train {

struct ConfigChange {
  std::string key;            // "optim.lr", "model.layers"
  std::string before, after;  // TOML value text; "(absent)" for a key one side lacks
};

// "section.key" -> the value as TOML text, for every key of a resolved configuration;
// [[model.layers]] is one key ("model.layers") holding the whole array. Throws ConfigError when
// the text is not TOML.
std::map<std::string, std::string> flatten_config(const std::string& toml_text);

// The TOML text with "section.key" set to an integer (re-serialised: what the run really uses,
// e.g. the global batch a resume keeps).
std::string with_int_value(const std::string& toml_text, const std::string& key,
                           std::int64_t value);

// Every key whose value differs, in key order.
std::vector<ConfigChange> config_changes(const std::string& before_toml,
                                         const std::string& after_toml);

// "optim.lr: 0.01 -> 0.02" (layers abbreviated: a whole architecture is no line to read).
std::string describe(const ConfigChange& c);

// Keys that describe how this invocation runs, not the run: where the data and outputs live, how
// to resume, the threads, the device, timeouts. They are neither compared nor recorded.
bool is_invocation_key(const std::string& key);

// Keys whose change makes a snapshot meaningless: the model, the dataset, the optimizer kind.
bool changes_meaning(const std::string& key);

// Keys that fix the order and size of the steps inside an epoch (the seed, the training subset,
// shuffling, drop_last): a mid-epoch snapshot continues exactly only when they are unchanged.
bool fixes_sample_position(const std::string& key);

}  // namespace ddp::train
