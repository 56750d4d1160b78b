// Config section `finetune`, shared by tasks squad and glue (each key says
// which of them reads it), and the two tasks' schemas.
#include "finetune_section.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <tuple>

#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/glue_tasks.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

void read_do(const ConfigValue& v, FinetuneSection& f) {
  f.train = f.eval = f.predict = false;
  for (const auto& item : v.items()) {
    const std::string what = item.text();
    if (what == "train")
      f.train = true;
    else if (what == "eval")
      f.eval = true;
    else if (what == "predict")
      f.predict = true;
    else
      v.fail(fmt::format("expected train, eval or predict, got \"{}\"", what));
  }
  if (!f.train && !f.eval && !f.predict) v.fail("nothing to do: list train, eval and/or predict");
}

/// What runs: `do`, or else each step whose file is given; and each step's file.
void check_steps(const ConfigValue& given, RunConfig& config) {
  auto& f = config.section<FinetuneSection>();
  if (!given.has("do")) {
    f.train = !f.train_file.empty();
    f.eval = !f.eval_file.empty();
    f.predict = !f.predict_file.empty();
  }
  for (const auto& [wanted, file, step] :
       {std::tuple{f.train, f.train_file, "train"}, std::tuple{f.eval, f.eval_file, "eval"},
        std::tuple{f.predict, f.predict_file, "predict"}}) {
    if (wanted && file.empty())
      config.fail(fmt::format("finetune.{}_file", step),
                  fmt::format("required by finetune.do: {}", step));
  }
  if (!f.train && !f.eval && !f.predict)
    config.fail("finetune", "nothing to do: give train_file, eval_file and/or predict_file");
}

ConfigSection finetune_section() {
  using F = FinetuneSection;
  auto section = task_section<F>();
  SectionKeys<F> keys(section, task_section_of<F>);
  const KeyExtras<F> squad{.tasks = {"squad"}};
  keys.custom("do", "train, eval and/or predict (default: each whose file is given)", read_do,
              [](const F& f) {
                std::vector<std::string> what;
                if (f.train) what.push_back("train");
                if (f.eval) what.push_back("eval");
                if (f.predict) what.push_back("predict");
                return fmt::format("[{}]", fmt::join(what, ", "));
              })
      .add("train_file", &F::train_file, "SQuAD JSON or GLUE TSV to train on", {},
           {.input = InputPath::file})
      .add("eval_file", &F::eval_file, "evaluated after every epoch (EM/F1, accuracy, ...)", {},
           {.input = InputPath::file})
      .add("predict_file", &F::predict_file, "predictions written for it", {},
           {.input = InputPath::file})
      .add("output_dir", &F::output_dir, "predictions, metrics and the fine-tuned model go here",
           {}, {.output = OutputPath::directory})
      .add("epochs", &F::epochs,
           "passes over the training set; fractional allowed (0.5: half of it, as Habana's "
           "--num_train_epochs=0.5)",
           [](const ConfigValue& v) {
             const double epochs = v.number();
             if (!(epochs > 0.0 && epochs <= 1e6))
               v.fail("expected a number of epochs in (0, 1e6]");
             return epochs;
           })
      .add("max_steps", &F::max_steps,
           "at most this many optimizer steps (0: the epochs decide); the schedule ends there",
           at_least(0))
      .add("warmup_proportion", &F::warmup_proportion,
           "share of the steps warming up (optimizer.warmup_steps wins)",
           [](const ConfigValue& v) {
             const double share = v.number();
             if (share < 0.0 || share > 1.0) v.fail("expected a share in [0, 1]");
             return share;
           })
      .add("eval_batch", &F::eval_batch, "rows per evaluation batch (0: batch.micro)")
      .add("doc_stride", &F::doc_stride, "tokens between the starts of a long context's windows",
           {}, squad)
      .add("max_query_length", &F::max_query_length, "question tokens at most", {}, squad)
      .add("n_best_size", &F::n_best_size, "start and end candidates considered per feature", {},
           squad)
      .add("max_answer_length", &F::max_answer_length, "answer tokens at most", {}, squad)
      .add("null_score_diff_threshold", &F::null_score_diff_threshold,
           "SQuAD v2: predict no answer above this margin", {}, squad)
      .add("version_2_with_negative", &F::version_2_with_negative,
           "SQuAD v2 (questions without answers); default: what the file says", {},
           {.tasks = {"squad"},
            .value =
                [](const F& f) {
                  return f.version_2_with_negative ? config_text(*f.version_2_with_negative)
                                                   : std::string("(from the file)");
                }})
      .add("packed", &F::packed, "pack several features into each row", {}, squad)
      .add(
          "max_sequences_per_pack", &F::max_sequences_per_pack, "features per packed row at most",
          [](const ConfigValue& v) {
            const std::int64_t most = v.integer(1);
            if (most > kMaxSequencesPerPack)
              v.fail(fmt::format("at most {} sequences share a row", kMaxSequencesPerPack));
            return most;
          },
          squad)
      .add("packing_algorithm", &F::packing_algorithm, "spfhp or nnlshp",
           one_of({"spfhp", "nnlshp"}), squad)
      .add("glue_task", &F::glue_task,
           "cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte or wnli; ax: GLUE's "
           "diagnostic test set, predicted (do: predict) with an MNLI model",
           [](const ConfigValue& v) {
             std::string name = v.text();
             try {
               glue_task(name);
             } catch (const ConfigError& e) {
               v.fail(e.what());
             }
             return name;
           },
           {.tasks = {"glue"}});
  section.check = check_steps;
  return section;
}

const std::shared_ptr<const ConfigSection>& shared_finetune_section() {
  static const auto section = std::make_shared<const ConfigSection>(finetune_section());
  return section;
}

std::vector<std::string> finetune_reads() {
  return {"model", "batch", "collective", "data", "optimizer", "checkpoint"};
}

/// finetune.output_dir/model, else checkpoint.dir/hf, else none.
std::filesystem::path finetune_export_dir(const RunConfig& config) {
  const std::filesystem::path& output_dir = config.section<FinetuneSection>().output_dir;
  if (!output_dir.empty()) return output_dir / "model";
  return config.checkpoint.dir.empty() ? std::filesystem::path() : config.checkpoint.dir / "hf";
}

}  // namespace

const TaskSchema& squad_schema() {
  static const TaskSchema schema{.name = "squad",
                                 .sections = finetune_reads(),
                                 .required = {"finetune"},
                                 .own = {shared_finetune_section()},
                                 .traits = {TaskTrait::trains, TaskTrait::takes_int8},
                                 .export_dir = finetune_export_dir};
  return schema;
}

const TaskSchema& glue_schema() {
  static const TaskSchema schema{
      .name = "glue",
      .sections = finetune_reads(),
      .required = {"finetune"},
      .own = {shared_finetune_section()},
      .check =
          [](const RunConfig& config) {
            const auto& f = config.section<FinetuneSection>();
            if (f.glue_task.empty())
              config.fail("finetune.glue_task",
                          "required by task glue (cola, sst-2, mrpc, sts-b, qqp, mnli, "
                          "mnli-mm, qnli, rte, wnli or ax)");
            if (glue_task(f.glue_task).name == "ax" && (f.train || f.eval))
              config.fail("finetune.glue_task",
                          "ax is GLUE's diagnostic test set, without labels: predict it "
                          "(finetune.do: predict, predict_file: AX.tsv) with a model fine-tuned "
                          "on mnli (checkpoint.init)");
          },
      .traits = {TaskTrait::trains, TaskTrait::takes_int8},
      .export_dir = finetune_export_dir};
  return schema;
}

}  // namespace polyhal
