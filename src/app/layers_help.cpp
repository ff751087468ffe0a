// The text of `ddp_train layers` (also the footer of --help): every layer type of the registry with
// the keys it takes, their types, defaults and one line each.
#include <algorithm>
#include <charconv>
#include <sstream>

#include "ddp/app/config_detail.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/nn/layer_registry.hpp"

namespace ddp::app {
namespace {

// The command line's placeholders, in TOML's spelling where a list differs.
std::string type_word(ValueType t) {
  if (t == ValueType::kIntPair) return "INT|[H,W]";
  if (t == ValueType::kStringList) return "[NAMES]";
  return detail::type_label(t);
}

// Defaults as written in a config: float fields with the float's shortest text (0.1, not
// 0.10000000149011612).
std::string default_text(const Value& v) {
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, static_cast<float>(*d));
    return std::string(buf, res.ptr);
  }
  return detail::format_value(v);
}

}  // namespace

std::string layers_help() {
  std::ostringstream os;
  os << "Layer types, for [[model.layers]] entries (type = \"...\"). Every layer also takes:\n";
  for (const auto& key : layer_keys()) {
    if (!key.every_type || key.name == "type") continue;
    os << "    " << key.name << " " << (key.alias ? "NAME" : type_word(key.type())) << ": "
       << key.help << "\n";
  }
  const nn::LayerSpec defaults;
  for (const auto& t : nn::layer_registry()) {
    os << "  " << t.type << ": " << t.doc << "\n";
    for (const auto& def : t.keys) {
      const std::string_view name = def.name;
      const LayerKey* key = find_layer_key(name);
      if (!key) continue;
      const bool required =
          std::find(t.required.begin(), t.required.end(), name) != t.required.end();
      os << "    " << name << " " << type_word(key->type());
      if (required)
        os << " (required)";
      else
        os << " = " << default_text(key->get(defaults));
      os << ": " << key->help << "\n";
    }
  }
  return os.str();
}

}  // namespace ddp::app
