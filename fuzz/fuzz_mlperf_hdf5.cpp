// MLPerf BERT pre-training data in HDF5: structure, shapes, links, storage
// and every row. libhdf5 parses each file in a child process first, so its
// own crashes on a malformed file come back as polyhal::Error; what this
// target looks for are faults in polyhal's code around it.
#include <algorithm>

#include "fuzz_input.hpp"
#include "polyhal/app/mlperf_hdf5.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = polyhal::fuzz::as_file("part-00000-of-00001.hdf5", data, size);
  try {
    const polyhal::MlperfHdf5Reader reader(file);
    for (std::int64_t i = 0; i < std::min<std::int64_t>(reader.size(), 64); ++i) reader.sample(i);
  } catch (const polyhal::Error&) {
  }
  return 0;
}
