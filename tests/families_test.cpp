// The encoder families beyond BERT against transformers and
// sentence-transformers: small models of each with seeded random weights,
// saved by the library itself (tests/data/families/make_families.py, which
// writes the reference), run through `polyhal run` as a user's directory.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kData =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/families";

const HostTensor& reference(const std::string& name) {
  static const TensorMap all = read_safetensors(kData / "reference.safetensors");
  return all.at(name);
}

std::vector<std::string> lines(bool singles_only) {
  std::ifstream in(kData / "lines.txt");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!singles_only || line.find('\t') == std::string::npos) out.push_back(line);
  return out;
}

/// `polyhal run` of inference over `text` with the model in `dir`; the
/// output records. `inference` and `model` are more YAML for those sections.
std::vector<nlohmann::json> run_inference(const std::filesystem::path& dir,
                                          const std::vector<std::string>& text,
                                          const std::string& inference = "",
                                          const std::string& model = "") {
  test::TempDir tmp;
  std::string joined;
  for (const auto& line : text) joined += line + "\n";
  const auto input = tmp.write("lines.txt", joined);
  const auto output = tmp.path() / "out.jsonl";
  const auto config = tmp.write(
      "run.yaml",
      fmt::format("backend: cpu\ntask: inference\nmodel: {{dir: {}{}}}\nbatch: {{micro: 4}}\n"
                  "data: {{source: text, text_file: {}}}\ninference: {{output: {}{}}}\n",
                  dir.string(), model, input.string(), output.string(), inference));
  const auto r = test::run_polyhal("run --config " + config.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(output);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

double cosine(const std::vector<float>& a, const float* b) {
  double dot = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * static_cast<double>(b[i]);
    na += a[i] * static_cast<double>(a[i]);
    nb += b[i] * static_cast<double>(b[i]);
  }
  return dot / std::sqrt(na * nb);
}

/// Each record's `key` (a vector) equals the reference's row within `tolerance`.
void expect_rows(const std::vector<nlohmann::json>& records, const std::string& key,
                 const HostTensor& want, double tolerance) {
  ASSERT_EQ(static_cast<std::int64_t>(records.size()), want.shape[0]);
  const auto width = static_cast<std::size_t>(want.shape[1]);
  for (std::size_t r = 0; r < records.size(); ++r) {
    const auto got = records[r].at(key).get<std::vector<float>>();
    ASSERT_EQ(got.size(), width) << key << " line " << r + 1;
    for (std::size_t i = 0; i < width; ++i)
      EXPECT_NEAR(got[i], want.values[r * width + i], tolerance) << key << " line " << r + 1;
  }
}

/// The sentence-transformers directory `name`'s embeddings of lines.txt's
/// single texts within 1e-5 cosine of the reference, packed and unpacked.
void expect_embeddings(const std::string& name) {
  const auto& want = reference(name + ".embeddings");
  for (const char* packed : {"true", "false"}) {
    const auto records =
        run_inference(kData / name, lines(true), fmt::format(", packed: {}", packed));
    ASSERT_EQ(static_cast<std::int64_t>(records.size()), want.shape[0]) << packed;
    const auto width = static_cast<std::size_t>(want.shape[1]);
    for (std::size_t r = 0; r < records.size(); ++r)
      EXPECT_GE(cosine(records[r].at("embedding").get<std::vector<float>>(),
                       want.values.data() + r * width),
                1.0 - 1e-5)
          << name << ", packed " << packed << ", line " << r + 1;
  }
}

// XLMRobertaModel under sentence-transformers' mean pooling (the layout of
// multilingual-e5): fairseq's positions, one token type, the Unigram
// tokenizer.json; packed rows and one line a row.
TEST(Families, XlmRobertaEmbedsAsSentenceTransformers) {
  expect_embeddings("xlm_roberta_embedder");
}

// RobertaForSequenceClassification with one label (a reranker's score):
// RoBERTa's two-layer classifier head on <s>, byte-level BPE, texts and pairs.
TEST(Families, RobertaRerankerScoresAsTransformers) {
  expect_rows(run_inference(kData / "roberta_reranker", lines(false)), "logits",
              reference("roberta_reranker.logits"), 1e-4);
}

TEST(Families, CamembertClassifierLogitsAsTransformers) {
  expect_rows(run_inference(kData / "camembert_classifier", lines(false)), "logits",
              reference("camembert_classifier.logits"), 1e-4);
}

// DistilBertModel under mean pooling: its own names and config keys, no
// token types, no pooler.
TEST(Families, DistilbertEmbedsAsSentenceTransformers) {
  expect_embeddings("distilbert_embedder");
}

// ElectraModel (ELECTRA-small's projected embeddings) and RobertaModel
// (byte-level BPE) under mean pooling.
TEST(Families, ElectraAndRobertaEmbedAsSentenceTransformers) {
  expect_embeddings("electra_embedder");
  expect_embeddings("roberta_embedder");
}

/// Start and end logits of every real token (`pad` the padding token).
void expect_span_logits(const std::string& name, const std::string& pad) {
  const auto records = run_inference(kData / name, lines(false));
  for (const char* key : {"start_logits", "end_logits"}) {
    const auto& want = reference(name + "." + key);
    ASSERT_EQ(static_cast<std::int64_t>(records.size()), want.shape[0]);
    const auto width = static_cast<std::size_t>(want.shape[1]);
    for (std::size_t r = 0; r < records.size(); ++r) {
      const auto tokens = records[r].at("tokens").get<std::vector<std::string>>();
      const auto got = records[r].at(key).get<std::vector<float>>();
      std::size_t real = 0;
      while (real < tokens.size() && tokens[real] != pad) ++real;
      ASSERT_LE(real, width) << key << " line " << r + 1;
      for (std::size_t i = 0; i < real; ++i)
        EXPECT_NEAR(got[i], want.values[r * width + i], 1e-4) << key << " line " << r + 1;
      if (real < width) {
        EXPECT_EQ(want.values[r * width + real], 0.0f) << "line " << r + 1;
      }
    }
  }
}

// XLMRobertaForQuestionAnswering and DistilBertForQuestionAnswering.
TEST(Families, XlmRobertaQuestionAnsweringLogitsAsTransformers) {
  expect_span_logits("xlm_roberta_qa", "<pad>");
}

TEST(Families, DistilbertQuestionAnsweringLogitsAsTransformers) {
  expect_span_logits("distilbert_qa", "[PAD]");
}

// ModernBertForQuestionAnswering: its prediction head (dense, GELU, norm)
// on every token before the classifier, windows and rotary positions per
// sequence of a packed row.
TEST(Families, ModernBertQuestionAnsweringLogitsAsTransformers) {
  expect_span_logits("modernbert_qa", "[PAD]");
}

// MPNetForQuestionAnswering (its relative bias) and ElectraForQuestionAnswering
// (ELECTRA-small's projected embeddings): qa_outputs as BERT's.
TEST(Families, MpnetAndElectraQuestionAnsweringLogitsAsTransformers) {
  expect_span_logits("mpnet_qa", "[PAD]");
  expect_span_logits("electra_qa", "[PAD]");
}

// ElectraForSequenceClassification: BERT's layers, and a head of dense,
// GELU and out_proj on [CLS].
// DistilBertForSequenceClassification: pre_classifier with ReLU, classifier.
TEST(Families, DistilbertClassifierLogitsAsTransformers) {
  expect_rows(run_inference(kData / "distilbert_classifier", lines(false)), "logits",
              reference("distilbert_classifier.logits"), 1e-4);
}

TEST(Families, ElectraClassifierLogitsAsTransformers) {
  expect_rows(run_inference(kData / "electra_classifier", lines(false)), "logits",
              reference("electra_classifier.logits"), 1e-4);
}

// A saved DistilBERT is transformers' layout: its names and keys, no token
// types (their zero row folded into the positions); it runs again alike.
TEST(Families, ASavedDistilbertIsTransformersOwnLayoutAndRunsAgain) {
  test::TempDir tmp;
  const auto saved = tmp.path() / "saved";
  ASSERT_FALSE(run_inference(kData / "distilbert_qa", lines(false), "", ", save: " + saved.string())
                   .empty());
  const auto config = nlohmann::json::parse(std::ifstream(saved / "config.json"));
  EXPECT_EQ(config.at("architectures").at(0), "DistilBertForQuestionAnswering");
  EXPECT_EQ(config.at("dim"), 64);
  EXPECT_EQ(config.at("n_layers"), 2);
  EXPECT_FALSE(config.contains("hidden_size"));
  const auto weights = read_safetensors(saved / "model.safetensors");
  EXPECT_TRUE(weights.contains("distilbert.transformer.layer.1.ffn.lin2.weight"));
  EXPECT_TRUE(weights.contains("distilbert.transformer.layer.0.sa_layer_norm.bias"));
  EXPECT_TRUE(weights.contains("qa_outputs.weight"));
  for (const auto& [name, tensor] : weights) {
    EXPECT_FALSE(name.starts_with("bert.")) << name;
    EXPECT_EQ(name.find("token_type"), std::string::npos) << name;
  }
  std::filesystem::copy_file(kData / "distilbert_qa/tokenizer.json", saved / "tokenizer.json");
  const auto again = run_inference(saved, lines(false));
  const auto first = run_inference(kData / "distilbert_qa", lines(false));
  ASSERT_EQ(again.size(), first.size());
  for (std::size_t r = 0; r < first.size(); ++r) {
    const auto a = first[r].at("start_logits").get<std::vector<float>>();
    const auto b = again[r].at("start_logits").get<std::vector<float>>();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << r;
  }
}

// model.save writes the directory as transformers names a RoBERTa: its
// class, "roberta." names, classifier.dense/out_proj, the whole position
// table; it runs again to the same logits.
TEST(Families, ASavedRobertaIsTransformersOwnLayoutAndRunsAgain) {
  test::TempDir tmp;
  const auto saved = tmp.path() / "saved";
  const auto first =
      run_inference(kData / "roberta_reranker", lines(false), "", ", save: " + saved.string());
  ASSERT_FALSE(first.empty());
  std::ifstream config_in(saved / "config.json");
  const auto config = nlohmann::json::parse(config_in);
  EXPECT_EQ(config.at("architectures").at(0), "RobertaForSequenceClassification");
  EXPECT_EQ(config.at("model_type"), "roberta");
  EXPECT_EQ(config.at("max_position_embeddings"), 130);
  EXPECT_EQ(config.at("pad_token_id"), 1);
  const auto weights = read_safetensors(saved / "model.safetensors");
  ASSERT_TRUE(weights.contains("roberta.embeddings.position_embeddings.weight"));
  EXPECT_EQ(weights.at("roberta.embeddings.position_embeddings.weight").shape, (Shape{130, 64}));
  EXPECT_TRUE(weights.contains("classifier.dense.weight"));
  EXPECT_TRUE(weights.contains("classifier.out_proj.weight"));
  for (const auto& [name, tensor] : weights) EXPECT_FALSE(name.starts_with("bert.")) << name;
  std::filesystem::copy_file(kData / "roberta_reranker/tokenizer.json", saved / "tokenizer.json",
                             std::filesystem::copy_options::skip_existing);
  expect_rows(run_inference(saved, lines(false)), "logits", reference("roberta_reranker.logits"),
              1e-4);
}

/// polyhal's name for transformers' tensor `name` (the loader's rule).
std::string polyhal_name(const std::string& name) {
  TensorMap one;
  one.emplace(name, HostTensor{});
  const TensorMap renamed = canonical_bert_weights(std::move(one));
  return renamed.empty() ? std::string{} : renamed.begin()->first;
}

std::vector<std::int32_t> flat_ints(const nlohmann::json& rows) {
  std::vector<std::int32_t> out;
  for (const auto& row : rows)
    for (const auto& v : row) out.push_back(v.get<std::int32_t>());
  return out;
}

// One fine-tuning step of each family's head (classification, regression,
// question answering) against transformers in f64 with dropout off: the loss,
// and every gradient's sum, norm and 16 entries
// (tests/data/families/make_family_train_golden.py), on the CPU plugin.
TEST(Families, AFineTuningStepsLossAndGradientsMatchPyTorch) {
  const auto golden = nlohmann::json::parse(std::ifstream(kData / "train_golden.json"));
  const std::int64_t seq = golden.at("seq");
  auto device = test::first_device("cpu");
  for (const char* name :
       {"roberta_reranker", "camembert_classifier", "electra_classifier",
        "electra_small_classifier", "xlm_roberta_qa", "distilbert_qa", "distilbert_classifier",
        "mpnet_classifier", "modernbert_classifier", "modernbert_cls_classifier", "modernbert_qa",
        "mpnet_qa", "electra_qa"}) {
    SCOPED_TRACE(name);
    const auto& g = golden.at(name);
    const BertConfig config = read_hf_config(kData / name / "config.json");
    const TaskHead head = read_hf_head(kData / name / "config.json").value();
    TrainingBatch batch;
    batch.inputs = {flat_ints(g.at("input_ids")), flat_ints(g.at("token_type_ids")),
                    flat_ints(g.at("attention_mask"))};
    if (g.contains("labels")) batch.labels = g.at("labels").get<std::vector<std::int32_t>>();
    if (g.contains("targets")) batch.targets = g.at("targets").get<std::vector<float>>();
    if (g.contains("start_positions")) {
      batch.start_positions = g.at("start_positions").get<std::vector<std::int32_t>>();
      batch.end_positions = g.at("end_positions").get<std::vector<std::int32_t>>();
    }
    const BertShape shape{static_cast<std::int64_t>(g.at("input_ids").size()), seq};
    OptimizerSettings adamw;
    adamw.kind = "adamw";
    BertTraining training(*device, config, shape, {.optimizer = adamw, .head = head});
    training.load_weights(load_bert_weights(kData / name / "model.safetensors", config, head));
    const double loss = training.forward_backward(batch).total();
    EXPECT_NEAR(loss, g.at("loss").get<double>(), 1e-4 * std::max(1.0, std::fabs(loss)));
    const TensorMap grads = training.gradients();
    double scale = 0;
    for (const auto& [hf, want] : g.at("gradients").items())
      scale = std::max(scale, want.at("norm").get<double>());
    std::size_t compared = 0;
    for (const auto& [hf, want] : g.at("gradients").items()) {
      const std::string mine = polyhal_name(hf);
      ASSERT_TRUE(grads.contains(mine)) << hf << " is " << mine << ", which polyhal has not";
      const auto& values = grads.at(mine).values;
      const double norm = want.at("norm");
      const double tolerance = 1e-4 * std::max(norm, 1e-2 * scale);
      // A RoBERTa position table's rows before pad_token_id + 1: read by
      // nothing, zero in PyTorch and not kept by polyhal.
      const bool positions = mine == "bert.embeddings.position_embeddings.weight";
      const auto skipped =
          positions ? static_cast<std::size_t>(config.position_offset * config.hidden_size) : 0;
      ASSERT_EQ(values.size() + skipped,
                static_cast<std::size_t>(std::llround(std::accumulate(
                    want.at("shape").begin(), want.at("shape").end(), 1.0,
                    [](double a, const auto& d) { return a * d.template get<double>(); }))))
          << hf;
      double sum = 0, squares = 0;
      for (const float v : values) {
        sum += v;
        squares += static_cast<double>(v) * v;
      }
      EXPECT_NEAR(std::sqrt(squares), norm, tolerance) << hf << " norm";
      EXPECT_NEAR(sum, want.at("sum").get<double>(),
                  tolerance * std::sqrt(static_cast<double>(values.size())))
          << hf << " sum";
      for (const auto& sample : want.at("samples")) {
        const auto at = sample.at(0).get<std::size_t>();
        const double value = sample.at(1);
        if (at < skipped) {
          EXPECT_EQ(value, 0.0) << hf << "[" << at << "]: a row no position reads";
          continue;
        }
        EXPECT_NEAR(values.at(at - skipped), value, tolerance) << hf << "[" << at << "]";
      }
      ++compared;
    }
    // Every parameter has PyTorch's gradient, but DistilBERT's and MPNet's
    // zero type row (their checkpoints have no token types); ModernBERT's absent biases
    // and tables are no parameters at all.
    const bool type_row =
        config.model_type == ModelType::distilbert || config.model_type == ModelType::mpnet;
    EXPECT_EQ(compared + (type_row ? 1 : 0), grads.size());
  }
}

// MPNetModel under mean pooling (all-mpnet-base-v2's layout): the bucketed
// relative-position bias added to every layer's scores, per sequence in a
// packed row; and MPNetForSequenceClassification's logits.
TEST(Families, MpnetEmbedsAndClassifiesAsTransformers) {
  expect_embeddings("mpnet_embedder");
  expect_rows(run_inference(kData / "mpnet_classifier", lines(false)), "logits",
              reference("mpnet_classifier.logits"), 1e-4);
}

// ModernBertModel under mean pooling (gte-modernbert's layout): rotary
// positions with the global and the local base, a sliding window on the
// local layer, GeGLU, pre-norm without biases and the final norm, per
// sequence in a packed row; and ModernBertForSequenceClassification's logits
// on the mean of the tokens (every bias present) and on the first token.
TEST(Families, ModernBertEmbedsAndClassifiesAsTransformers) {
  expect_embeddings("modernbert_embedder");
  // int8 (dynamic, on every CPU tier the plugin runs) stays close too, and
  // MPNet's relative attention with it.
  for (const char* name : {"modernbert_embedder", "mpnet_embedder"}) {
    const auto& want = reference(std::string(name) + ".embeddings");
    const auto records = run_inference(kData / name, lines(true), "", ", precision: int8");
    ASSERT_EQ(static_cast<std::int64_t>(records.size()), want.shape[0]);
    const auto width = static_cast<std::size_t>(want.shape[1]);
    for (std::size_t r = 0; r < records.size(); ++r)
      EXPECT_GE(cosine(records[r].at("embedding").get<std::vector<float>>(),
                       want.values.data() + r * width),
                0.999)
          << name << " int8, line " << r + 1;
  }
  for (const char* name : {"modernbert_classifier", "modernbert_cls_classifier"})
    expect_rows(run_inference(kData / name, lines(false)), "logits",
                reference(std::string(name) + ".logits"), 1e-4);
}

/// The ConfigError reading `dir`'s config.json with `key` set to `value`.
std::string modernbert_config_error(const std::string& key, const nlohmann::json& value) {
  test::TempDir tmp;
  auto config = nlohmann::json::parse(std::ifstream(kData / "modernbert_embedder/config.json"));
  config[key] = value;
  const auto file = tmp.write("config.json", config.dump());
  try {
    read_hf_config(file);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    return e.what();
  }
  return "no error";
}

// A ModernBERT config.json that polyhal cannot build as written is refused
// naming the file and the key; pre-training one is refused with the reason.
TEST(Families, WhatAModernBertCannotBeIsRefusedNamingTheKey) {
  EXPECT_NE(modernbert_config_error("local_attention", 4096)
                .find("key 'local_attention': a window of 4096 tokens is longer than "
                      "max_position_embeddings 130"),
            std::string::npos);
  EXPECT_NE(
      modernbert_config_error("layer_types", {"full_attention", "full_attention", "full_attention"})
          .find("key 'layer_types': layer 1 is \"full_attention\", but "
                "global_attn_every_n_layers 2 makes it \"sliding_attention\""),
      std::string::npos);
  EXPECT_NE(modernbert_config_error("hidden_activation", "silu").find("key 'hidden_activation'"),
            std::string::npos);
  EXPECT_NE(modernbert_config_error("classifier_pooling", "max")
                .find("key 'classifier_pooling': expected \"cls\" or \"mean\""),
            std::string::npos);
  EXPECT_NE(modernbert_config_error("global_attn_every_n_layers", 0)
                .find("key 'global_attn_every_n_layers'"),
            std::string::npos);
  test::TempDir tmp;
  const auto pretrain = tmp.write(
      "pretrain.yaml", fmt::format("backend: cpu\ntask: pretrain\nmodel: {{hf_config: {}}}\n",
                                   (kData / "modernbert_embedder/config.json").string()));
  const auto r = test::run_polyhal("validate --config " + pretrain.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pre-training a ModernBERT model"), std::string::npos) << r.output;
}

// The IPU and Gaudi device models plan and estimate every family from its
// directory (--compile-only: memory and time, nothing run), for mixed
// inference (each device's own low precision) and, for the families with new training
// ops, GLUE fine-tuning.
TEST(Families, TheDeviceModelsPlanAndEstimateEveryFamily) {
  test::TempDir tmp;
  const auto tsv =
      tmp.write("t.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta b\ta b\n");
  for (const char* backend : {"ipu", "gaudi"}) {
    for (const char* name : {"xlm_roberta_embedder", "roberta_reranker", "camembert_classifier",
                             "distilbert_qa", "electra_small_classifier", "mpnet_classifier",
                             "modernbert_embedder", "modernbert_classifier", "modernbert_qa"}) {
      SCOPED_TRACE(std::string(backend) + " " + name);
      const auto yaml = tmp.write(
          "infer.yaml",
          fmt::format(
              "backend: {}\ntask: inference\nmodel: {{dir: {}, seq_len: 128, precision: mixed}}\n"
              "batch: {{micro: 8}}\ndata: {{source: generated}}\n",
              backend, (kData / name).string()));
      const auto r = test::run_polyhal("run --compile-only --config " + yaml.string());
      EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find("-> fits"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("estimated (device model, not measured)"), std::string::npos)
          << r.output;
    }
    for (const char* name : {"mpnet_classifier", "modernbert_classifier"}) {
      SCOPED_TRACE(std::string(backend) + " glue " + name);
      const auto yaml = tmp.write(
          "glue.yaml",
          fmt::format("backend: {}\ntask: glue\nmodel: {{seq_len: 32}}\ncheckpoint: {{init: {}}}\n"
                      "finetune: {{glue_task: mrpc, train_file: {}, output_dir: {}}}\n",
                      backend, (kData / name).string(), tsv.string(),
                      (tmp.path() / "out").string()));
      const auto r = test::run_polyhal("run --compile-only --config " + yaml.string());
      EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find("fits"), std::string::npos) << r.output;
    }
  }
}

// ELECTRA-small's layout: embeddings of embedding_size, embeddings_project
// to hidden_size; and an embedding_size out of range named.
TEST(Families, ElectraSmallsProjectedEmbeddingsClassifyAsTransformers) {
  expect_rows(run_inference(kData / "electra_small_classifier", lines(false)), "logits",
              reference("electra_small_classifier.logits"), 1e-4);
  test::TempDir tmp;
  const auto electra = tmp.path() / "electra";
  std::filesystem::copy(kData / "electra_small_classifier", electra);
  auto config = nlohmann::json::parse(std::ifstream(electra / "config.json"));
  config["embedding_size"] = 0;
  std::ofstream(electra / "config.json") << config.dump();
  const auto yaml = tmp.write(
      "electra.yaml",
      fmt::format("backend: cpu\ntask: inference\nmodel: {{dir: {}}}\n", electra.string()));
  const auto r = test::run_polyhal("validate --config " + yaml.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'embedding_size': expected 1 to 65536, got 0"), std::string::npos)
      << r.output;
}

// What a RoBERTa cannot do is refused by name, with the key.
TEST(Families, WhatARobertaCannotDoIsRefusedNamingTheKey) {
  test::TempDir tmp;
  const auto dir = tmp.path() / "model";
  std::filesystem::copy(kData / "roberta_reranker", dir);
  auto config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  config["max_position_embeddings"] = 2;
  std::ofstream(dir / "config.json") << config.dump();
  const auto yaml = tmp.write(
      "run.yaml", fmt::format("backend: cpu\ntask: inference\nmodel: {{dir: {}}}\n", dir.string()));
  auto r = test::run_polyhal("validate --config " + yaml.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'max_position_embeddings'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pad_token_id"), std::string::npos) << r.output;

  const auto pretrain = tmp.write(
      "pretrain.yaml", fmt::format("backend: cpu\ntask: pretrain\nmodel: {{hf_config: {}}}\n",
                                   (kData / "roberta_reranker/config.json").string()));
  r = test::run_polyhal("validate --config " + pretrain.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pre-training a RoBERTa model is not built"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace polyhal
