#include "polyhal/app/tensorboard_writer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <chrono>
#include <cstring>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr auto kCrcTable = make_crc_table();

// Protocol-buffer wire format, only what an Event with a scalar needs.
void varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}
template <class T>
void little_endian(std::string& out, T value) {
  static_assert(std::endian::native == std::endian::little, "x86-64 and arm64 only");
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}
void key(std::string& out, int field, int wire_type) {
  varint(out, static_cast<std::uint64_t>(field << 3 | wire_type));
}
void length_delimited(std::string& out, int field, std::string_view bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out.append(bytes);
}

/// Event{wall_time = 1 (double), step = 2 (int64), ...}.
std::string event_header(std::int64_t step) {
  std::string event;
  key(event, 1, 1);
  little_endian(
      event,
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  key(event, 2, 0);
  varint(event, static_cast<std::uint64_t>(step));
  return event;
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : "localhost";
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) crc = kCrcTable[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw UsageError(
        fmt::format("--tensorboard {}: cannot create: {}", dir.string(), ec.message()));
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  file_ = std::make_unique<CheckedFile>(
      dir / fmt::format("events.out.tfevents.{}.{}", seconds, host_name()), "--tensorboard",
      /*exclusive=*/true);
  std::string event = event_header(0);
  length_delimited(event, 3, "brain.Event:2");  // file_version
  record(event);
}

void TensorBoardWriter::scalar(const std::string& tag, std::int64_t step, double value) {
  std::string value_message;  // Summary.Value{tag = 1, simple_value = 2}
  length_delimited(value_message, 1, tag);
  key(value_message, 2, 5);
  little_endian(value_message, static_cast<float>(value));
  std::string summary;  // Summary{value = 1}
  length_delimited(summary, 1, value_message);
  std::string event = event_header(step);
  length_delimited(event, 5, summary);  // Event.summary
  record(event);
}

void TensorBoardWriter::record(const std::string& event) {
  std::string frame;
  little_endian(frame, static_cast<std::uint64_t>(event.size()));
  little_endian(frame, masked_crc32c(std::string_view(frame.data(), 8)));
  frame += event;
  little_endian(frame, masked_crc32c(event));
  file_->append(frame);
}

void TensorBoardWriter::sync() {
  file_->sync();
}

}  // namespace polyhal
