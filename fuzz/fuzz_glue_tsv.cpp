// GLUE TSV files: columns, labels, scores (MRPC's layout and STS-B's scores).
#include "fuzz_input.hpp"
#include "polyhal/app/glue_data.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = polyhal::fuzz::as_file("train.tsv", data, size);
  for (const char* task : {"mrpc", "sts-b", "mnli"}) {
    try {
      polyhal::read_glue_tsv(file, polyhal::glue_task(task));
    } catch (const polyhal::Error&) {
    }
  }
  return 0;
}
