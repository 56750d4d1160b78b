// --tensorboard and --metrics-csv: the event file is read back as
// TensorBoard reads it (TFRecord frames checked with an independent
// CRC-32C, Event protocol buffers decoded field by field) and must hold the
// same losses as the JSON lines, at the same steps.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "test_support.hpp"

namespace polyhal {
namespace {

/// Bit by bit, not the table the writer uses.
std::uint32_t crc32c_bitwise(const std::string& data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}
std::uint32_t masked(const std::string& data) {
  const std::uint32_t crc = crc32c_bitwise(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

struct Reader {
  const std::string& bytes;
  std::size_t at = 0;
  bool done() const { return at >= bytes.size(); }
  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      const auto byte = static_cast<unsigned char>(bytes.at(at++));
      value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
  }
  std::string take(std::size_t n) {
    std::string out = bytes.substr(at, n);
    if (out.size() != n) throw std::runtime_error("truncated");
    at += n;
    return out;
  }
};

struct Scalar {
  std::int64_t step;
  std::string tag;
  float value;
};

/// Every scalar in the event file; the file version in `version`.
std::vector<Scalar> read_events(const std::filesystem::path& file, std::string& version) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string bytes = whole.str();
  std::vector<Scalar> scalars;
  Reader frames{bytes};
  while (!frames.done()) {
    const std::string length_bytes = frames.take(8);
    std::uint64_t length = 0;
    std::memcpy(&length, length_bytes.data(), 8);
    std::uint32_t crc = 0;
    std::memcpy(&crc, frames.take(4).data(), 4);
    EXPECT_EQ(crc, masked(length_bytes)) << "length CRC";
    const std::string event = frames.take(length);
    std::memcpy(&crc, frames.take(4).data(), 4);
    EXPECT_EQ(crc, masked(event)) << "data CRC";
    Reader e{event};
    std::int64_t step = 0;
    while (!e.done()) {
      const auto key = e.varint();
      const auto field = key >> 3, wire = key & 7;
      if (wire == 1) {
        e.take(8);  // wall_time
      } else if (wire == 0) {
        const auto value = e.varint();
        if (field == 2) step = static_cast<std::int64_t>(value);
      } else if (wire == 2) {
        const std::string body = e.take(e.varint());
        if (field == 3) version = body;
        if (field != 5) continue;
        Reader summary{body};  // Summary{repeated Value value = 1}
        while (!summary.done()) {
          summary.varint();
          const std::string value_bytes = summary.take(summary.varint());
          Reader v{value_bytes};
          Scalar scalar{step, "", 0.0f};
          while (!v.done()) {
            const auto vkey = v.varint();
            if ((vkey >> 3) == 1) scalar.tag = v.take(v.varint());
            if ((vkey >> 3) == 2) std::memcpy(&scalar.value, v.take(4).data(), 4);
          }
          scalars.push_back(scalar);
        }
      } else {
        ADD_FAILURE() << "unexpected wire type " << wire;
        return scalars;
      }
    }
  }
  return scalars;
}

TEST(TensorBoard, EventFileHoldsTheRunsScalarsWithValidFramesAndCsvTheSameNumbers) {
  test::TempDir dir;
  const auto config = dir.write(
      "c.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 16}\nbatch: {micro: 2}\n"
      "steps: 3\n");
  const auto metrics = dir.path() / "m.jsonl";
  const auto r = test::run_polyhal(
      "run --config " + config.string() + " --metrics-out " + metrics.string() + " --tensorboard " +
      (dir.path() / "tb").string() + " --metrics-csv " + (dir.path() / "m.csv").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  done: 3 steps in 0:00:"), std::string::npos)
      << "the end-of-run summary\n"
      << r.output;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "tb"))
    files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].filename().string().starts_with("events.out.tfevents."));
  std::string version;
  const auto scalars = read_events(files[0], version);
  EXPECT_EQ(version, "brain.Event:2");
  const auto losses = test::step_losses(metrics);
  ASSERT_EQ(losses.size(), 3u);
  std::map<std::string, int> tags;
  for (const auto& s : scalars) {
    ++tags[s.tag];
    if (s.tag == "step/loss") {
      ASSERT_GE(s.step, 1);
      ASSERT_LE(s.step, 3);
      EXPECT_FLOAT_EQ(s.value, static_cast<float>(losses[static_cast<std::size_t>(s.step - 1)]));
    }
  }
  for (const char* tag : {"step/loss", "step/learning_rate", "step/loss_scale", "step/grad_norm",
                          "step/sequences_per_second"})
    EXPECT_EQ(tags[tag], 3) << tag;
  EXPECT_EQ(tags["summary/sequences_per_second"], 1);
  // Every JSON line carries the wall clock.
  EXPECT_GT(test::last_json_line(metrics)["time"].get<double>(), 1.7e9);
  // The CSV: a header, then the same losses.
  std::ifstream csv(dir.path() / "m.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "time,event,step,name,value");
  std::vector<double> csv_losses;
  while (std::getline(csv, line)) {
    if (line.find(",step,") == std::string::npos || line.find(",loss,") == std::string::npos)
      continue;
    csv_losses.push_back(std::stod(line.substr(line.rfind(',') + 1)));
  }
  ASSERT_EQ(csv_losses.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(csv_losses[i], losses[i], 1e-9 + 1e-6 * losses[i]);
}

}  // namespace
}  // namespace polyhal
