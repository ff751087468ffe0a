// Values of configuration keys: parsing command-line text and TOML nodes, formatting for messages
// and output, and "did you mean" suggestions.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include "ddp/app/config_detail.hpp"

namespace ddp::app::detail {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Whole-string number parse; a leading '+' is allowed as in TOML.
template <class T>
std::optional<T> parse_number(std::string_view s) {
  s = trim(s);
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> node_number(const toml::node& n) {
  if (const auto* f = n.as_floating_point()) return f->get();
  if (const auto* i = n.as_integer()) return static_cast<double>(i->get());
  return std::nullopt;
}

// Optimal string alignment distance: Levenshtein plus adjacent transpositions ("epcohs").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

}  // namespace

// The placeholder --help shows for a value of type t ("INT", "FLOATS", ...).
std::string type_label(ValueType t) {
  switch (t) {
    case ValueType::kInt:
      return "INT";
    case ValueType::kFloat:
      return "FLOAT";
    case ValueType::kBool:
      return "BOOL";
    case ValueType::kString:
      return "TEXT";
    case ValueType::kFloatList:
      return "FLOATS";
    case ValueType::kIntPair:
      return "INT|H,W";
    case ValueType::kStringList:
      return "NAMES";
    case ValueType::kWordOrNumbers:
      return "WORD|NUMBERS";
  }
  return "VALUE";
}

std::string_view type_noun(ValueType t) {
  switch (t) {
    case ValueType::kInt:
      return "an integer";
    case ValueType::kFloat:
      return "a float";
    case ValueType::kBool:
      return "a boolean";
    case ValueType::kString:
      return "a string";
    case ValueType::kFloatList:
      return "a list of floats";
    case ValueType::kIntPair:
      return "an integer or [height, width]";
    case ValueType::kStringList:
      return "a layer name or a list of layer names";
    case ValueType::kWordOrNumbers:
      return "a word or numbers";
  }
  return "a value";
}

std::string format_float(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

std::string format_floats(const std::vector<double>& values) {
  std::string out;
  for (double x : values) {
    if (!out.empty()) out += ',';
    out += format_float(x);
  }
  return out;
}

std::string format_value(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return format_float(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v)) return s->empty() ? "\"\"" : *s;
  if (const auto* p = std::get_if<IntPair>(&v)) {
    if ((*p)[0] == (*p)[1]) return std::to_string((*p)[0]);
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict, its bug 105329) on "[" + ....
    std::string out = "[";
    out += std::to_string((*p)[0]);
    out += ", ";
    out += std::to_string((*p)[1]);
    return out + "]";
  }
  if (const auto* names = std::get_if<std::vector<std::string>>(&v)) {
    std::string out;
    for (const auto& n : *names) out += (out.empty() ? "" : ",") + n;
    return out;
  }
  if (const auto* wn = std::get_if<WordOrNumbers>(&v)) {
    if (wn->numbers.empty()) return wn->word.empty() ? "\"\"" : wn->word;
    return format_floats(wn->numbers);
  }
  return format_floats(std::get<std::vector<double>>(v));
}

