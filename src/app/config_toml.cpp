// The resolved configuration as TOML: every schema key and the layer list, built as a toml++ table
// and streamed, so that load_config reads it back to the same Config.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>

#include "ddp/app/config_detail.hpp"

namespace ddp::app::detail {
namespace {

// A float layer field as the double with the float's shortest text (0.1f -> 0.1, not
// 0.100000001490116), so the output reads as the user wrote it and still narrows back exactly.
double widen(float f) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, f);
  double d = static_cast<double>(f);
  std::from_chars(buf, res.ptr, d);
  return d;
}

// toml++ prints floats either with 17 significant digits (exact, but 0.05 comes out as
// 0.050000000000000003) or with 6 (readable, but lossy), for the whole document. So it prints them
// exact, and each float is then rewritten as the shortest text that reads back as the same double
// (std::to_chars): 0.05, and 1.3333333333333333 for 4/3. Only lines "key = value" whose value holds
// no string are touched, so no text inside quotes changes.
std::string shortest_number(std::string_view token) {
  double v = 0.0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size()) return std::string(token);
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string out(buf, res.ptr);
  if (out.find_first_of(".en") == std::string::npos) out += ".0";  // still a TOML float
  return out;
}

std::string with_shortest_floats(const std::string& text) {
  static const std::regex number(
      R"([-+]?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+)");
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find(" = ");
    if (eq != std::string::npos && line.find_first_of("\"'", eq) == std::string::npos) {
      std::string value;
      std::size_t from = eq;
      for (std::sregex_iterator
               it(line.begin() + static_cast<std::ptrdiff_t>(eq), line.end(), number),
           end;
           it != end; ++it) {
        const auto at = static_cast<std::size_t>(it->position()) + eq;
        value += line.substr(from, at - from) + shortest_number(it->str());
        from = at + static_cast<std::size_t>(it->length());
      }
      line = line.substr(0, eq) + value + line.substr(from);
    }
    out += line + "\n";
  }
  return out;
}

bool is_whole(double x) {
  return x == std::floor(x) && std::fabs(x) < 9.0e15;
}

void insert(toml::table& table, std::string_view key, const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) {
    table.insert(key, *i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    table.insert(key, *d);
  } else if (const auto* b = std::get_if<bool>(&v)) {
    table.insert(key, *b);
  } else if (const auto* s = std::get_if<std::string>(&v)) {
    table.insert(key, *s);
  } else if (const auto* p = std::get_if<IntPair>(&v)) {
    if ((*p)[0] == (*p)[1]) {
      table.insert(key, (*p)[0]);
    } else {
      toml::array pair;
      pair.push_back((*p)[0]);
      pair.push_back((*p)[1]);
      table.insert(key, std::move(pair));
    }
  } else if (const auto* names = std::get_if<std::vector<std::string>>(&v)) {
    toml::array list;
    for (const auto& n : *names) list.push_back(n);
    table.insert(key, std::move(list));
  } else if (const auto* wn = std::get_if<WordOrNumbers>(&v)) {
    // A word, one number or a list; whole numbers as TOML integers (max_micro_batch = 40).
    if (wn->numbers.empty()) {
      table.insert(key, wn->word);
    } else if (wn->numbers.size() == 1) {
      const double x = wn->numbers[0];
      if (is_whole(x))
        table.insert(key, static_cast<std::int64_t>(x));
      else
        table.insert(key, x);
    } else {
      toml::array list;
      for (double x : wn->numbers) {
        if (is_whole(x))
          list.push_back(static_cast<std::int64_t>(x));
        else
          list.push_back(x);
      }
      table.insert(key, std::move(list));
    }
  } else {
    toml::array list;
    for (double x : std::get<std::vector<double>>(v)) list.push_back(x);
    table.insert(key, std::move(list));
  }
}

}  // namespace

std::string to_toml(const Config& cfg) {
  toml::table root;
  for (const auto& key : config_keys()) {
    if (!root.contains(key.section())) root.insert(key.section(), toml::table{});
    insert(*root.get_as<toml::table>(key.section()), key.leaf(), key.get(cfg));
  }

  toml::array layers;
  for (const auto& spec : cfg.model.layers) {
    toml::table layer;
    for (const auto& key : layer_keys()) {
      if (!key.applies(spec.type) || key.alias) continue;
      Value v = key.get(spec);
      if (auto* names = std::get_if<std::vector<std::string>>(&v); names && names->empty())
        continue;  // the layer above
      if (auto* d = std::get_if<double>(&v)) *d = widen(static_cast<float>(*d));
      insert(layer, key.name, v);
    }
    layers.push_back(std::move(layer));
  }
  root.get_as<toml::table>("model")->insert("layers", std::move(layers));
  if (!cfg.optim.groups.empty())
    root.get_as<toml::table>("optim")->insert("groups", groups_to_toml(cfg.optim.groups));

  std::ostringstream out;
  out << "# ddp_train: the resolved configuration (every key, defaults included).\n\n";
  out << toml::toml_formatter(root, toml::format_flags::none);
  out << '\n';
  return with_shortest_floats(out.str());
}

}  // namespace ddp::app::detail
