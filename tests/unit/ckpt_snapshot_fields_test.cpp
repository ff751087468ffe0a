// The snapshot field table: every field, given a value of its own through the table (so that a
// field added later is covered without a line here), survives the HDF5 writer and reader (with our
// header and without, i.e. through the child process's codec), the state codec and inspect; an
// older file that lacks an optional field reads it as its default; docs/snapshot_format.md lists
// exactly the table's fields.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <fstream>
#include <set>
#include <span>
#include <sstream>

#include "../../src/ckpt/file_header.hpp"
#include "../../src/ckpt/snapshot_codec.hpp"
#include "../../src/ckpt/snapshot_fields.hpp"
#include "ckpt_test_util.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "layer_spec_util.hpp"

namespace ddp::ckpt {
namespace {

namespace fs = std::filesystem;

using test_util::ScratchDir;
using test_util::slurp;
using test_util::spit;
using testutil::L;

template <typename T>
using Pointee = std::remove_pointer_t<T>;

bool is_format_version(const Field& f) {
  return std::string(f.name) == "format_version";
}

// Every field a value unlike its default and unlike every other field's (format_version stays:
// the writer writes its own and the reader refuses any other).
SnapshotState every_field_set() {
  SnapshotState s;
  std::int64_t i = 0;
  for (const Field& f : snapshot_fields()) {
    ++i;
    if (is_format_version(f)) continue;
    const std::string name = f.name;
    std::visit(
        [&](auto* p) {
          using T = Pointee<decltype(p)>;
          if constexpr (std::is_same_v<T, std::int64_t>)
            *p = 1000 + i;
          else if constexpr (std::is_same_v<T, std::uint64_t>)
            *p = 0xF000000000000000ULL + static_cast<std::uint64_t>(i);  // above INT64_MAX
          else if constexpr (std::is_same_v<T, double>)
            *p = static_cast<double>(i) + 0.375;
          else if constexpr (std::is_same_v<T, std::string>)
            *p = f.stored == Stored::kText ? "first line of " + name + "\nsecond line\n"
                                           : "v-" + name;
          else
            *p = {i, 2 * i, 3 * i};
        },
        f.ref(s));
  }
  return s;
}

bool same(const Field& f, const SnapshotState& a, const SnapshotState& b) {
  return std::visit([&](auto* pa) { return *pa == *std::get<decltype(pa)>(f.at(b)); }, f.at(a));
}

void copy_field(const Field& f, const SnapshotState& from, SnapshotState& to) {
  std::visit([&](auto* p) { *p = *std::get<decltype(p)>(f.at(from)); }, f.ref(to));
}

void expect_same_fields(const SnapshotState& want, const SnapshotState& got,
                        const std::string& where) {
  for (const Field& f : snapshot_fields())
    EXPECT_TRUE(same(f, want, got)) << where << ": " << f.group << "/" << f.name << " is "
                                    << f.value_text(got) << ", want " << f.value_text(want);
}

// A small model and an optimizer with state, to write real snapshot files around the fields.
struct TinyRun {
  TinyRun()
      : model({L("conv2d", "conv1", 2, 3), L("relu", "relu1"), L("flatten", "flat"),
               L("linear", "fc1", 3)},
              Shape{1, 4, 4}, 3, *be) {
    optim::Options c;
    c.momentum = 0.9;
    opt = optim::Optimizer::create(c, *be, model.params().size());
    model.init_parameters(3);
  }
  // The state's optimizer fields go in as write_snapshot takes them: a name and the steps taken.
  void write(const fs::path& file, const SnapshotState& s) {
    opt->set_steps_taken(s.optimizer_steps);
    write_snapshot(file, model, *opt, s.optimizer_name, s.meta);
  }
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  nn::Model model;
  std::unique_ptr<optim::Optimizer> opt;
};

// Edits a written snapshot with the HDF5 C API, then stamps our header again for what the file
// now holds (`s`): the result is a verified file as a program that wrote just these fields would
// have written it.
template <typename Edit>
void edit_and_restamp(const fs::path& file, const SnapshotState& s, Edit fn) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  fn(f);
  ASSERT_GE(H5Fclose(f), 0);
  std::string bytes = slurp(file);
  stamp_header(std::span<char>(bytes.data(), bytes.size()), s.meta.position, s.meta.run_id);
  spit(file, bytes);
}

void remove_field(hid_t file, const Field& f) {
  if (f.stored == Stored::kText)
    EXPECT_GE(H5Ldelete(file, (std::string(f.group) + "/" + f.name).c_str(), H5P_DEFAULT), 0);
  else
    EXPECT_GE(H5Adelete_by_name(file, f.group, f.name, H5P_DEFAULT), 0) << f.name;
}

TEST(SnapshotFields, EveryFieldRoundTripsThroughHdf5TheCodecAndInspect) {
  const SnapshotState want = every_field_set();
  const SnapshotState defaults;
  for (const Field& f : snapshot_fields())
    if (!is_format_version(f))
      ASSERT_FALSE(same(f, want, defaults)) << f.name << " was not given a value of its own";

  ScratchDir dir;
  const fs::path file = dir.path() / "snapshot_e0001.h5";
  TinyRun run;
  run.write(file, want);
  const Snapshot read = read_snapshot(file);
  expect_same_fields(want, read, "written and read");
  // read_meta reads /meta only: the same values there.
  const SnapshotMeta meta = read_meta(file);
  SnapshotState meta_only;
  meta_only.meta = meta;
  for (const Field& f : snapshot_fields())
    if (std::string(f.group) == "/meta") EXPECT_TRUE(same(f, want, meta_only)) << f.name;

  // The state alone, as the resume broadcast sends it.
  const std::string bytes = encode_state(want);
  expect_same_fields(want, decode_state(bytes), "encoded and decoded");
  EXPECT_THROW((void)decode_state(bytes.substr(0, bytes.size() - 1)), std::runtime_error);
  EXPECT_THROW((void)decode_state(bytes + "x"), std::runtime_error);
  // The whole snapshot, as a child process hands back a file without our header.
  const Snapshot again = decode_snapshot(encode_snapshot(read));
  expect_same_fields(want, again, "snapshot encoded and decoded");
  EXPECT_EQ(again.shapes, read.shapes);
  EXPECT_EQ(again.model, read.model);
  EXPECT_EQ(again.optimizer, read.optimizer);
  std::string headerless = slurp(file);
  std::fill(headerless.begin(), headerless.begin() + kHeaderBytes, '\0');
  spit(file, headerless);
  expect_same_fields(want, read_snapshot(file), "read in a child process");

  const std::string text = inspect(file);
  for (const Field& f : snapshot_fields()) {
    const std::string line = std::string(f.group) + "/" + f.name;
    const auto at = text.find("\n  " + line + " ");
    ASSERT_NE(at, std::string::npos) << line << " not in\n" << text;
    const std::string rest = text.substr(at + 3 + line.size());
    EXPECT_EQ(rest.substr(rest.find_first_not_of(' '), f.value_text(want).size() + 1),
              f.value_text(want) + "\n")
        << line;
  }
}

// Files written before a field existed lack it: each optional field alone, then all of them at
// once (a file from before any), reads as its default. A missing required field is an error
// naming it.
TEST(SnapshotFields, AnOlderFileWithoutAnOptionalFieldReadsItsDefault) {
  const SnapshotState want = every_field_set();
  const SnapshotState defaults;
  ScratchDir dir;
  const fs::path file = dir.path() / "snapshot_e0001.h5";
  TinyRun run;
  std::size_t optional = 0;
  for (const Field& missing : snapshot_fields()) {
    if (!missing.optional) continue;
    ++optional;
    SnapshotState now = want;
    copy_field(missing, defaults, now);
    run.write(file, want);
    edit_and_restamp(file, now, [&](hid_t f) { remove_field(f, missing); });
    const Snapshot s = read_snapshot(file);
    expect_same_fields(now, s, std::string("without ") + missing.name);
  }
  EXPECT_GE(optional, 12u);

  SnapshotState oldest = defaults;
  for (const Field& f : snapshot_fields())
    if (!f.optional) copy_field(f, want, oldest);
  run.write(file, want);
  edit_and_restamp(file, oldest, [&](hid_t f) {
    for (const Field& field : snapshot_fields())
      if (field.optional) remove_field(f, field);
  });
  expect_same_fields(oldest, read_snapshot(file), "without every optional field");

  for (const Field& required : snapshot_fields()) {
    if (required.optional || is_format_version(required)) continue;
    run.write(file, want);
    edit_and_restamp(file, want, [&](hid_t f) { remove_field(f, required); });
    try {
      (void)read_snapshot(file);
      ADD_FAILURE() << "a snapshot without " << required.name << " was read";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(required.name), std::string::npos) << e.what();
    }
  }
}

