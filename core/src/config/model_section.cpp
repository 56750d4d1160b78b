// Config section `model`: which BERT, its size, precision, heads, dropout,
// recomputation and pipeline stages.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/config_keys.hpp"
#include "sections.hpp"

namespace polyhal::config_sections {
namespace {

double dropout_share(const ConfigValue& v) {
  const double share = v.number();
  if (share < 0.0 || share >= 1.0) v.fail("expected a value in [0, 1)");
  return share;
}

void read_recompute(const ConfigValue& v, ModelSection& m) {
  if (v.is_list()) {
    m.recompute = "layers";
    for (const auto& layer : v.items()) m.recompute_layers.push_back(layer.integer(0));
    if (m.recompute_layers.empty()) v.fail("an empty list: use none, all or layer numbers");
    return;
  }
  m.recompute = v.text();
  if (m.recompute != "none" && m.recompute != "all")
    v.fail(fmt::format("expected none, all or a list of layer numbers, got \"{}\"", m.recompute));
}

void read_pipeline(const ConfigValue& v, ModelSection& m) {
  if (!v.is_list()) {
    m.pipeline_stages = v.integer(1);
    return;
  }
  for (const auto& stage : v.items()) {
    if (!stage.is_list() || stage.items().empty())
      v.fail("expected a list of stages, each a list of layer numbers");
    std::vector<std::int64_t> layers;
    for (const auto& layer : stage.items()) layers.push_back(layer.integer(0));
    m.pipeline.push_back(std::move(layers));
  }
  if (m.pipeline.empty()) v.fail("an empty list of stages");
}

std::string pipeline_text(const ModelSection& m) {
  if (m.pipeline_stages > 0) return std::to_string(m.pipeline_stages);
  std::vector<std::string> stages;
  for (const auto& s : m.pipeline) stages.push_back(fmt::format("[{}]", fmt::join(s, ", ")));
  return stages.empty() ? std::string("none") : fmt::format("[{}]", fmt::join(stages, ", "));
}

void read_precision(const ConfigValue& v, ModelSection& m) {
  const std::string text = v.text();
  m.linear_math = LinearMath::native;
  m.mixed = text == "mixed";
  if (m.mixed) {
    m.written_dtype = DType::bf16;  // until resolve_precision knows the device
  } else if (text == "int8") {
    m.written_dtype = DType::bf16;
    m.linear_math = LinearMath::int8;
  } else if (text == "bf32") {
    m.written_dtype = DType::f32;
    m.linear_math = LinearMath::bf16_products;
  } else if (const auto type = parse_dtype(text); type && is_floating(*type)) {
    m.written_dtype = *type;
  } else {
    v.fail(fmt::format("expected mixed, f32, bf16, f16, int8 or bf32, got \"{}\"", text));
  }
}

/// model.int8_activations, int8_scales, calibrate.
void add_int8_keys(SectionKeys<ModelSection>& keys) {
  const std::vector<TaskTrait> int8{TaskTrait::takes_int8};
  keys.add("int8_activations", &ModelSection::int8_activations,
           "model.precision int8: dynamic (a step per row of each linear's input, computed as it "
           "runs) or static (one calibrated step per linear, model.int8_scales)",
           [](const ConfigValue& v) {
             std::string mode = v.text();
             if (mode != "dynamic" && mode != "static")
               v.fail(fmt::format("expected dynamic or static, got \"{}\"", mode));
             return mode;
           },
           {.traits = int8})
      .add("int8_scales", &ModelSection::int8_scales,
           "the calibrated scales file (written by model.calibrate): required by int8_activations "
           "static (its steps); dynamic smooths the LayerNorm outputs' outlier channels with it "
           "(SmoothQuant) when given",
           {}, {.traits = int8})
      .add("calibrate", &ModelSection::calibrate,
           "write int8 scales from this run's forward passes to this file (then run with "
           "model.precision int8 and model.int8_scales)",
           {}, {.traits = int8, .output = OutputPath::file});
}

/// The BertConfig dimensions a config may give over the preset's or hf_config's.
void add_dimension_keys(SectionKeys<ModelSection>& keys) {
  for (const char* dimension :
       {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "max_position_embeddings", "type_vocab_size"}) {
    const std::string name = dimension;
    keys.custom(
        name, "a BertConfig dimension over the preset's or hf_config's",
        [name](const ConfigValue& v, ModelSection& m) { m.dims[name] = v.integer(1); },
        [name](const ModelSection& m) {
          const auto it = m.dims.find(name);
          return it == m.dims.end() ? std::string("(from preset or hf_config)")
                                    : std::to_string(it->second);
        });
  }
}

}  // namespace

ConfigSection model() {
  ConfigSection section{.name = "model"};
  SectionKeys<ModelSection> keys(
      section, [](RunConfig & c) -> auto& { return c.model; });
  const std::vector<TaskTrait> inference{TaskTrait::runs_inference};
  const std::vector<TaskTrait> trains{TaskTrait::trains};
  keys.add("preset", &ModelSection::preset,
           "tiny, mini, small, medium, base, large, or groupbert-mini, -medium, -base, -large",
           [](const ConfigValue& v) {
             std::string preset = v.text();
             const auto& names = bert_preset_names();
             if (std::find(names.begin(), names.end(), preset) == names.end())
               v.fail(fmt::format("unknown preset \"{}\"; presets: {}", preset,
                                  fmt::join(names, ", ")));
             return preset;
           })
      .add("hf_config", &ModelSection::hf_config,
           "a Hugging Face config.json instead of the preset", {}, {.input = InputPath::file})
      .add("dir", &ModelSection::dir,
           "a Hugging Face or sentence-transformers model directory, read whole as those "
           "libraries read it: its config.json, weights (one file or shards), its tokenizer "
           "(tokenizer.json, else vocab.txt and the settings beside it, else the slow "
           "vocab.json + merges.txt or sentencepiece.bpe.model), "
           "sentence_bert_config.json's max_seq_length as seq_len, and (inference.pooling and "
           "normalize auto) its pooling and Normalize modules; a key given as well wins, with "
           "a warning",
           {}, {.input = InputPath::file_or_directory})
      .add("weights", &ModelSection::weights,
           "safetensors weights (Hugging Face names); default: seeded random init", {},
           {.input = InputPath::checkpoint})
      .add("save", &ModelSection::save,
           "write config.json and model.safetensors here (Hugging Face layout): inference's "
           "model, or a training task's final weights (instead of checkpoint.dir/hf or "
           "finetune.output_dir/model)",
           {}, {.output = OutputPath::directory})
      .add("seed", &ModelSection::seed, "seed of the random init and of dropout")
      .add("seq_len", &ModelSection::seq_len, "tokens per sequence")
      .custom("precision",
              "mixed (each device's fastest native precision: bf16 on gaudi and on CPUs with "
              "AVX512_BF16 or AMX, f32 on other CPUs, f16 with dynamic loss scaling on ipu; the "
              "run says which and why), "
              "f32, bf16 or f16 (activations and GEMMs; master weights stay f32; on the cpu, "
              "inference's f16 is f32 tensors with f16 products in the encoder's linears); "
              "inference and evaluation also int8 (encoder GEMMs in int8, bf16 activations where "
              "bf16 is native, else f32; "
              "model.int8_activations) and bf32 (f32 tensors, bf16 products)",
              read_precision, [](const ModelSection& m) { return m.precision_text(); });
  add_int8_keys(keys);
  keys.add("heads", &ModelSection::heads, "inference: also run the MLM and NSP heads", {},
           {.traits = inference})
      .custom(
          "head", "inference: none, pretraining, question_answering or classification",
          [](const ConfigValue& v, ModelSection& m) {
            m.head = v.text();
            if (m.head != "none" && m.head != "pretraining" && m.head != "question_answering" &&
                m.head != "classification")
              v.fail(fmt::format(
                  "expected none, pretraining, question_answering or classification, got \"{}\"",
                  m.head));
            m.heads = m.head == "pretraining";
          },
          [](const ModelSection& m) { return m.head; }, {.traits = inference})
      .add("num_labels", &ModelSection::num_labels, "classification head: labels", {},
           {.traits = inference})
      .add("dropout", &ModelSection::dropout, "hidden dropout (HF hidden_dropout_prob)",
           dropout_share)
      .add("attention_dropout", &ModelSection::attention_dropout,
           "attention dropout (default: model.dropout)", dropout_share,
           {.value =
                [](const ModelSection& m) {
                  return config_text(m.attention_dropout.value_or(m.dropout));
                }})
      .custom("recompute", "none, all, or a list of layers whose activations backward recomputes",
              read_recompute,
              [](const ModelSection& m) {
                return m.recompute_layers.empty()
                           ? m.recompute
                           : fmt::format("[{}]", fmt::join(m.recompute_layers, ", "));
              },
              {.traits = trains})
      .custom("pipeline",
              "pipeline stages: a stage count (balanced) or a list of [first, last) layer ranges",
              read_pipeline, pipeline_text, {.traits = trains});
  add_dimension_keys(keys);
  section.check = [](const ConfigValue& given, RunConfig& config) {
    if (given.has("head") && given.has("heads"))
      config.fail("model.head", "give model.head or model.heads, not both");
  };
  return section;
}

}  // namespace polyhal::config_sections
