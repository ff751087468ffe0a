#pragma once
// Image lists in CSV (`ddp_train pack --format csv`): one row `path,label` per sample, kept in
// row order; an optional first row `path,label` is a header. Fields may be double-quoted (RFC
// 4180, "" for a quote inside), so paths may hold commas; blank lines are skipped; CRLF is fine.
// Labels are class indices when every label is a non-negative integer (classes "0".."max"),
// otherwise class names (classes sorted by name, as ImageFolder sorts folders); a negative number,
// an empty label or an index among names is an error naming the line.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::data {

struct CsvRow {
  std::int64_t line = 0;  // 1-based line in the file
  std::string path;
  std::int32_t label = 0;
};

struct CsvList {
  std::vector<std::string> classes;
  std::vector<CsvRow> rows;
};

// Parses the text of a list; `name` (the file) starts every error message.
CsvList parse_csv_list(std::string_view text, const std::string& name);

}  // namespace ddp::data
