// GLUE TSV files in their official layouts, and the errors a bad one gets.
#include <gtest/gtest.h>

#include "polyhal/app/glue_data.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::string error_of(const std::filesystem::path& file, const std::string& task) {
  try {
    read_glue_tsv(file, glue_task(task));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(GlueData, ReadsEveryTasksLayout) {
  test::TempDir dir;
  // MRPC: Quality, #1 ID, #2 ID, #1 String, #2 String.
  auto mrpc = read_glue_tsv(
      dir.write("mrpc.tsv",
                "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe said.\tHe spoke.\n"
                "0\t3\t4\tA cat.\tA dog.\n"),
      glue_task("MRPC"));
  ASSERT_EQ(mrpc.examples.size(), 2u);
  EXPECT_EQ(mrpc.examples[0].text_a, "He said.");
  EXPECT_EQ(mrpc.examples[0].text_b, "He spoke.");
  EXPECT_EQ(mrpc.examples[0].label, 1);
  EXPECT_EQ(mrpc.examples[1].label, 0);
  EXPECT_EQ(mrpc.examples[1].line, 3);
  // CoLA train/dev: no header; source, label, original label, sentence.
  auto cola =
      read_glue_tsv(dir.write("cola.tsv", "gj04\t1\t\tThe sailors rode.\r\n"), glue_task("cola"));
  ASSERT_EQ(cola.examples.size(), 1u);
  EXPECT_EQ(cola.examples[0].text_a, "The sailors rode.");
  // MNLI: the label is the last column.
  std::string mnli = "index";
  for (int c = 1; c < 12; ++c) mnli += "\tc" + std::to_string(c);
  mnli += "\n0\tp\tg\tb1\tb2\tpb1\tpb2\ts1\tPremise.\tHypothesis.\tl1\tneutral\n";
  auto nli = read_glue_tsv(dir.write("mnli.tsv", mnli), glue_task("mnli_mismatched"));
  ASSERT_EQ(nli.examples.size(), 1u);
  EXPECT_EQ(nli.examples[0].text_a, "Premise.");
  EXPECT_EQ(nli.examples[0].label, 2);  // contradiction, entailment, neutral
  // STS-B: a score, regression.
  auto sts = read_glue_tsv(
      dir.write("sts.tsv",
                "h0\th1\th2\th3\th4\th5\th6\th7\th8\th9\n0\tg\tf\ty\t0\ts1\ts2\tA man.\t"
                "A person.\t4.25\n"),
      glue_task("stsb"));
  ASSERT_EQ(sts.examples.size(), 1u);
  EXPECT_DOUBLE_EQ(sts.examples[0].score, 4.25);
  // QQP: short rows are skipped and counted, as the reference does.
  auto qqp = read_glue_tsv(dir.write("qqp.tsv",
                                     "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                                     "1\t2\t3\tWhy?\tHow?\t0\n2\t4\t5\tbroken\n"),
                           glue_task("qqp"));
  EXPECT_EQ(qqp.examples.size(), 1u);
  EXPECT_EQ(qqp.skipped, 1);
  // Test files are unlabelled: SST-2 test is (index, sentence).
  auto test_file = read_glue_tsv(dir.write("sst_test.tsv", "index\tsentence\n0\tGreat film.\n"),
                                 glue_task("sst-2"), false);
  ASSERT_EQ(test_file.examples.size(), 1u);
  EXPECT_EQ(test_file.examples[0].text_a, "Great film.");
  EXPECT_EQ(test_file.examples[0].label, -1);
}

TEST(GlueData, BadRowsNameFileLineAndProblem) {
  test::TempDir dir;
  const auto rte = dir.write("rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n");
  EXPECT_NE(error_of(rte, "rte")
                .find("rte.tsv:2: label \"maybe\" is not one of rte's labels (entailment, "
                      "not_entailment)"),
            std::string::npos)
      << error_of(rte, "rte");
  const auto short_row = dir.write("mrpc.tsv", "h\th\th\th\th\n1\t1\t2\tonly three\n");
  EXPECT_NE(error_of(short_row, "mrpc").find("mrpc.tsv:2: the row has 4 tab-separated columns"),
            std::string::npos)
      << error_of(short_row, "mrpc");
  const auto sts = dir.write("sts.tsv", "h\n0\tg\tf\ty\t0\ts1\ts2\tA\tB\tfour\n");
  EXPECT_NE(error_of(sts, "sts-b").find("sts.tsv:2: score \"four\" is not a number"),
            std::string::npos)
      << error_of(sts, "sts-b");
  EXPECT_THROW(glue_task("imdb"), ConfigError);
  EXPECT_NE(error_of(dir.path() / "missing.tsv", "rte").find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace polyhal
