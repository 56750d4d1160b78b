#pragma once
// The sorted-table format (LevelDB's, which TensorFlow's core/lib/io/table
// keeps) that a checkpoint's .index file is: data blocks of prefix-compressed
// key/value entries, an index block pointing at them, a 48-byte footer with
// a magic number; each block followed by its type byte and masked CRC-32C.
// Written here rather than taken from libleveldb-dev: LevelDB allocates a
// block's size as read from the file before checking it against the file,
// and every byte of a hostile index must be checked first.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace polyhal::detail {

/// Every key/value entry of the table in `file`, in order. Throws
/// ConfigError naming the file and the byte offset for a bad footer or
/// magic number, a block outside the file, a checksum mismatch, a
/// compressed block, or an entry that runs past its block. Files over
/// `max_bytes` are refused before reading.
std::vector<std::pair<std::string, std::string>> read_sstable(const std::filesystem::path& file,
                                                              std::uintmax_t max_bytes);

}  // namespace polyhal::detail
