#include "polyhal/app/tf_checkpoint.hpp"

#include <fmt/format.h>
#include <proto/tensor_bundle.pb.h>
#include <proto/trackable_object_graph.pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "model/sstable.hpp"
#include "polyhal/dtype.hpp"
#include "polyhal/error.hpp"
#include "util/crc32c.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

// An index holds one short record per tensor: BERT-large with Adam slots
// has about 1,200 (200 KB). A larger file is not an index.
constexpr std::uintmax_t kMaxIndexBytes = std::uintmax_t{256} << 20;
constexpr std::int32_t kMaxShards = 100000;
constexpr std::size_t kMaxRank = 8;
// One tensor polyhal would read: 2^32 elements (16 GiB in f32).
constexpr std::int64_t kMaxElements = std::int64_t{1} << 32;
// Where a TF2 object-based checkpoint keeps its object graph.
constexpr const char* kObjectGraphKey = "_CHECKPOINTABLE_OBJECT_GRAPH";

struct DTypeInfo {
  const char* name;
  std::size_t bytes;  // 0: not read by polyhal
};

/// TensorFlow's DataType enum values (types.proto) that can hold weights.
DTypeInfo dtype_info(std::int32_t code) {
  switch (code) {
    case 1:
      return {"float", 4};
    case 2:
      return {"double", 8};
    case 3:
      return {"int32", 4};
    case 9:
      return {"int64", 8};
    case 14:
      return {"bfloat16", 2};
    case 19:
      return {"half", 2};
    case 4:
      return {"uint8", 0};
    case 6:
      return {"int8", 0};
    case 7:
      return {"string", 0};
    case 10:
      return {"bool", 0};
    default:
      return {"unknown", 0};
  }
}

std::filesystem::path prefix_of(const std::filesystem::path& path) {
  auto text = path.string();
  if (text.ends_with(".index")) text.resize(text.size() - 6);
  return text;
}

std::filesystem::path index_of(const std::filesystem::path& prefix) {
  return prefix.string() + ".index";
}

std::filesystem::path shard_file(const std::filesystem::path& prefix, std::int32_t shard,
                                 std::int32_t shards) {
  return prefix.string() + fmt::format(".data-{:05d}-of-{:05d}", shard, shards);
}

