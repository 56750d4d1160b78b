#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/json_input.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "model/safetensors_index.hpp"
#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;  // as the reference implementation

std::optional<DType> dtype_from_safetensors(const std::string& name) {
  if (name == "F32") return DType::f32;
  if (name == "BF16") return DType::bf16;
  if (name == "F16") return DType::f16;
  // Integer buffers a model saves beside its weights (BertModel's
  // embeddings.position_ids): read exactly as f32 up to 2^24.
  if (name == "I64") return DType::i64;
  if (name == "I32") return DType::i32;
  return std::nullopt;
}

const char* safetensors_dtype(DType type) {
  switch (type) {
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    default:
      throw RuntimeFailure(fmt::format("safetensors: cannot write dtype {}", dtype_name(type)));
  }
}

}  // namespace

namespace {

TensorMap read_one_safetensors(const std::filesystem::path& file) {
  const std::string where = file.string();
  detail::refuse_special_file(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot open the weights file", where));
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(file, ec);
  std::uint8_t length_bytes[8] = {};
  if (ec || file_size < 8 || !in.read(reinterpret_cast<char*>(length_bytes), 8)) {
    throw ConfigError(fmt::format("{}: truncated: shorter than the 8-byte header length", where));
  }
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length_bytes[i];
  if (header_size > kMaxHeaderBytes || header_size > file_size - 8) {
    throw ConfigError(fmt::format("{}: byte 0: header length {} exceeds the file ({} bytes)", where,
                                  header_size, file_size));
  }
  std::string header_text(header_size, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_size));
  nlohmann::json header;
  try {
    header = parse_json_input(header_text,
                              fmt::format("{}: bytes 8-{}: header", where, 8 + header_size));
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number like 1e999
    throw ConfigError(fmt::format("{}: bytes 8-{}: header is not valid JSON: {}", where,
                                  8 + header_size, e.what()));
  }
  if (!header.is_object()) throw ConfigError(fmt::format("{}: header is not a JSON object", where));
  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_size = file_size - data_start;

  // Every tensor's bytes are its own: overlapping ranges would let a small
  // file decode the same bytes into many large tensors.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::string>> ranges;  // begin -> (end, name)
  TensorMap tensors;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string tensor = fmt::format("{}: tensor '{}'", where, name);
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets")) {
      throw ConfigError(
          fmt::format("{}: header entry needs dtype, shape and data_offsets", tensor));
    }
    const auto type =
        dtype_from_safetensors(info["dtype"].is_string() ? info["dtype"].get<std::string>() : "");
    if (!type) {
      throw ConfigError(fmt::format("{}: dtype {} is not supported (F32, BF16, F16, I64, I32)",
                                    tensor, json_excerpt(info["dtype"])));
    }
    HostTensor t;
    std::uint64_t begin = 0, end = 0;
    try {
      t.shape = info["shape"].get<Shape>();
      begin = info["data_offsets"].at(0).get<std::uint64_t>();
      end = info["data_offsets"].at(1).get<std::uint64_t>();
    } catch (const nlohmann::json::exception&) {
      throw ConfigError(fmt::format("{}: malformed shape or data_offsets", tensor));
    }
    // The element count, checked against what the file can hold before any
    // product can wrap.
    std::uint64_t count = 1;
    const std::uint64_t most = data_size / dtype_size(*type);
    for (const std::int64_t dim : t.shape) {
      if (dim < 0 || (dim > 0 && count > most / static_cast<std::uint64_t>(dim))) {
        throw ConfigError(fmt::format("{}: shape {} holds more elements than the file's {} bytes",
                                      tensor, shape_string(t.shape), data_size));
      }
      count *= static_cast<std::uint64_t>(dim);
    }
    if (end < begin || end - begin != count * dtype_size(*type)) {
      throw ConfigError(fmt::format("{}: data_offsets [{}, {}] hold {} bytes but {} {} needs {}",
                                    tensor, begin, end, end - begin, shape_string(t.shape),
                                    info["dtype"].get<std::string>(), count * dtype_size(*type)));
    }
    if (end > data_size) {
      throw ConfigError(
          fmt::format("{}: data ends at byte {} but the file has {} bytes: truncated file", tensor,
                      data_start + end, file_size));
    }
    if (begin < end) {
      const auto next = ranges.lower_bound(begin);
      const bool overlaps_next = next != ranges.end() && next->first < end;
      const bool overlaps_previous =
          next != ranges.begin() && std::prev(next)->second.first > begin;
      if (overlaps_next || overlaps_previous) {
        const auto& other = overlaps_next ? next->second.second : std::prev(next)->second.second;
        throw ConfigError(fmt::format("{}: data_offsets [{}, {}] overlap tensor '{}'", tensor,
                                      begin, end, other));
      }
      ranges.emplace(begin, std::pair{end, name});
    }
    std::vector<char> raw(end - begin);
    in.seekg(static_cast<std::streamoff>(data_start + begin));
    if (!in.read(raw.data(), static_cast<std::streamsize>(raw.size()))) {
      throw ConfigError(fmt::format("{}: read failed at byte {}", tensor, data_start + begin));
    }
    t.values.resize(count);
    convert(raw.data(), *type, t.values.data(), DType::f32, count);
    tensors.emplace(name, std::move(t));
  }
  return tensors;
}

