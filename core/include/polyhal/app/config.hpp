#pragma once
/// @file config.hpp
/// Run configuration: a YAML file plus `--set key.path=value` overrides.
///
/// Schema (see docs/config.md):
///   backend: cpu | ipu | gaudi | <any installed plugin>     (required)
///   plugin_paths: [dir, ...]
/// Every relative path (in the file, in --set, on the command line) is
/// relative to the current directory; the reader makes them absolute.
///   device: {<backend option>: value, ...}   checked against the backend's options
///   task: matmul-bench               (required)
///   matmul_bench: {shapes: [[M, N, K], ...], dtype: f32, out_dtype: <dtype>,
///                  iterations: 20, warmup: 2}
///   log: {level: info, file: <path>}
///   model: {preset: base, hf_config: <config.json>, weights: <.safetensors>,
///           save: <dir>, seed: 0, heads: false, seq_len: 128,
///           precision: f32 | bf16 | f16,
///           <any BertConfig dimension to override the preset>}
///   batch: {micro: 8}
///   data: {source: generated | text, text_file: <path>, vocab: <vocab.txt>,
///          lower_case: true, seed: 0}
///   inference: {iterations: 20, warmup: 3, duration_seconds: <s>, output: <path>}
///   finetune: {do: [train, eval, predict], train_file, eval_file, predict_file,
///              output_dir, epochs: 2, warmup_proportion: 0.1, eval_batch,
///              squad: doc_stride, max_query_length, n_best_size,
///              max_answer_length, null_score_diff_threshold,
///              version_2_with_negative, packed, max_sequences_per_pack,
///              packing_algorithm; glue: glue_task}
/// Unknown keys and bad values are ConfigErrors naming file, line and key.
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/device_options.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/backend.hpp"
#include "polyhal/dtype.hpp"