float to_f32(const char* p, const std::string& dtype) {
  if (dtype == "float") {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (dtype == "double") {
    double v;
    std::memcpy(&v, p, 8);
    return static_cast<float>(v);
  }
  if (dtype == "int32") {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return static_cast<float>(v);
  }
  if (dtype == "int64") {
    std::int64_t v;
    std::memcpy(&v, p, 8);
    return static_cast<float>(v);
  }
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return dtype == "bfloat16" ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

}  // namespace

bool is_tf_checkpoint(const std::filesystem::path& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::is_regular_file(index_of(prefix_of(path)), ec);
}

std::vector<std::filesystem::path> tf_checkpoints_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    if (file.path().extension() == ".index" && file.is_regular_file(ec))
      found.push_back(prefix_of(file.path()));
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::filesystem::path tf_checkpoint_in(const std::filesystem::path& dir, const std::string& where) {
  const auto found = tf_checkpoints_in(dir);
  if (found.size() == 1) return found.front();
  if (found.empty())
    throw ConfigError(
        fmt::format("{}: no TensorFlow checkpoint here (PREFIX.index and its shards, as Google's "
                    "bert_model.ckpt)",
                    dir.string()));
  throw ConfigError(fmt::format("{}: {} TensorFlow checkpoints ({} ... {}): give one {}, e.g. {}",
                                dir.string(), found.size(), found.front().filename().string(),
                                found.back().filename().string(), where, found.back().string()));
}

TfCheckpoint::TfCheckpoint(const std::filesystem::path& path) : prefix_(prefix_of(path)) {
  const auto index = index_of(prefix_);
  const auto records = detail::read_sstable(index, kMaxIndexBytes);
  const auto fail = [&](const std::string& key, const std::string& what) {
    throw ConfigError(fmt::format("{}: {}{}", index.string(),
                                  key.empty() ? std::string("header") : "tensor '" + key + "'",
                                  ": " + what));
  };
  if (records.empty() || !records.front().first.empty())
    throw ConfigError(
        fmt::format("{}: no bundle header record: not a TensorFlow checkpoint "
                    "index (a TF1 .ckpt without .index is not supported)",
                    index.string()));
  tfproto::BundleHeader header;
  if (!header.ParseFromString(records.front().second)) fail("", "not a BundleHeaderProto");
  if (header.num_shards() < 1 || header.num_shards() > kMaxShards)
    fail("", fmt::format("{} shards (1 to {} expected)", header.num_shards(), kMaxShards));
  if (header.endianness() != tfproto::BundleHeader::LITTLE)
    fail("", "big-endian tensors are not supported");
  std::vector<std::uintmax_t> shard_sizes;
  for (std::int32_t s = 0; s < header.num_shards(); ++s) {
    shards_.push_back(shard_file(prefix_, s, header.num_shards()));
    std::error_code ec;
    if (!std::filesystem::is_regular_file(shards_.back(), ec))
      throw ConfigError(fmt::format("{}: missing: the index {} names {} shard{}",
                                    shards_.back().string(), index.string(), header.num_shards(),
                                    header.num_shards() == 1 ? "" : "s"));
    shard_sizes.push_back(std::filesystem::file_size(shards_.back()));
  }
  // TensorFlow writes each tensor's bytes once: tensors that share bytes
  // would be decoded again and again from a small file.
  std::vector<std::uint64_t> claimed(shard_sizes.size(), 0);
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto& [key, value] = records[r];
    tfproto::BundleEntry record;
    if (!record.ParseFromString(value)) fail(key, "not a BundleEntryProto");
    if (record.slices_size() > 0)
      fail(key, "a partitioned (sliced) variable; polyhal reads whole tensors only");
    TfTensorEntry entry;
    const auto info = dtype_info(record.dtype());
    entry.dtype = info.name;
    if (record.shape().unknown_rank() ||
        static_cast<std::size_t>(record.shape().dim_size()) > kMaxRank)
      fail(key, "a shape of unknown or more than 8 dimensions");
    std::int64_t elements = 1;
    for (const auto& dim : record.shape().dim()) {
      if (dim.size() < 0 || (dim.size() > 0 && elements > kMaxElements / dim.size()))
        fail(key, fmt::format("dimension {} is negative or makes the tensor larger than 2^32 "
                              "elements",
                              dim.size()));
      elements *= dim.size();
      entry.shape.push_back(dim.size());
    }
    if (record.shard_id() < 0 || record.shard_id() >= header.num_shards())
      fail(key, fmt::format("shard {} of {}", record.shard_id(), header.num_shards()));
    if (record.offset() < 0 || record.size() < 0) fail(key, "a negative offset or size");
    entry.shard = record.shard_id();
    entry.offset = static_cast<std::uint64_t>(record.offset());
    entry.size = static_cast<std::uint64_t>(record.size());
    entry.masked_crc32c = record.crc32c();
    const auto shard_size = shard_sizes[static_cast<std::size_t>(entry.shard)];
    if (entry.offset > shard_size || entry.size > shard_size - entry.offset)
      fail(key, fmt::format("bytes {} to {} lie past the end of {} ({} bytes): truncated shard",
                            entry.offset, entry.offset + entry.size,
                            shards_[static_cast<std::size_t>(entry.shard)].string(), shard_size));
    auto& used = claimed[static_cast<std::size_t>(entry.shard)];
    if (entry.size > shard_size - used)
      fail(key, fmt::format("with it the index places more tensor bytes in {} than its {} bytes: "
                            "tensors that share bytes (a damaged or crafted index)",
                            shards_[static_cast<std::size_t>(entry.shard)].string(), shard_size));
    used += entry.size;
    entry.element_bytes = info.bytes;
    if (info.bytes > 0 && entry.size != static_cast<std::uint64_t>(elements) * info.bytes)
      fail(key, fmt::format("{} bytes for {} {} elements of {} bytes", entry.size, elements,
                            info.name, info.bytes));
    entries_.emplace(key, std::move(entry));
  }
  name_by_object_graph();
}

