#include "ddp/data/csv_list.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "../file_io.hpp"
#include "ddp/data/pack_source.hpp"
#include "ddp/data/sample_set.hpp"
#include "ddp/data/utf8_names.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

std::string trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// Splits one line into fields; a quoted field may hold commas and "" (a quote).
std::vector<std::string> split_fields(std::string_view line, const std::string& at) {
  std::vector<std::string> fields(1);
  bool quoted = false, was_quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && trim(fields.back()).empty() && !was_quoted) {
      fields.back().clear();
      quoted = was_quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
      was_quoted = false;
    } else {
      fields.back() += c;
    }
  }
  if (quoted) throw DataError(at + ": a quoted field is not closed");
  return fields;
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_negative_number(const std::string& s) {
  return s.size() > 1 && s[0] == '-' &&
         std::all_of(s.begin() + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

CsvList parse_csv_list(std::string_view text, const std::string& name) {
  struct Raw {
    std::int64_t line;
    std::string path, label;
  };
  std::vector<Raw> raw;
  std::int64_t line_no = 0;
  // A byte-order mark (spreadsheets write one when saving "CSV UTF-8") is not part of the text.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (trim(line).empty()) {
      if (end == text.size()) break;
      continue;
    }
    const std::string where = name + " line " + std::to_string(line_no);
    const auto fields = split_fields(line, where);
    if (fields.size() != 2)
      throw DataError(where + ": expected 2 columns (path,label), found " +
                      std::to_string(fields.size()) + ": '" + trim(line) + "'");
    std::string path = trim(fields[0]), label = trim(fields[1]);
    if (raw.empty() && lower(path) == "path" && lower(label) == "label") continue;  // header
    if (path.empty()) throw DataError(where + ": the path is empty");
    if (label.empty()) throw DataError(where + ": the label is empty");
    if (is_negative_number(label))
      throw DataError(where + ": label " + label +
                      " is negative; a label is a class index (0, 1, ...) or a class name");
    raw.push_back({line_no, std::move(path), std::move(label)});
  }
  if (raw.empty()) throw DataError(name + ": no rows; expected lines `path,label`");

  CsvList out;
  const auto first_name =
      std::find_if(raw.begin(), raw.end(), [](const Raw& r) { return !is_index(r.label); });
  if (first_name == raw.end()) {
    // Indices name classes 0..max: bound max before making that many names.
    const Raw* top = &raw.front();
    for (const Raw& r : raw)
      if (std::stoll(r.label) > std::stoll(top->label)) top = &r;
    const std::int64_t max = std::stoll(top->label);
    if (max >= kMaxClasses)
      throw DataError(name + " line " + std::to_string(top->line) + ": label " + top->label +
                      " would make " + std::to_string(max + 1) + " classes (0.." + top->label +
                      "); a packed file holds at most " + std::to_string(kMaxClasses) +
                      " (2^24) classes, numbered from 0");
    for (std::int64_t k = 0; k <= max; ++k) out.classes.push_back(std::to_string(k));
    for (Raw& r : raw)
      out.rows.push_back(
          {r.line, std::move(r.path), static_cast<std::int32_t>(std::stol(r.label))});
    return out;
  }
  // Names: an index among them is ambiguous ("3" the name, or class number 3?).
  std::map<std::string, std::int32_t> index;
  for (const Raw& r : raw) {
    if (is_index(r.label))
      throw DataError(name + " line " + std::to_string(r.line) + ": label '" + r.label +
                      "' is a number, but line " + std::to_string(first_name->line) + "'s label '" +
                      first_name->label +
                      "' is a class name; use class names or class indices throughout");
    if (!is_valid_utf8(r.label))
      throw DataError(name + " line " + std::to_string(r.line) + ": label '" +
                      escape_bytes(r.label) +
                      "' is not valid UTF-8; class names are written as text (metrics, reports, "
                      "TensorBoard): save the list as UTF-8 (e.g. iconv -f latin1 -t utf-8)");
    index.emplace(r.label, 0);
  }
  if (index.size() > static_cast<std::size_t>(kMaxClasses))
    throw DataError(name + ": " + std::to_string(index.size()) +
                    " distinct class names; a packed file holds at most " +
                    std::to_string(kMaxClasses) + " (2^24) classes");
  for (auto& [label, k] : index) {
    k = static_cast<std::int32_t>(out.classes.size());
    out.classes.push_back(label);
  }
  for (Raw& r : raw) out.rows.push_back({r.line, std::move(r.path), index.at(r.label)});
  return out;
}

PackSource list_csv(const std::filesystem::path& csv) {
  const auto bytes = detail::read_maybe_gzip(csv, "a CSV list of path,label rows");
  const std::string name = detail::quoted(csv);
  const CsvList list = parse_csv_list(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), name);
  PackSource src;
  const auto abs = std::filesystem::absolute(csv).lexically_normal();
  src.description = "csv:" + abs.string();
  src.classes = list.classes;
  for (const CsvRow& r : list.rows) {
    // Relative paths are relative to the CSV's folder, so a list travels with its images.
    std::filesystem::path p(r.path);
    if (p.is_relative()) p = abs.parent_path() / p;
    src.files.push_back({p, r.label, "line " + std::to_string(r.line) + " of " + name});
  }
  return src;
}

}  // namespace ddp::data
