// Config section `data`: where examples come from and how text is tokenized.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "sections.hpp"

namespace polyhal::config_sections {

ConfigSection data() {
  ConfigSection section{.name = "data"};
  SectionKeys<DataSection> keys(
      section, [](RunConfig & c) -> auto& { return c.data; });
  const std::vector<TaskTrait> pretraining_data{TaskTrait::reads_pretraining_data};
  const std::vector<TaskTrait> trains{TaskTrait::trains};
  keys.add("source", &DataSection::source, "generated, pattern, text, mlperf_hdf5 or tfrecord",
           one_of({"generated", "pattern", "mlperf_hdf5", "tfrecord", "text"}))
      .add("text_file", &DataSection::text_file,
           "text: one example a line, a TAB between the two of a pair", {},
           {.input = InputPath::file})
      .add("vocab", &DataSection::vocab,
           "the tokenizer: a tokenizer.json (WordPiece, BPE or Unigram), a BERT vocab.txt, "
           "RoBERTa's vocab.json (merges.txt beside it) or XLM-R's sentencepiece.bpe.model",
           {}, {.input = InputPath::file_or_directory})
      .add("lower_case", &DataSection::lower_case, "lower-case text before WordPiece")
      .custom(
          "special_tokens", "split (BERT's reference) or keep a literal [MASK] in text",
          [](const ConfigValue& v, DataSection& d) {
            const std::string how = v.text();
            if (how != "split" && how != "keep")
              v.fail(fmt::format(
                  "expected split (BERT's reference) or keep (Hugging Face), got \"{}\"", how));
            d.special_tokens =
                how == "keep" ? SpecialTokensInText::keep : SpecialTokensInText::split;
          },
          [](const DataSection& d) {
            if (!d.special_tokens) return std::string("(split; keep for text inference)");
            return std::string(*d.special_tokens == SpecialTokensInText::keep ? "keep" : "split");
          })
      .add("seed", &DataSection::seed, "seed of generated data and of the sample order")
      .add("mask_probability", &DataSection::mask_probability,
           "generated pre-training data: share of tokens masked",
           [](const ConfigValue& v) {
             const double share = v.number();
             if (!(share > 0.0 && share < 1.0)) v.fail("expected a value between 0 and 1");
             return share;
           },
           {.traits = pretraining_data})
      .add("max_predictions", &DataSection::max_predictions,
           "masked positions per sequence at most (the MLM head runs on them)", {},
           {.traits = pretraining_data})
      // Every task that reads data takes it: the source says whether a task
      // can read such files (inference refuses mlperf_hdf5 naming them).
      .add("files", &DataSection::files,
           "mlperf_hdf5, tfrecord: a file or a directory of part files", {},
           {.input = InputPath::file_or_directory})
      .add("shuffle", &DataSection::shuffle,
           "another sample order every epoch; false: file order (pretrain: mlperf_hdf5, "
           "tfrecord; squad, glue: the training rows)",
           {}, {.traits = trains})
      .add("shuffle_buffer", &DataSection::shuffle_buffer,
           "tfrecord, GZIP files (read in order): samples shuffled together after each epoch's "
           "seeded file order, as TensorFlow's shuffle buffer (plain files and HDF5 shuffle the "
           "whole epoch)",
           at_least(1, 10'000'000), {.traits = pretraining_data})
      .add("packed", &DataSection::packed,
           "mlperf_hdf5, tfrecord: auto (detect), true or false: packed rows", {},
           {.traits = pretraining_data});
  section.check = [](const ConfigValue& given, RunConfig& config) {
    const auto& d = config.data;
    // A key the chosen source does not read would leave the run on other
    // data than the user named (generated tokens instead of their files).
    const bool reads_files = d.source == "mlperf_hdf5" || d.source == "tfrecord";
    if (given.has("files") && !reads_files)
      config.fail("data.files",
                  fmt::format("read by data.source mlperf_hdf5 and tfrecord only, and data.source "
                              "is {}: set data.source to the files' format, or remove data.files",
                              d.source));
    if (given.has("text_file") && d.source != "text")
      config.fail("data.text_file",
                  fmt::format("read by data.source text only, and data.source is {}: set "
                              "data.source: text, or remove data.text_file",
                              d.source));
    if (given.has("packed") && !reads_files)
      spdlog::warn(
          "{}: data.packed is for data.source mlperf_hdf5 and tfrecord; data.source {} "
          "does not read it",
          config.locate("data.packed"), d.source);
    if (given.has("shuffle_buffer") && d.source != "tfrecord")
      spdlog::warn(
          "{}: data.shuffle_buffer is for data.source tfrecord with GZIP files; data.source {} "
          "does not read it",
          config.locate("data.shuffle_buffer"), d.source);
    if (d.source == "mlperf_hdf5" && d.files.empty())
      config.fail(
          "data.files",
          "required when data.source is mlperf_hdf5 (an .hdf5 file or a directory of them)");
    if (d.source == "tfrecord" && d.files.empty())
      config.fail("data.files",
                  "required when data.source is tfrecord (a TFRecord file or a directory of them)");
    if (d.source == "text") {
      if (d.text_file.empty()) config.fail("data.text_file", "required when data.source is text");
      // model.dir's tokenizer counts: the plan reads it (plan/model_keys.cpp).
      if (d.vocab.empty() && config.model.dir.empty())
        config.fail("data.vocab",
                    "required when data.source is text (a BERT vocab.txt or a tokenizer.json, or "
                    "model.dir with one)");
    }
  };
  return section;
}

}  // namespace polyhal::config_sections
