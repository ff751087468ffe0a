// [[model.layers]]: reading and validating the layer list, default layer names.
#include <map>

#include "ddp/app/config_detail.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/layer_registry.hpp"

namespace ddp::app::detail {
namespace {

// Default names count layers per family (the registry's), so maxpool and avgpool share "pool".
std::string_view family(std::string_view type) {
  const nn::LayerType* t = nn::find_layer_type(type);
  return t ? t->family : type;
}

std::vector<std::string> names_of(const std::vector<LayerKey>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) out.emplace_back(k.name);
  return out;
}

// "; conv2d takes: out_channels, kernel, ..." (or that it takes none besides input/inputs).
std::string keys_of_type(std::string_view type) {
  const nn::LayerType* t = nn::find_layer_type(type);
  if (!t) return "";
  std::string keys;
  for (const auto& k : t->keys) keys += (keys.empty() ? "" : ", ") + std::string(k.name);
  return "; " + std::string(type) + " takes " +
         (keys.empty() ? "no keys besides name and input(s)" : keys);
}

std::string types_text() {
  std::string out;
  for (auto t : layer_types()) out += (out.empty() ? "" : ", ") + std::string(t);
  return out;
}

// Reads the entries of one [[model.layers]] table.
class LayerReader {
 public:
  LayerReader(const std::string& file, std::size_t index, const toml::table& table)
      : file_(file), index_(index), table_(table) {}

  nn::LayerSpec read(std::map<std::string, std::size_t, std::less<>>& family_counts) {
    spec_.line = static_cast<int>(table_.source().begin.line);
    spec_.file = file_;
    // The type comes first: every other key is checked against it.
    const toml::node* type = table_.get("type");
    if (!type) {
      throw ConfigError(at(spec_.line) + ": " + label() + ": missing key 'type' (one of " +
                        types_text() + ")");
    }
    read_key(*find_layer_key("type"), *type);
    spec_.name = std::string(family(spec_.type)) +
                 std::to_string(++family_counts[std::string(family(spec_.type))]);
    if (const toml::node* name = table_.get("name")) read_key(*find_layer_key("name"), *name);

    if (table_.contains("input") && table_.contains("inputs")) {
      throw ConfigError(at(line_of("inputs")) + ": " + label() +
                        ": give either input (one layer) or inputs (a list), not both");
    }
    for (auto&& [key, node] : table_) {
      if (key.str() == "type" || key.str() == "name") continue;
      const int line = static_cast<int>(key.source().begin.line);
      const LayerKey* lk = find_layer_key(key.str());
      if (!lk) {
        throw ConfigError(at(line) + ": " + label() + ": unknown key '" + std::string(key.str()) +
                          "'" + did_you_mean(key.str(), names_of(layer_keys())));
      }
      if (!lk->applies(spec_.type)) {
        throw ConfigError(at(line) + ": " + label() + ": key '" + std::string(key.str()) +
                          "' does not apply to " + spec_.type + keys_of_type(spec_.type));
      }
      read_key(*lk, node);
    }

    for (const auto& lk : layer_keys()) {
      if (lk.required(spec_.type) && !table_.contains(lk.name)) {
        throw ConfigError(at(spec_.line) + ": " + label() + ": missing key '" +
                          std::string(lk.name) + "' (" + std::string(lk.help) + ")");
      }
    }
    // The type's own checks of the entry as a whole (the pools' padding against the kernel).
    const nn::LayerType* t = nn::find_layer_type(spec_.type);
    if (t && t->check) {
      if (auto problem = t->check(spec_))
        throw ConfigError(at(line_of(problem->key)) + ": " + label() + ": " + problem->message);
    }
    return spec_;
  }

 private:
  std::string at(int line) const { return file_ + ":" + std::to_string(line); }

  int line_of(std::string_view key) const {
    const toml::node* n = table_.get(key);
    return n ? static_cast<int>(n->source().begin.line) : spec_.line;
  }

  std::string label() const {
    return spec_.type.empty() ? "model.layers[" + std::to_string(index_) + "]"
                              : layer_label(index_, spec_);
  }

  void read_key(const LayerKey& key, const toml::node& node) {
    const int line = static_cast<int>(node.source().begin.line);
    auto v = from_node(key.type(), node);
    if (!v) {
      throw ConfigError(at(line) + ": " + label() + ": " + std::string(key.name) + ": expected " +
                        std::string(type_noun(key.type())) + ", got " + describe_node(node));
    }
    if (auto problem = key.check(*v)) {
      throw ConfigError(at(line) + ": " + label() + ": " + std::string(key.name) + " = " +
                        node_text(node) + ": " + *problem);
    }
    key.set(spec_, *v);
  }

  const std::string& file_;
  std::size_t index_;
  const toml::table& table_;
  nn::LayerSpec spec_;
};

}  // namespace

bool same_layers(const std::vector<nn::LayerSpec>& a, const std::vector<nn::LayerSpec>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (const auto& key : layer_keys())
      if (key.get(a[i]) != key.get(b[i])) return false;
  return true;
}

std::vector<nn::LayerSpec> parse_layers(const toml::node& node, const std::string& file) {
  const auto at = [&file](const toml::node& n) {
    return file + ":" + std::to_string(n.source().begin.line);
  };
  const auto* array = node.as_array();
  if (!array) {
    throw ConfigError(at(node) +
                      ": model.layers: expected an array of tables ([[model.layers]]), got " +
                      describe_node(node));
  }
  if (array->empty()) throw ConfigError(at(node) + ": model.layers: the list is empty");

  std::vector<nn::LayerSpec> layers;
  std::map<std::string, std::size_t, std::less<>> family_counts;
  std::map<std::string, std::size_t, std::less<>> index_of_name;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& entry = *array->get(i);
    const auto* table = entry.as_table();
    if (!table) {
      throw ConfigError(at(entry) + ": model.layers[" + std::to_string(i) +
                        "]: expected a table, got " + describe_node(entry));
    }
    nn::LayerSpec spec = LayerReader(file, i, *table).read(family_counts);
    const auto [it, fresh] = index_of_name.emplace(spec.name, i);
    if (!fresh) {
      const auto& first = layers[it->second];
      throw ConfigError(file + ":" + std::to_string(spec.line) + ": " + layer_label(i, spec) +
                        ": duplicate layer name '" + spec.name + "' (also " +
                        layer_label(it->second, first) + " on line " + std::to_string(first.line) +
                        ")");
    }
    layers.push_back(std::move(spec));
  }
  return layers;
}

}  // namespace ddp::app::detail