namespace polyhal {

struct MatmulBenchConfig {
  std::vector<std::array<std::int64_t, 3>> shapes;  ///< {M, N, K}
  DType dtype = DType::f32;
  std::optional<DType> out_dtype;  ///< default: dtype
  int iterations = 20;
  int warmup = 2;
};

struct ModelSection {
  std::string preset = "base";
  std::filesystem::path hf_config;           ///< overrides the preset when set
  std::map<std::string, std::int64_t> dims;  ///< explicit BertConfig dimensions
  std::filesystem::path weights;             ///< empty: seeded random init
  std::filesystem::path save;                ///< write config.json + model.safetensors here
  std::uint64_t seed = 0;
  bool heads = false;  ///< inference: MLM + NSP heads (model.head: pretraining)
  /// inference: the head on the encoder: none, pretraining,
  /// question_answering (the SQuAD benchmark) or classification.
  std::string head = "none";
  std::int64_t num_labels = 2;  ///< inference with head classification
  double dropout = 0.1;         ///< pretrain: hidden dropout (HF hidden_dropout_prob)
  /// pretrain: attention-probability dropout (HF attention_probs_dropout_prob);
  /// unset: the same as `dropout`.
  std::optional<double> attention_dropout;
  std::int64_t seq_len = 128;
  DType precision = DType::f32;
  /// Training: recompute encoder layers' activations in backward ("none",
  /// "all", or the layers listed in recompute_layers).
  std::string recompute = "none";
  std::vector<std::int64_t> recompute_layers;
  /// Training: pipeline stages, each a list of encoder layers (stage 0 also
  /// has the embeddings, the last the heads); or `pipeline_stages` > 0 to
  /// split the layers evenly (the first and last stage one layer fewer for
  /// the embeddings and heads, as Graphcore's BERT-large layout).
  std::vector<std::vector<std::int64_t>> pipeline;
  std::int64_t pipeline_stages = 0;
};

struct BatchSection {
  std::int64_t micro = 1;
  std::int64_t grad_accum = 1;  ///< global batch = replicas x grad_accum x micro
  std::int64_t replicas = 1;
};

/// How replicas talk (docs/scale-out.md). `collective: local` (default)
/// runs batch.replicas replicas as threads of this process; `collective: mpi`
/// makes each process started by mpirun one replica (batch.replicas must then
/// equal the number of ranks, or be left at 1 to mean "all of them").
struct CollectiveSection {
  std::string engine = "local";  ///< local | mpi
  double timeout_seconds = 300;  ///< longest wait in one collective before a rank is declared lost
};

struct DataSection {
  std::string source = "generated";
  std::filesystem::path text_file;
  std::filesystem::path vocab;
  bool lower_case = true;
  /// A literal [MASK], [CLS], ... in text: split as BERT's reference
  /// tokenizer does, or kept as one token as Hugging Face's (tokenizer.hpp).
  /// Unset: kept in text inference (filling a [MASK] is what it is for),
  /// split where data is prepared or fine-tuned as the reference does.
  std::optional<SpecialTokensInText> special_tokens;
  std::uint64_t seed = 0;
  double mask_probability = 0.15;     ///< pretrain: share of tokens masked
  std::int64_t max_predictions = 20;  ///< pretrain: at most this many per sequence
  std::filesystem::path files;        ///< mlperf_hdf5: a file or a directory of part files
  bool shuffle = true;                ///< mlperf_hdf5: another sample order each epoch
  /// mlperf_hdf5: packed rows (`polyhal pack`): "auto" detects them from the
  /// files; "true" requires packed files, "false" unpacked ones.
  std::string packed = "auto";
};

struct OptimizerSection {
  std::string name = "lamb";  ///< lamb | adamw | sgd
  /// Replicated optimizer-state sharding (ZeRO stage 1) over batch.replicas:
  /// each replica keeps 1/N of the optimizer state (docs/scale-out.md).
  bool shard_state = false;
  /// Storage of the first moment m: f32, or f16 as Graphcore's recipe
  /// (PopART accl1_type FLOAT16); the second moment stays f32.
  DType first_moment = DType::f32;
  double learning_rate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6, weight_decay = 0.01, momentum = 0.9;
  std::int64_t warmup_steps = 0;
  std::string schedule = "polynomial";  ///< polynomial | exponential | steps | constant
  double power = 1.0, end_learning_rate = 0.0, decay_rate = 0.96;
  std::int64_t decay_steps = 1000;  ///< exponential: lr x decay_rate^(step/decay_steps)
  std::vector<std::pair<std::int64_t, double>> step_list;  ///< steps: [[from_step, lr], ...]
  double max_grad_norm = 0.0;  ///< clip the global gradient norm (0: off)
  /// Loss scaling (fp16): none | static | dynamic; "auto" is dynamic for f16, none otherwise.
  std::string loss_scaling = "auto";
  double loss_scale = 65536.0;                     ///< static value, or dynamic start
  std::int64_t loss_scale_growth_interval = 2000;  ///< dynamic: double after this many good steps
};

struct CheckpointSection {
  std::filesystem::path dir;   ///< empty: no checkpoints
  std::int64_t every = 0;      ///< also at the end when dir is set
  bool resume = true;          ///< continue from the newest checkpoint in dir
  std::filesystem::path init;  ///< start from these weights (phase 2 from phase 1)
};

struct InferenceSection {
  int iterations = 20;
  int warmup = 3;
  /// When > 0: measured batches run until this many seconds have passed (at
  /// least one), as OpenVINO's benchmark_app -t; `iterations` is then unused.
  double duration_seconds = 0;
  std::filesystem::path output;
};

/// Tasks `squad` and `glue` (docs/finetuning.md). What runs follows the
/// files given (train_file: train, eval_file: evaluate after every epoch,
/// predict_file: predict) unless `do` lists it.
/// The most sequences one packed row may hold (the attention mask keeps a
/// sequence number per token in one byte).
inline constexpr std::int64_t kMaxSequencesPerPack = 64;

struct FinetuneSection {
  bool train = false, eval = false, predict = false;
  std::filesystem::path train_file, eval_file, predict_file;
  /// eval/ and predict/ results, model/ (Hugging Face directory) at the end.
  std::filesystem::path output_dir;
  std::int64_t epochs = 2;
  /// Linear warm-up over this share of the optimizer steps (the seeds'
  /// warmup_proportion); optimizer.warmup_steps, when given, wins.
  double warmup_proportion = 0.1;
  std::int64_t eval_batch = 0;  ///< rows per evaluation batch (0: batch.micro)
  // squad
  std::int64_t doc_stride = 128, max_query_length = 64;
  std::int64_t n_best_size = 20, max_answer_length = 30;
  double null_score_diff_threshold = 0.0;
  std::optional<bool> version_2_with_negative;  ///< unset: v2.0 when the file says so
  /// Packed features (Graphcore's packed SQuAD): up to max_sequences_per_pack
  /// features share a row of seq_len, packed by packing_algorithm (packing.hpp).
  bool packed = false;
  std::int64_t max_sequences_per_pack = 3;
  std::string packing_algorithm = "spfhp";  ///< spfhp | nnlshp
  // glue
  std::string glue_task;  ///< cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli
};

struct RunConfig {
  std::filesystem::path file;
  std::string backend;
  std::vector<std::filesystem::path> plugin_paths;
  std::map<std::string, std::string> device;  ///< raw; see resolve_device
  std::string task;
  MatmulBenchConfig matmul_bench;
  ModelSection model;
  BatchSection batch;
  CollectiveSection collective;
  DataSection data;
  InferenceSection inference;
  OptimizerSection optimizer;
  CheckpointSection checkpoint;
  FinetuneSection finetune;
  std::int64_t steps = 100;     ///< optimizer steps (pretrain)
  std::int64_t log_every = 10;  ///< progress line interval (pretrain)
  std::string log_level = "info";
  std::filesystem::path log_file;