std::vector<std::string> names_of(const TensorMap& tensors) {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors) out.push_back(name);
  return out;
}

}  // namespace

TensorMap read_safetensors(const std::filesystem::path& file) {
  if (!is_safetensors_index(file)) return read_one_safetensors(file);
  TensorMap all;
  for (const auto& [shard, names] : safetensors_index_shards(file)) {
    TensorMap part = read_one_safetensors(shard);
    check_safetensors_shard(file, shard, names, names_of(part));
    all.merge(part);
  }
  return all;
}

void write_safetensors(const TensorMap& tensors, DType dtype, const std::filesystem::path& file,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}, {"writer", "polyhal"}};
  for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::uint64_t bytes = t.values.size() * dtype_size(dtype);
    header[name] = {{"dtype", safetensors_dtype(dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // align data to 8 bytes
  // Written whole or not at all: a crash leaves either the old file or the new one.
  detail::write_file_atomically(file, [&](std::ostream& out) {
    std::uint8_t length_bytes[8];
    for (int i = 0; i < 8; ++i)
      length_bytes[i] = static_cast<std::uint8_t>(header_text.size() >> (8 * i));
    out.write(reinterpret_cast<const char*>(length_bytes), 8);
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    std::vector<char> raw;
    for (const auto& [name, t] : tensors) {
      raw.resize(t.values.size() * dtype_size(dtype));
      convert(t.values.data(), DType::f32, raw.data(), dtype, t.values.size());
      out.write(raw.data(), static_cast<std::streamsize>(raw.size()));
    }
  });
}

namespace {

/// The JSON header alone (the 8-byte length, then the header; no tensor data read).
nlohmann::json read_header(const std::filesystem::path& file) {
  detail::refuse_special_file(file);
  std::ifstream in(file, std::ios::binary);
  std::uint8_t length_bytes[8] = {};
  if (!in.read(reinterpret_cast<char*>(length_bytes), 8)) {
    throw ConfigError(
        fmt::format("{}: truncated: shorter than the 8-byte header length", file.string()));
  }
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length_bytes[i];
  if (header_size > kMaxHeaderBytes)
    throw ConfigError(
        fmt::format("{}: byte 0: header length {} too large", file.string(), header_size));
  std::string text(header_size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_size))) {
    throw ConfigError(fmt::format("{}: truncated header", file.string()));
  }
  try {
    auto header = parse_json_input(text, file.string() + ": header");
    if (!header.is_object())
      throw ConfigError(fmt::format("{}: header is not a JSON object", file.string()));
    return header;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: header is not valid JSON: {}", file.string(), e.what()));
  }
}

}  // namespace

std::map<std::string, std::string> read_safetensors_metadata(const std::filesystem::path& file) {
  if (is_safetensors_index(file)) {
    // The first shard's: save_pretrained writes the same metadata into each.
    const auto shards = safetensors_index_shards(file);
    return read_safetensors_metadata(shards.begin()->first);
  }
  const auto header = read_header(file);
  std::map<std::string, std::string> out;
  if (header.contains("__metadata__") && header["__metadata__"].is_object())
    for (const auto& [key, value] : header["__metadata__"].items())
      if (value.is_string()) out[key] = value.get<std::string>();
  return out;
}

std::map<std::string, std::vector<std::int64_t>> read_safetensors_shapes(
    const std::filesystem::path& file) {
  if (is_safetensors_index(file)) {
    std::map<std::string, std::vector<std::int64_t>> all;
    for (const auto& [shard, names] : safetensors_index_shards(file)) {
      auto part = read_safetensors_shapes(shard);
      std::vector<std::string> holds;
      for (const auto& [name, shape] : part) holds.push_back(name);
      check_safetensors_shard(file, shard, names, holds);
      all.merge(part);
    }
    return all;
  }
  const auto header = read_header(file);
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const auto shape = entry.is_object() && entry.contains("shape") ? entry["shape"] : nullptr;
    if (!shape.is_array() || shape.size() > 8)
      throw ConfigError(fmt::format("{}: tensor '{}': no shape of up to 8 dimensions in the header",
                                    file.string(), name));
    std::vector<std::int64_t> dims;
    for (const auto& dim : shape) {
      if (!dim.is_number_unsigned() || dim.get<std::uint64_t>() > (std::uint64_t{1} << 40))
        throw ConfigError(fmt::format("{}: tensor '{}': shape {} is not a list of sizes",
                                      file.string(), name, json_excerpt(shape)));
      dims.push_back(dim.get<std::int64_t>());
    }
    out.emplace(name, std::move(dims));
  }
  return out;
}

}  // namespace polyhal