HostTensor TfCheckpoint::read(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end())
    throw ConfigError(fmt::format("{}: no tensor '{}'", index_of(prefix_).string(), name));
  const auto& entry = it->second;
  const auto& shard = shards_[static_cast<std::size_t>(entry.shard)];
  if (entry.element_bytes == 0)
    throw ConfigError(fmt::format("{}: tensor '{}' is {}, not a number type polyhal reads",
                                  shard.string(), name, entry.dtype));
  const std::string bytes = checked_bytes(name, entry);
  HostTensor out;
  out.shape = entry.shape;
  const std::size_t width = entry.element_bytes;
  out.values.resize(bytes.size() / width);
  for (std::size_t i = 0; i < out.values.size(); ++i)
    out.values[i] = to_f32(bytes.data() + i * width, entry.dtype);
  return out;
}

std::int64_t TfCheckpoint::read_step(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end())
    throw ConfigError(fmt::format("{}: no tensor '{}'", index_of(prefix_).string(), name));
  const auto& entry = it->second;
  const auto refused = [&](const std::string& what) {
    return ConfigError(
        fmt::format("{}: tensor '{}' {}: not a step count (a whole number from 0 to below 1e18)",
                    shards_[static_cast<std::size_t>(entry.shard)].string(), name, what));
  };
  if (entry.element_bytes == 0 || entry.size != entry.element_bytes)
    throw refused(fmt::format("is {} of {} bytes", entry.dtype, entry.size));
  const std::string bytes = checked_bytes(name, entry);
  constexpr std::int64_t kLimit = 1'000'000'000'000'000'000;
  // Integers exactly: through a float, 16777217 would be 16777216.
  if (entry.dtype == "int64" || entry.dtype == "int32") {
    std::int64_t value = 0;
    if (entry.dtype == "int64") {
      std::memcpy(&value, bytes.data(), 8);
    } else {
      std::int32_t narrow = 0;
      std::memcpy(&narrow, bytes.data(), 4);
      value = narrow;
    }
    if (value < 0 || value >= kLimit) throw refused(fmt::format("is {}", value));
    return value;
  }
  double value = 0;
  if (entry.dtype == "double")
    std::memcpy(&value, bytes.data(), 8);
  else
    value = to_f32(bytes.data(), entry.dtype);
  if (!(value >= 0.0 && value < static_cast<double>(kLimit)) || value != std::floor(value))
    throw refused(fmt::format("is {}", value));
  return static_cast<std::int64_t>(value);
}

std::string TfCheckpoint::checked_bytes(const std::string& name, const TfTensorEntry& entry) const {
  const auto& shard = shards_[static_cast<std::size_t>(entry.shard)];
  std::string bytes(static_cast<std::size_t>(entry.size), '\0');
  std::ifstream in(shard, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(entry.offset));
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw ConfigError(fmt::format("{}: cannot read tensor '{}' at byte {} ({} bytes)",
                                  shard.string(), name, entry.offset, entry.size));
  const auto crc = detail::mask_crc32c(detail::crc32c(bytes.data(), bytes.size()));
  if (crc != entry.masked_crc32c)
    throw ConfigError(
        fmt::format("{}: tensor '{}' at byte {} fails its checksum (index says "
                    "{:#010x}, data gives {:#010x}): the shard is damaged",
                    shard.string(), name, entry.offset, entry.masked_crc32c, crc));
  return bytes;
}

