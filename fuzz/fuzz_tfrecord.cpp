// TFRecord pre-training data. The first byte picks how the rest is used:
// even: the rest is the file as it is (framing, CRCs, GZIP); odd: the rest
// is records separated by "RECD", framed here with correct CRCs so the
// mutations reach the tf.train.Example parser and the layout checks.
// Every record of the file is read as the layout of its first record says.
#include <algorithm>
#include <string>
#include <string_view>

#include "fuzz_input.hpp"
#include "polyhal/app/tfrecord_data.hpp"
#include "polyhal/error.hpp"

namespace {

std::uint32_t masked_crc32c(std::string_view bytes) {
  std::uint32_t c = 0xffffffffu;
  for (const char ch : bytes) {
    c ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
  }
  c = ~c;
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string framed(std::string_view records) {
  std::string out;
  const auto put = [&](const auto value) {
    out.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  while (true) {
    const auto end = records.find("RECD");
    const std::string_view record = records.substr(0, end);
    const std::uint64_t length = record.size();
    const std::string length_bytes(reinterpret_cast<const char*>(&length), 8);
    put(length);
    put(masked_crc32c(length_bytes));
    out.append(record);
    put(masked_crc32c(record));
    if (end == std::string_view::npos) break;
    records.remove_prefix(end + 4);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string file = data[0] % 2 == 0 ? std::string(body) : framed(body);
  const auto path = polyhal::fuzz::as_file(
      "data.tfrecord", reinterpret_cast<const std::uint8_t*>(file.data()), file.size());
  try {
    const polyhal::TfRecordSet set(path);
    for (std::int64_t r = 0; r < std::min<std::int64_t>(set.size(), 64); ++r) {
      try {
        if (set.packed())
          set.packed_sample(r);
        else
          set.sample(r);
      } catch (const polyhal::ConfigError&) {
      }
    }
  } catch (const polyhal::Error&) {
  }
  return 0;
}
