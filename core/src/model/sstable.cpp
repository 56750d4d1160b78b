#include "model/sstable.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string_view>

#include "polyhal/error.hpp"
#include "util/crc32c.hpp"
#include "util/regular_file.hpp"

namespace polyhal::detail {
namespace {

constexpr std::uint64_t kMagic = 0xdb4775248b80fb57ull;
constexpr std::size_t kFooterBytes = 48;  // two block handles padded to 40, then the magic
constexpr std::size_t kTrailerBytes = 5;  // type byte + masked CRC-32C

/// A cursor over bytes that knows where they came from, for the messages.
class Cursor {
 public:
  Cursor(std::string_view bytes, std::uint64_t file_offset, const std::filesystem::path& file)
      : bytes_(bytes), base_(file_offset), file_(file) {}

  std::uint64_t varint(int max_bits) {
    std::uint64_t value = 0;
    for (int shift = 0; shift < max_bits; shift += 7) {
      if (at_ >= bytes_.size()) fail("a number runs past its block");
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7fu) << shift;
      if ((byte & 0x80u) == 0) return value;
    }
    fail("a number that never ends");
  }

  std::string_view take(std::uint64_t count) {
    if (count > bytes_.size() - at_) fail(fmt::format("{} bytes run past their block", count));
    const auto out = bytes_.substr(at_, static_cast<std::size_t>(count));
    at_ += static_cast<std::size_t>(count);
    return out;
  }

  bool done() const { return at_ >= bytes_.size(); }

  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(
        fmt::format("{}: byte {}: {} (not a TensorFlow checkpoint index, or a "
                    "damaged one)",
                    file_.string(), base_ + at_, what));
  }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
  std::uint64_t base_;
  const std::filesystem::path& file_;
};

struct BlockHandle {
  std::uint64_t offset;
  std::uint64_t size;
};

BlockHandle read_handle(Cursor& cursor) {
  const auto offset = cursor.varint(64);
  const auto size = cursor.varint(64);
  return {offset, size};
}

std::uint32_t load_u32(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian, as the format and every machine polyhal runs on
}

/// A block's contents, after checking that it lies in the file and that its
/// checksum holds.
std::string_view block(const std::string& data, BlockHandle handle,
                       const std::filesystem::path& file) {
  const std::uint64_t size = data.size();
  if (handle.offset > size || handle.size > size - handle.offset ||
      kTrailerBytes > size - handle.offset - handle.size)
    throw ConfigError(
        fmt::format("{}: a block at byte {} of {} bytes runs past the end of the "
                    "{}-byte file (truncated or damaged)",
                    file.string(), handle.offset, handle.size, size));
  const char* start = data.data() + handle.offset;
  const auto length = static_cast<std::size_t>(handle.size);
  const char type = start[length];
  if (type != 0)
    throw ConfigError(
        fmt::format("{}: the block at byte {} is compressed (type {}); TensorFlow "
                    "writes checkpoint indexes uncompressed",
                    file.string(), handle.offset, static_cast<int>(type)));
  const std::uint32_t stored = load_u32(start + length + 1);
  const std::uint32_t actual = mask_crc32c(crc32c(start, length + 1));
  if (stored != actual)
    throw ConfigError(
        fmt::format("{}: the block at byte {} fails its checksum (stored {:#010x}, "
                    "computed {:#010x}): the file is damaged",
                    file.string(), handle.offset, stored, actual));
  return {start, length};
}

// Keys share prefixes, so a small file could describe huge keys: a tensor
// name is short, and what the entries take in memory is bounded.
constexpr std::size_t kMaxKeyBytes = 1 << 16;
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{64} << 20;

/// The entries of one block, appended to `out`; `budget` is what entries may
/// still take in memory.
void read_block(std::string_view contents, std::uint64_t offset, const std::filesystem::path& file,
                std::vector<std::pair<std::string, std::string>>& out, std::uint64_t& budget) {
  Cursor whole(contents, offset, file);
  if (contents.size() < 4) whole.fail("a block too short for its restart count");
  const std::uint64_t restarts = load_u32(contents.data() + contents.size() - 4);
  if (restarts > (contents.size() - 4) / 4) whole.fail("a block's restart count exceeds it");
  const auto entries_end = contents.size() - 4 - static_cast<std::size_t>(restarts) * 4;
  Cursor cursor(contents.substr(0, entries_end), offset, file);
  std::string key;
  while (!cursor.done()) {
    const auto shared = cursor.varint(35);
    const auto unshared = cursor.varint(35);
    const auto value_size = cursor.varint(35);
    if (shared > key.size()) cursor.fail("an entry shares more of the key than there is");
    key.resize(static_cast<std::size_t>(shared));
    if (unshared > kMaxKeyBytes - key.size()) cursor.fail("a key longer than 64 KiB");
    key += cursor.take(unshared);
    const auto value = cursor.take(value_size);
    // An entry costs its text and its place in the list, even when empty.
    const std::uint64_t cost = key.size() + value.size() + sizeof(out.front());
    if (cost > budget) cursor.fail("entries that would take more memory than the file can justify");
    budget -= cost;
    out.emplace_back(key, std::string(value));
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> read_sstable(const std::filesystem::path& file,
                                                              std::uintmax_t max_bytes) {
  refuse_special_or_oversized_file(file, max_bytes, "TensorFlow checkpoint index");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the checkpoint index", file.string()));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < kFooterBytes)
    throw ConfigError(fmt::format("{}: {} bytes, too short for a checkpoint index's footer",
                                  file.string(), data.size()));
  const std::size_t footer_at = data.size() - kFooterBytes;
  std::uint64_t magic;
  std::memcpy(&magic, data.data() + data.size() - 8, 8);
  if (magic != kMagic)
    throw ConfigError(
        fmt::format("{}: no table magic number at the end: not a TensorFlow "
                    "checkpoint index",
                    file.string()));
  Cursor footer(std::string_view(data).substr(footer_at, 40), footer_at, file);
  read_handle(footer);  // the meta-index block: TensorFlow writes no filters
  const auto index_handle = read_handle(footer);
  std::uint64_t budget = kMaxEntryBytes + 16 * std::uint64_t{data.size()};
  std::vector<std::pair<std::string, std::string>> index;
  read_block(block(data, index_handle, file), index_handle.offset, file, index, budget);
  std::vector<std::pair<std::string, std::string>> out;
  // TensorFlow writes the data blocks one after another: a block named
  // twice, or overlapping the one before, would be read again and again.
  std::uint64_t next_free = 0;
  for (const auto& [last_key, handle_bytes] : index) {
    Cursor cursor(handle_bytes, index_handle.offset, file);
    const auto handle = read_handle(cursor);
    if (handle.offset < next_free)
      cursor.fail(
          fmt::format("the index names a block at byte {}, before the end of the block "
                      "before it (byte {}): blocks named twice or overlapping",
                      handle.offset, next_free));
    read_block(block(data, handle, file), handle.offset, file, out, budget);
    next_free = handle.offset + handle.size + kTrailerBytes;
  }
  return out;
}

}  // namespace polyhal::detail
