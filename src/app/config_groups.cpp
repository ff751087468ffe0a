// [[optim.groups]]: parameter groups, read from the file and written back into the resolved
// configuration. Which parameters a group's patterns match is the optimizer's business
// (optim/param_pattern.hpp); here only the form of each table is checked.
#include <cmath>

#include "ddp/app/config_detail.hpp"
#include "ddp/error.hpp"

namespace ddp::app::detail {
namespace {

const std::vector<std::string> kGroupKeys = {"match", "lr_mult", "weight_decay"};

std::string label(const std::string& file, const toml::node& node, std::size_t index) {
  return file + ":" + std::to_string(node.source().begin.line) + ": optim.groups[" +
         std::to_string(index + 1) + "]";
}

double number(const std::string& where, const toml::node& node, bool positive) {
  const auto v = from_node(ValueType::kFloat, node);
  if (!v) throw ConfigError(where + ": expected a number, got " + describe_node(node));
  const double x = std::get<double>(*v);
  if (!std::isfinite(x) || (positive ? x <= 0.0 : x < 0.0))
    throw ConfigError(where + " = " + node_text(node) + ": must be " + (positive ? "> 0" : ">= 0"));
  return x;
}

}  // namespace

std::vector<optim::GroupOptions> parse_groups(const toml::node& node, const std::string& file) {
  const auto* array = node.as_array();
  if (!array || !array->is_array_of_tables())
    throw ConfigError(file + ":" + std::to_string(node.source().begin.line) +
                      ": optim.groups: expected tables ([[optim.groups]] with match = [...] and "
                      "lr_mult and/or weight_decay), got " +
                      describe_node(node));
  std::vector<optim::GroupOptions> out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const auto& table = *array->get(i)->as_table();
    const std::string where = label(file, table, i);
    optim::GroupOptions g;
    g.line = static_cast<std::int64_t>(table.source().begin.line);
    for (auto&& [key, value] : table) {
      const std::string k(key.str());
      const std::string at = where + "." + k;
      if (k == "match") {
        const auto v = from_node(ValueType::kStringList, value);
        if (!v)
          throw ConfigError(at +
                            ": expected a pattern or a list of them (\"fc.*\", "
                            "[\"*.bias\", \"bn\"]), got " +
                            describe_node(value));
        g.match = std::get<std::vector<std::string>>(*v);
        for (const auto& p : g.match)
          if (p.empty()) throw ConfigError(at + ": an empty pattern");
      } else if (k == "lr_mult") {
        g.lr_mult = number(at, value, true);
      } else if (k == "weight_decay") {
        g.weight_decay = number(at, value, false);
      } else {
        throw ConfigError(where + ": unknown key '" + k + "'" + did_you_mean(k, kGroupKeys) +
                          " (a group takes match, lr_mult, weight_decay)");
      }
    }
    if (g.match.empty())
      throw ConfigError(where +
                        ": missing key 'match' (the parameters of the group: names, "
                        "prefixes, globs such as \"*.bias\" or kinds such as \"bn\")");
    out.push_back(std::move(g));
  }
  return out;
}

toml::array groups_to_toml(const std::vector<optim::GroupOptions>& groups) {
  toml::array out;
  for (const auto& g : groups) {
    toml::table t;
    toml::array match;
    for (const auto& p : g.match) match.push_back(p);
    t.insert("match", std::move(match));
    t.insert("lr_mult", g.lr_mult);
    if (g.weight_decay) t.insert("weight_decay", *g.weight_decay);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ddp::app::detail