std::optional<Value> parse_text(ValueType t, std::string_view text) {
  switch (t) {
    case ValueType::kInt:
      if (auto v = parse_number<std::int64_t>(text)) return Value{*v};
      return std::nullopt;
    case ValueType::kFloat:
      if (auto v = parse_number<double>(text)) return Value{*v};
      return std::nullopt;
    case ValueType::kBool: {
      std::string s(trim(text));
      std::transform(s.begin(), s.end(), s.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (s == "true" || s == "1" || s == "yes") return Value{true};
      if (s == "false" || s == "0" || s == "no") return Value{false};
      return std::nullopt;
    }
    case ValueType::kString:
      // `""` is how --help shows an empty default, so accept it back as one.
      return Value{text == "\"\"" ? std::string() : std::string(text)};
    case ValueType::kFloatList: {
      std::string_view s = trim(text);
      if (!s.empty() && s.front() == '[') {
        if (s.back() != ']') return std::nullopt;
        s = trim(s.substr(1, s.size() - 2));
        if (!s.empty() && s.back() == ',') s = trim(s.substr(0, s.size() - 1));  // TOML allows it
      }
      std::vector<double> out;
      while (!s.empty()) {
        const auto comma = s.find(',');
        auto v = parse_number<double>(s.substr(0, comma));
        if (!v) return std::nullopt;
        out.push_back(*v);
        if (comma == std::string_view::npos) break;
        s.remove_prefix(comma + 1);
        if (trim(s).empty()) return std::nullopt;  // "0.5," outside brackets
      }
      return Value{std::move(out)};
    }
    case ValueType::kIntPair: {
      auto list = parse_text(ValueType::kFloatList, text);
      if (!list) return std::nullopt;
      const auto& xs = std::get<std::vector<double>>(*list);
      if (xs.size() != 1 && xs.size() != 2) return std::nullopt;
      IntPair out{};
      for (std::size_t i = 0; i < 2; ++i) {
        const double x = xs[xs.size() == 1 ? 0 : i];
        if (x != static_cast<double>(static_cast<std::int64_t>(x))) return std::nullopt;
        out[i] = static_cast<std::int64_t>(x);
      }
      return Value{out};
    }
    case ValueType::kWordOrNumbers: {
      // Numbers when the text reads as numbers ("3,1,2", "[3, 1, 2]", "40"), else a word, which
      // the key's check holds against its choices ("3,x,2" is refused there, quoted).
      if (auto list = parse_text(ValueType::kFloatList, text);
          list && !std::get<std::vector<double>>(*list).empty())
        return Value{WordOrNumbers{"", std::get<std::vector<double>>(*list)}};
      return Value{WordOrNumbers{std::string(trim(text)), {}}};
    }
    case ValueType::kStringList: {
      std::vector<std::string> out;
      std::string_view s = trim(text);
      while (!s.empty()) {
        const auto comma = s.find(',');
        out.emplace_back(trim(s.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        s.remove_prefix(comma + 1);
      }
      return Value{std::move(out)};
    }
  }
  return std::nullopt;
}

std::optional<Value> from_node(ValueType t, const toml::node& node) {
  switch (t) {
    case ValueType::kInt:
      if (const auto* i = node.as_integer()) return Value{i->get()};
      return std::nullopt;
    case ValueType::kFloat:
      if (auto d = node_number(node)) return Value{*d};
      return std::nullopt;
    case ValueType::kBool:
      if (const auto* b = node.as_boolean()) return Value{b->get()};
      return std::nullopt;
    case ValueType::kString:
      if (const auto* s = node.as_string()) return Value{s->get()};
      return std::nullopt;
    case ValueType::kFloatList: {
      if (auto d = node_number(node)) return Value{std::vector<double>{*d}};
      const auto* arr = node.as_array();
      if (!arr) return std::nullopt;
      std::vector<double> out;
      for (const auto& e : *arr) {
        auto d = node_number(e);
        if (!d) return std::nullopt;
        out.push_back(*d);
      }
      return Value{std::move(out)};
    }
    case ValueType::kIntPair: {
      if (const auto* i = node.as_integer()) return Value{IntPair{i->get(), i->get()}};
      const auto* arr = node.as_array();
      if (!arr || arr->size() != 2) return std::nullopt;
      IntPair out{};
      for (std::size_t k = 0; k < 2; ++k) {
        const auto* i = arr->get(k)->as_integer();
        if (!i) return std::nullopt;
        out[k] = i->get();
      }
      return Value{out};
    }
    case ValueType::kWordOrNumbers: {
      if (const auto* str = node.as_string()) return Value{WordOrNumbers{str->get(), {}}};
      auto list = from_node(ValueType::kFloatList, node);
      if (!list) return std::nullopt;
      return Value{WordOrNumbers{"", std::get<std::vector<double>>(*list)}};
    }
    case ValueType::kStringList: {
      if (const auto* str = node.as_string()) return Value{std::vector<std::string>{str->get()}};
      const auto* arr = node.as_array();
      if (!arr) return std::nullopt;
      std::vector<std::string> out;
      for (const auto& e : *arr) {
        const auto* str = e.as_string();
        if (!str) return std::nullopt;
        out.push_back(str->get());
      }
      return Value{std::move(out)};
    }
  }
  return std::nullopt;
}

std::string node_text(const toml::node& node) {
  if (const auto* f = node.as_floating_point()) return format_float(f->get());
  if (node.is_table()) return "{...}";
  std::ostringstream os;
  // No flags: plain double-quoted strings, no indentation.
  os << toml::toml_formatter(node, toml::format_flags::none);
  return os.str();
}

std::string describe_node(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array " + node_text(node);
    case toml::node_type::string:
      return "string " + node_text(node);
    case toml::node_type::integer:
      return "integer " + node_text(node);
    case toml::node_type::floating_point:
      return "float " + node_text(node);
    case toml::node_type::boolean:
      return "boolean " + node_text(node);
    case toml::node_type::date:
      return "date " + node_text(node);
    case toml::node_type::time:
      return "time " + node_text(node);
    case toml::node_type::date_time:
      return "date-time " + node_text(node);
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  std::size_t best_d = 0;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (!best || d < best_d) {
      best = &c;
      best_d = d;
    }
  }
  // About one edit per three characters of the longer word; never one that replaces everything.
  const std::size_t longer = best ? std::max(word.size(), best->size()) : 0;
  if (!best || best_d == 0 || best_d > std::max<std::size_t>(1, longer / 3) || best_d >= longer)
    return std::nullopt;
  return *best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  if (auto n = nearest(word, candidates)) return "; did you mean '" + *n + "'?";
  return "";
}

}  // namespace ddp::app::detail
