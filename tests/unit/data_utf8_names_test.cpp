// Class names must be valid UTF-8 (they are written as JSON, HTML, TensorBoard text); the check
// follows RFC 3629, and messages show a bad name's bytes escaped.
#include <gtest/gtest.h>

#include "ddp/data/utf8_names.hpp"

namespace ddp::data {
namespace {

TEST(Utf8Names, AcceptsWellFormedText) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("Ankle boot"));
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9"));               // é
  EXPECT_TRUE(is_valid_utf8("\xe6\x97\xa5\xe6\x9c\xac"));  // 日本
  EXPECT_TRUE(is_valid_utf8("\xf0\x9f\x90\x88"));          // U+1F408 (4 bytes)
  EXPECT_TRUE(is_valid_utf8("\xf4\x8f\xbf\xbf"));          // U+10FFFF, the last code point
}

TEST(Utf8Names, RefusesMalformedText) {
  EXPECT_FALSE(is_valid_utf8("caf\xe9"));           // Latin-1 é
  EXPECT_FALSE(is_valid_utf8("\xc3"));              // cut short
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xe0\x80\xaf"));      // overlong, 3 bytes
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // a surrogate (U+D800)
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\x80"));              // a continuation byte alone
  EXPECT_FALSE(is_valid_utf8("\xff"));
}

TEST(Utf8Names, EscapesWhatIsNotText) {
  EXPECT_EQ(escape_bytes("caf\xe9"), "caf\\xe9");
  EXPECT_EQ(escape_bytes("caf\xc3\xa9"), "caf\xc3\xa9");  // valid UTF-8 stays as it is
  EXPECT_EQ(escape_bytes("a\nb\\c"), "a\\x0ab\\x5cc");
}

}  // namespace
}  // namespace ddp::data
