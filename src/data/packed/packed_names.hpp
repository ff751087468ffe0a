#pragma once
// The packed format's names that the packed reader, stream and writer use unqualified in ddp::data,
// declared one by one: `using namespace packed` would also carry packed::detail into the files
// compiled after them in a unity batch, where data::detail then becomes ambiguous.
#include "ddp/data/packed_format.hpp"

namespace ddp::data {

using packed::chunk_count;
using packed::chunk_range;
using packed::crc32_of;
using packed::Encoding;
using packed::encoding_name;
using packed::Header;
using packed::kChunkCrc;
using packed::kClasses;
using packed::kEncoded;
using packed::kFormatName;
using packed::kFormatVersion;
using packed::kImages;
using packed::kLabels;
using packed::kOffsets;
using packed::kTargetChunkBytes;
using packed::Range;
using packed::raw_samples_per_chunk;
using packed::read_header;
using packed::samples_overlapping;

}  // namespace ddp::data
