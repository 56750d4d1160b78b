// Hardening, round 3 (issue 53): each problem the third hostile probe found,
// fed as input, with the message and the exit code it must give. Items not
// here are not fixed yet.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace polyhal {
namespace {

// Item 6: generated and pattern pre-training data draw words past the
// special tokens; a vocabulary of 5 has none (it was SIGFPE, and validate
// said ok).
TEST(HardeningRound3, GeneratedDataWithNoWordsInTheVocabularyIsRefused) {
  test::TempDir dir;
  const auto config = dir.write(
      "v.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 5, precision: "
      "f32}\nbatch: {micro: 2}\ndata: {source: pattern, max_predictions: 3}\nsteps: 1\n");
  for (const std::string command : {"validate", "run"}) {
    for (const std::string source : {"pattern", "generated"}) {
      const auto r = test::run_polyhal(command + " --config " + config.string() +
                                       " --set data.source=" + source);
      EXPECT_EQ(r.exit_code, 2) << command << " " << source << "\n" << r.output;
      EXPECT_NE(r.output.find("v.yaml:3: key 'model.vocab_size': " + source +
                              " data draws words past the special tokens (ids 0-4), so it needs "
                              "a vocabulary of at least 6, got 5"),
                std::string::npos)
          << r.output;
    }
  }
  const auto six =
      test::run_polyhal("run --config " + config.string() + " --set model.vocab_size=6");
  EXPECT_EQ(six.exit_code, 0) << six.output;
}

}  // namespace
}  // namespace polyhal