// What the writer, reader and codec rely on: the version is the first field, names are unique
// within a group, texts are strings, an int64 array (not written when empty) is optional.
TEST(SnapshotFields, TableRules) {
  const auto& fields = snapshot_fields();
  ASSERT_FALSE(fields.empty());
  EXPECT_TRUE(is_format_version(fields.front()));
  EXPECT_FALSE(fields.front().optional);
  std::set<std::string> seen;
  for (const Field& f : fields) {
    const std::string group = f.group;
    EXPECT_TRUE(group == "/meta" || group == "/optimizer") << group;
    EXPECT_TRUE(seen.insert(group + "/" + f.name).second) << "twice: " << f.name;
    if (f.stored == Stored::kText) EXPECT_EQ(f.type_name(), "string") << f.name;
    if (f.type_name() == "int64 array") EXPECT_TRUE(f.optional) << f.name;
  }
}

// A program built with another table refuses the bytes rather than misread them.
TEST(SnapshotFields, BytesOfAnotherTableAreRefused) {
  std::string bytes = encode_state(every_field_set());
  bytes[0] = static_cast<char>(bytes[0] ^ 1);  // the table's digest comes first
  try {
    (void)decode_state(bytes);
    ADD_FAILURE() << "decoded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("other snapshot fields"), std::string::npos) << e.what();
  }
}