std::string TfCheckpoint::read_string(const std::string& name, const TfTensorEntry& entry) const {
  // A scalar string tensor as tensor_bundle writes it: the length as a
  // varint64, a masked CRC-32C of the length (taken as 4 little-endian
  // bytes), the bytes; the entry's CRC extends over the length (as 4
  // bytes), the length's CRC and the bytes.
  const auto& shard = shards_[static_cast<std::size_t>(entry.shard)];
  const auto fail = [&](const std::string& what) {
    return ConfigError(fmt::format("{}: string tensor '{}' at byte {}: {}", shard.string(), name,
                                   entry.offset, what));
  };
  std::string bytes(static_cast<std::size_t>(entry.size), '\0');
  std::ifstream in(shard, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(entry.offset));
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw fail(fmt::format("cannot read {} bytes", entry.size));
  std::uint64_t length = 0;
  std::size_t at = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (at >= bytes.size() || shift > 63) throw fail("a malformed length");
    const auto byte = static_cast<unsigned char>(bytes[at++]);
    length |= std::uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80u) == 0) break;
  }
  if (bytes.size() - at < 4 || length != bytes.size() - at - 4)
    throw fail(fmt::format("a length of {} in {} bytes", length, bytes.size()));
  std::uint32_t crc = 0;
  if (length <= 0xffffffffu) {
    const auto length32 = static_cast<std::uint32_t>(length);
    crc = detail::crc32c_extend(crc, &length32, 4);
  } else {
    crc = detail::crc32c_extend(crc, &length, 8);
  }
  std::uint32_t stored = 0;
  std::memcpy(&stored, bytes.data() + at, 4);
  if (detail::mask_crc32c(crc) != stored) throw fail("its length fails its checksum");
  crc = detail::crc32c_extend(crc, bytes.data() + at, 4);
  crc = detail::crc32c_extend(crc, bytes.data() + at + 4, static_cast<std::size_t>(length));
  if (detail::mask_crc32c(crc) != entry.masked_crc32c) throw fail("fails its checksum (damaged)");
  return bytes.substr(at + 4);
}

void TfCheckpoint::name_by_object_graph() {
  const auto graph_entry = entries_.find(kObjectGraphKey);
  if (graph_entry == entries_.end() || graph_entry->second.dtype != "string" ||
      !graph_entry->second.shape.empty())
    return;  // a TF1 name-based checkpoint: the keys are the variables' names
  const auto index = index_of(prefix_).string();
  // A scalar string tensor: varint64 length, 4 bytes of checksum over the
  // lengths, the bytes (TensorFlow's tensor_bundle string layout).
  const std::string text = read_string(kObjectGraphKey, graph_entry->second);
  tfproto::TrackableObjectGraph graph;
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !graph.ParseFromArray(text.data(), static_cast<int>(text.size())))
    throw ConfigError(fmt::format("{}: {}: not a TrackableObjectGraph", index, kObjectGraphKey));
  // Each variable's value under the name it was created with; an optimizer
  // slot under its variable's name and the slot's (m -> adam_m, v -> adam_v).
  std::map<std::string, std::string> rename;  // checkpoint key -> name
  const auto value_key =
      [&](int node) -> const tfproto::TrackableObjectGraph::TrackableObject::SerializedTensor* {
    if (node < 0 || node >= graph.nodes_size()) return nullptr;
    for (const auto& attribute : graph.nodes(node).attributes())
      if (attribute.name() == "VARIABLE_VALUE") return &attribute;
    return nullptr;
  };
  for (int n = 0; n < graph.nodes_size(); ++n) {
    const auto* value = value_key(n);
    if (value && !value->full_name().empty()) rename[value->checkpoint_key()] = value->full_name();
  }
  // Second: a slot variable has a name of its own ("kernel/Adam_1"); the
  // slot reference says what it is.
  for (const auto& node : graph.nodes()) {
    for (const auto& slot : node.slot_variables()) {
      const auto* original = value_key(slot.original_variable_node_id());
      const auto* slot_value = value_key(slot.slot_variable_node_id());
      if (!original || !slot_value || original->full_name().empty()) continue;
      const std::string suffix = slot.slot_name() == "m"   ? "adam_m"
                                 : slot.slot_name() == "v" ? "adam_v"
                                                           : slot.slot_name();
      rename[slot_value->checkpoint_key()] = original->full_name() + "/" + suffix;
    }
  }
  std::map<std::string, TfTensorEntry> named;
  for (auto& [key, entry] : entries_) {
    const auto it = rename.find(key);
    const std::string& name = it == rename.end() ? key : it->second;
    if (!named.emplace(name, std::move(entry)).second)
      throw ConfigError(
          fmt::format("{}: two tensors are named '{}' by the object graph", index, name));
  }
  entries_ = std::move(named);
}

}  // namespace polyhal