  /// "configs/x.yaml:14" or "--set a.b=v" for a key path; file name alone if unknown.
  std::string locate(const std::string& key_path) const;
  /// Validates `device` against a backend's options, with file/line in errors.
  DeviceOptions resolve_device(const std::vector<OptionSpec>& specs) const;

  std::map<std::string, int> lines;              ///< key path -> 1-based line
  std::map<std::string, std::string> overrides;  ///< key path -> "--set ..." text
};

/// What a task reads from the config (its schema): the sections besides the
/// common ones (backend, plugin_paths, device, task, log), and which of
/// them it cannot run without. A section present that its task does not
/// read is an error naming file, line and key.
struct TaskSchema {
  std::string name;                   ///< the config key `task`
  std::vector<std::string> sections;  ///< of matmul_bench, model, batch, collective,
                                      ///< data, inference, optimizer, steps, checkpoint,
                                      ///< finetune
  std::vector<std::string> required;
};

/// The schemas of the tasks built into this version (matmul-bench,
/// inference, pretrain, squad, glue). The launcher passes its task registry's instead.
const std::vector<TaskSchema>& builtin_task_schemas();
/// The built-in schema named `name`; std::invalid_argument if there is none.
const TaskSchema& builtin_task_schema(const std::string& name);

/// Loads and validates `file` for one of `tasks`, then applies `overrides`
/// ("a.b=value", value in YAML syntax). Throws ConfigError.
RunConfig load_run_config(const std::filesystem::path& file,
                          const std::vector<std::string>& overrides = {},
                          const std::vector<TaskSchema>& tasks = builtin_task_schemas());

/// Checks that every output place the config names (checkpoint.dir,
/// finetune.output_dir, model.save, inference.output, log.file) exists or
/// can be made, and can be written; creates nothing. Throws ConfigError
/// naming file, line and key. `run` and `validate` call it before anything
/// else happens.
void check_output_paths(const RunConfig& config);

}  // namespace polyhal