// docs/snapshot_format.md's field list is the table: name, place, type and, for an optional
// field, the default it reads as, row by row in the table's order.
TEST(SnapshotFields, DocsListEveryField) {
  std::ifstream in(fs::path(DDP_SOURCE_DIR) / "docs" / "snapshot_format.md");
  ASSERT_TRUE(in) << "docs/snapshot_format.md";
  std::vector<std::string> documented;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#", 0) == 0) in_section = line.find("/meta` and `/optimizer") != line.npos;
    if (in_section && line.rfind("| `", 0) == 0) {
      // The first four cells: the last one, the meaning, is prose.
      std::size_t end = 0;
      for (int cell = 0; cell < 4 && end != std::string::npos; ++cell)
        end = line.find(" |", end + 1);
      documented.push_back(line.substr(0, end == std::string::npos ? line.size() : end + 2));
    }
  }
  std::vector<std::string> want;
  const SnapshotState defaults;
  for (const Field& f : snapshot_fields())
    want.push_back("| `" + std::string(f.name) + "` | `" + f.group + "` " +
                   (f.stored == Stored::kText ? "dataset" : "attribute") + " | " + f.type_name() +
                   " | " + (f.optional ? "yes: " + f.value_text(defaults) : std::string("no")) +
                   " |");
  std::ostringstream rows;
  for (const auto& w : want) rows << w << " ... |\n";
  EXPECT_EQ(documented, want) << "the rows docs/snapshot_format.md should begin with:\n"
                              << rows.str();
}

}  // namespace
}  // namespace ddp::ckpt
