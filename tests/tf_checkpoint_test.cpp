// TensorFlow checkpoints (tests/data/tf_checkpoint/make_tf_checkpoint.py wrote
// them with TensorFlow 2.21): polyhal reads Google's BERT names, and the model
// it builds computes what transformers computes from the same checkpoint
// through its own TensorFlow loader (make_reference.py). Damaged files are
// errors naming the file and the place.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/tf_bert_weights.hpp"
#include "polyhal/app/tf_checkpoint.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kData =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tf_checkpoint";
const std::filesystem::path kGoogle = kData / "google/model.ckpt-7";

double max_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  return worst;
}

TEST(TfCheckpoint, ReadsTheIndexAndEveryTensorTensorFlowWrote) {
  EXPECT_TRUE(is_tf_checkpoint(kGoogle));
  EXPECT_TRUE(is_tf_checkpoint(kGoogle.string() + ".index"));
  EXPECT_FALSE(is_tf_checkpoint(kData / "google/model.ckpt-8"));
  const TfCheckpoint checkpoint(kGoogle);
  // 46 weights of a 2-layer BERT with heads, adam_m and adam_v of each, global_step.
  EXPECT_EQ(checkpoint.entries().size(), 46u * 3 + 1);
  const auto& step = checkpoint.entries().at("global_step");
  EXPECT_EQ(step.dtype, "int64");
  EXPECT_EQ(checkpoint.read("global_step").values, std::vector<float>{7.0f});
  const auto query = checkpoint.read("bert/encoder/layer_0/attention/self/query/kernel");
  EXPECT_EQ(query.shape, (Shape{32, 32}));
  EXPECT_EQ(checkpoint.read("bert/embeddings/word_embeddings/adam_m").values[5],
            0.5f * checkpoint.read("bert/embeddings/word_embeddings").values[5]);
}

TEST(TfCheckpoint, EveryNumberTypeIsReadAsF32) {
  const TfCheckpoint checkpoint(kData / "dtypes/model.ckpt");
  EXPECT_EQ(checkpoint.read("f32").values,
            (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(checkpoint.read("bf16").values[1], -2.25f);
  EXPECT_NEAR(checkpoint.read("bf16").values[3], 1e-3f, 1e-5f);
  EXPECT_EQ(checkpoint.read("f16").values, (std::vector<float>{0.5f, -65504.0f}));
  EXPECT_EQ(checkpoint.read("f64").values, (std::vector<float>{1e-10f, 2.0f}));
  EXPECT_EQ(checkpoint.read("i32").values, (std::vector<float>{-3.0f, 4.0f}));
  EXPECT_EQ(checkpoint.entries().at("text").dtype, "string");
  EXPECT_THROW(checkpoint.read("text"), ConfigError);
  TfReadReport report;
  read_tf_bert_weights(kData / "dtypes/model.ckpt", &report);
  EXPECT_EQ(report.other, std::vector<std::string>{"text"});
}

TEST(TfCheckpoint, GoogleNamesBecomeHuggingFaceNamesAsTransformersMapsThem) {
  TfReadReport report;
  const auto weights = read_tf_bert_weights(kGoogle, &report);
  EXPECT_EQ(report.training_state.size(), 46u * 2 + 1);
  EXPECT_TRUE(report.other.empty());
  const auto reference = read_safetensors(kData / "reference.safetensors");
  // transformers' load_tf_weights_in_bert, bit for bit: kernels transposed.
  EXPECT_EQ(weights.at("bert.embeddings.word_embeddings.weight").values,
            reference.at("word_embeddings").values);
  EXPECT_EQ(weights.at("bert.encoder.layer.0.attention.self.query.weight").values,
            reference.at("layer0_query_weight").values);
  EXPECT_EQ(hf_name_of_tf_variable("cls/seq_relationship/output_weights")->hf,
            "cls.seq_relationship.weight");
  EXPECT_EQ(hf_name_of_tf_variable("bert/encoder/layer_11/output/LayerNorm/gamma")->hf,
            "bert.encoder.layer.11.output.LayerNorm.weight");
  EXPECT_EQ(hf_name_of_tf_variable("cls/squad/output_weights")->hf, "qa_outputs.weight");
  EXPECT_FALSE(hf_name_of_tf_variable("encoder/layer_with_weights-0/embeddings"));
  // Two shards hold the same tensors.
  EXPECT_EQ(read_tf_bert_weights(kData / "sharded/model.ckpt-7").at("cls.predictions.bias").values,
            weights.at("cls.predictions.bias").values);
}

TEST(TfCheckpoint, TheModelComputesWhatTransformersComputesFromIt) {
  const auto config = read_hf_config(kData / "google/bert_config.json");
  const auto reference = read_safetensors(kData / "reference.safetensors");
  const BertShape shape{reference.at("input_ids").shape[0], reference.at("input_ids").shape[1]};
  for (const std::string backend : {"cpu", "ipu", "gaudi"}) {
    SCOPED_TRACE(backend);
    auto device = test::first_device(backend);
    BertInference bert(*device, config, shape, DType::f32, /*with_heads=*/true);
    bert.load_weights(load_bert_weights(kGoogle, config));
    BertOutputs out;
    bert.run(
        {test::as_ints(reference.at("input_ids")), test::as_ints(reference.at("token_type_ids")),
         test::as_ints(reference.at("attention_mask"))},
        &out);
    EXPECT_LE(max_error(out.last_hidden_state, reference.at("last_hidden_state").values), 1e-4);
    EXPECT_LE(max_error(out.mlm_logits, reference.at("mlm_logits").values), 1e-4);
    EXPECT_LE(max_error(out.nsp_logits, reference.at("nsp_logits").values), 1e-4);
  }
}

/// A copy of the single-shard checkpoint in `dir`, as prefix.
std::filesystem::path copy_checkpoint(const test::TempDir& dir) {
  for (const char* suffix : {".index", ".data-00000-of-00001"})
    std::filesystem::copy_file(kGoogle.string() + suffix,
                               (dir.path() / "model.ckpt-7").string() + suffix);
  return dir.path() / "model.ckpt-7";
}

void flip_byte(const std::filesystem::path& file, std::uintmax_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x5a));
}

std::string error_of(const std::filesystem::path& prefix) {
  try {
    read_tf_bert_weights(prefix);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(TfCheckpoint, DamagedFilesAreErrorsNamingFileAndPlace) {
  test::TempDir dir;
  const auto prefix = copy_checkpoint(dir);
  const auto index = prefix.string() + ".index";
  const auto shard = prefix.string() + ".data-00000-of-00001";
  // A flipped byte in a shard: the tensor's CRC-32C.
  flip_byte(shard, 1000);
  EXPECT_NE(error_of(prefix).find("fails its checksum (index says"), std::string::npos)
      << error_of(prefix);
  EXPECT_NE(error_of(prefix).find(shard), std::string::npos);
  // A truncated shard: records pointing past its end.
  std::filesystem::resize_file(shard, 100);
  EXPECT_NE(error_of(prefix).find("lie past the end of"), std::string::npos) << error_of(prefix);
  // A missing shard.
  std::filesystem::remove(shard);
  EXPECT_NE(error_of(prefix).find("missing: the index"), std::string::npos) << error_of(prefix);
  // A flipped byte in the index: a block's checksum.
  test::TempDir dir2;
  const auto other = copy_checkpoint(dir2);
  flip_byte(other.string() + ".index", 10);
  EXPECT_NE(error_of(other).find("fails its checksum"), std::string::npos) << error_of(other);
  // A truncated index: no footer magic.
  test::TempDir dir3;
  const auto cut = copy_checkpoint(dir3);
  std::filesystem::resize_file(cut.string() + ".index", 2000);
  EXPECT_NE(error_of(cut).find("no table magic number"), std::string::npos) << error_of(cut);
  EXPECT_NE(error_of(cut).find(".index"), std::string::npos);
}

/// Google's released-model layout: bert_config.json, vocab.txt and the
/// checkpoint bert_model.ckpt.* in one directory.
std::filesystem::path google_model_directory(const test::TempDir& dir) {
  const auto model = dir.path() / "uncased_L-2_H-32_A-4";
  std::filesystem::create_directories(model);
  std::filesystem::copy_file(kData / "google/bert_config.json", model / "bert_config.json");
  for (const char* suffix : {".index", ".data-00000-of-00001"})
    std::filesystem::copy_file(kGoogle.string() + suffix,
                               (model / "bert_model.ckpt").string() + suffix);
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nwhat\nfollows\nkey\n?\n";
  for (int w = 0; w < 90; ++w) vocab += fmt::format("w{}\n", w);
  std::ofstream(model / "vocab.txt") << vocab;
  return model;
}

TEST(TfCheckpoint, SquadFineTuningStartsFromGooglesModelDirectory) {
  test::TempDir dir;
  const auto model = google_model_directory(dir);
  std::string data = R"({"version": "1.1", "data": [)";
  for (int q = 0; q < 24; ++q)
    data += fmt::format(
        R"({}{{"title": "t", "paragraphs": [{{"context": "w{} w{} key w{} w{}", "qas": [{{"id": "q{}", "question": "what follows key ?", "answers": [{{"text": "w{}", "answer_start": {}}}]}}]}}]}})",
        q ? "," : "", q, q + 1, q + 2, q + 3, q, q + 2,
        fmt::format("w{} w{} key ", q, q + 1).size());
  data += "]}";
  dir.write("train.json", data);
  const auto config =
      dir.write("squad.yaml",
                "backend: cpu\ntask: squad\nmodel: {seq_len: 32}\nbatch: {micro: 8}\n"
                "checkpoint: {init: " +
                    model.string() +
                    "}\n"
                    "finetune: {train_file: train.json, epochs: 1, output_dir: out}\n");
  const auto run = test::run_polyhal("run --config " + config.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("93 tensors of optimizer and training state left out"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("newly initialised (not in the file): qa_outputs.weight"),
            std::string::npos)
      << run.output;
  // The checkpoint prefix itself works too, with Google's config named.
  const auto prefix = test::run_polyhal(
      "run --config " + config.string() +
      " --set checkpoint.init=" + (model / "bert_model.ckpt").string() +
      " --set model.hf_config=" + (model / "bert_config.json").string() +
      " --set data.vocab=" + (model / "vocab.txt").string() + " --set finetune.output_dir=out2");
  EXPECT_EQ(prefix.exit_code, 0) << prefix.output;
  // A directory with two checkpoints: name one.
  std::filesystem::copy_file(model / "bert_model.ckpt.index", model / "other.ckpt.index");
  const auto two = test::run_polyhal("run --config " + config.string());
  EXPECT_EQ(two.exit_code, 2) << two.output;
  EXPECT_NE(
      two.output.find(": 2 TensorFlow checkpoints (bert_model.ckpt ... other.ckpt): give one as "
                      "checkpoint.init"),
      std::string::npos)
      << two.output;
}

TEST(TfCheckpoint, ConvertWritesAHuggingFaceDirectoryWithTheSameWeights) {
  test::TempDir dir;
  const auto model = google_model_directory(dir);
  const auto out = dir.path() / "converted";
  const auto run =
      test::run_polyhal("convert --input " + model.string() + " --output " + out.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("46 BERT tensors; 93 of optimizer and training state left out"),
            std::string::npos)
      << run.output;
  const auto config = read_hf_config(out / "config.json");
  EXPECT_EQ(config.hidden_size, 32);
  const auto converted = read_safetensors(out / "model.safetensors");
  const auto direct = canonical_bert_weights(read_tf_bert_weights(kGoogle));
  ASSERT_EQ(converted.size(), direct.size());
  for (const auto& [name, tensor] : direct) {
    const auto it = converted.find(name);
    ASSERT_NE(it, converted.end()) << name;
    EXPECT_EQ(it->second.values, tensor.values) << name;
  }
  EXPECT_TRUE(std::filesystem::exists(out / "vocab.txt"));
  EXPECT_TRUE(std::filesystem::exists(out / "tokenizer_config.json"));
  // Bad input: not a checkpoint; a config that does not fit the tensors.
  const auto none = test::run_polyhal("convert --input " + (dir.path() / "x").string() +
                                      " --output " + (dir.path() / "y").string());
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("not a TensorFlow checkpoint"), std::string::npos) << none.output;
  std::ofstream(model / "bert_config.json")
      << R"({"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 37, )"
      << R"("num_hidden_layers": 2, "vocab_size": 99, "max_position_embeddings": 64})";
  const auto wrong = test::run_polyhal("convert --input " + model.string() + " --output " +
                                       (dir.path() / "z").string());
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("problems with the weights"), std::string::npos) << wrong.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "z"));
}

// Google's run_squad.py keeps the pre-trained pooler beside the span head:
// convert leaves it out (BertForQuestionAnswering has none; transformers
// loads the result with no missing or unexpected keys, checked by hand as
// make_run_squad_checkpoint.py says) and carries bert_config.json's
// dropouts into config.json (issue 54, items 3 and 11).
TEST(TfCheckpoint, ConvertTakesARunSquadCheckpointWithItsPoolerAndKeepsItsDropouts) {
  test::TempDir dir;
  const auto out = dir.path() / "squad";
  const auto run = test::run_polyhal(
      "convert --input " + (kData / "run_squad/model.ckpt").string() + " --output " + out.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("the pooler (bert/pooler/dense) is left out"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("model: BertForQuestionAnswering"), std::string::npos) << run.output;
  const auto converted = read_safetensors(out / "model.safetensors");
  const auto golden = read_safetensors(std::filesystem::path(POLYHAL_SOURCE_DIR) /
                                       "tests/golden/bert_tiny/model.safetensors");
  std::size_t encoder = 0;
  for (const auto& [name, tensor] : golden) {
    if (!name.starts_with("bert.") || name.starts_with("bert.pooler.")) continue;
    ++encoder;
    ASSERT_TRUE(converted.contains(name)) << name;
    EXPECT_EQ(converted.at(name).values, tensor.values) << name;
  }
  EXPECT_EQ(converted.size(), encoder + 2) << "the encoder and qa_outputs, no pooler";
  EXPECT_EQ(converted.at("qa_outputs.bias").values, (std::vector<float>{0.25f, -0.5f}));
  const auto json = nlohmann::json::parse(std::ifstream(out / "config.json"));
  EXPECT_EQ(json["architectures"][0], "BertForQuestionAnswering");
  EXPECT_DOUBLE_EQ(json["hidden_dropout_prob"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(json["attention_probs_dropout_prob"].get<double>(), 0.15);
}

TEST(TfCheckpoint, ConvertToACheckpointKeepsTheMomentsAndPreTrainingResumesFromIt) {
  test::TempDir dir;
  const auto out = dir.path() / "ckpt";
  const auto run = test::run_polyhal("convert --input " + kGoogle.string() +
                                     " --to checkpoint --output " + out.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("93 of optimizer and training state, moments taken"), std::string::npos)
      << run.output;
  // The fixture's slots are m = w / 2 and v = w * w of each TensorFlow
  // variable: a moment laid out other than its weight shows here.
  const auto checkpoint = CheckpointStore::load(out / "checkpoint-00000007.safetensors");
  EXPECT_EQ(checkpoint.step, 7);
  EXPECT_EQ(checkpoint.metadata.at("writer"), "polyhal pretrain");
  const auto weights = canonical_bert_weights(read_tf_bert_weights(kGoogle));
  EXPECT_EQ(checkpoint.state.size(), 3 * weights.size());
  for (const auto& [name, w] : weights) {
    const auto& m = checkpoint.state.at("optimizer.m." + name);
    const auto& v = checkpoint.state.at("optimizer.v." + name);
    ASSERT_EQ(m.shape, w.shape) << name;
    ASSERT_EQ(v.shape, w.shape) << name;
    EXPECT_EQ(checkpoint.state.at(name).values, w.values) << name;
    for (std::size_t i = 0; i < w.values.size(); ++i) {
      ASSERT_EQ(m.values[i], 0.5f * w.values[i]) << name << "[" << i << "]";
      ASSERT_EQ(v.values[i], w.values[i] * w.values[i]) << name << "[" << i << "]";
    }
  }
  const auto config =
      dir.write("resume.yaml",
                fmt::format("backend: cpu\ntask: pretrain\nmodel: {{hf_config: {}, seq_len: 16}}\n"
                            "batch: {{micro: 4}}\ndata: {{source: pattern, max_predictions: 3}}\n"
                            "steps: 9\ncheckpoint: {{dir: {}, resume: true}}\n",
                            (kData / "google/bert_config.json").string(), out.string()));
  const auto resumed = test::run_polyhal("run --config " + config.string());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " +
                                (out / "checkpoint-00000007.safetensors").string() + " at step 7"),
            std::string::npos)
      << resumed.output;
  // The directory now holds checkpoints: converting into it again is refused.
  const auto again = test::run_polyhal("convert --input " + kGoogle.string() +
                                       " --to checkpoint --output " + out.string());
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("already holds checkpoint-00000009.safetensors"), std::string::npos)
      << again.output;
  const auto bad = test::run_polyhal("convert --input " + kGoogle.string() +
                                     " --to onnx --output " + (dir.path() / "x").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--to onnx: expected hf"), std::string::npos) << bad.output;
}

TEST(TfCheckpoint, ATf2ObjectBasedCheckpointReadsAsTheNameBasedOne) {
  // Keys follow the object tree (model/weights/N/.ATTRIBUTES/VARIABLE_VALUE);
  // the names come from the object graph, the slots from its slot references.
  const TfCheckpoint tf2(kData / "tf2/ckpt-1");
  EXPECT_TRUE(tf2.entries().contains("bert/encoder/layer_1/output/dense/kernel"));
  EXPECT_TRUE(tf2.entries().contains("bert/encoder/layer_1/output/dense/kernel/adam_v"));
  TfReadReport report;
  const auto weights = canonical_bert_weights(read_tf_bert_weights(kData / "tf2/ckpt-1", &report));
  const auto google = canonical_bert_weights(read_tf_bert_weights(kGoogle));
  ASSERT_EQ(weights.size(), google.size());
  for (const auto& [name, w] : google) EXPECT_EQ(weights.at(name).values, w.values) << name;
  EXPECT_NE(std::find(report.training_state.begin(), report.training_state.end(),
                      "_CHECKPOINTABLE_OBJECT_GRAPH"),
            report.training_state.end());
  const auto state = read_tf_optimizer_state(kData / "tf2/ckpt-1");
  const auto m = canonical_bert_weights(state.m), v = canonical_bert_weights(state.v);
  ASSERT_EQ(m.size(), google.size());
  for (const auto& [name, w] : google)
    for (std::size_t i = 0; i < w.values.size(); ++i) {
      ASSERT_EQ(m.at(name).values[i], 0.5f * w.values[i]) << name;
      ASSERT_EQ(v.at(name).values[i], w.values[i] * w.values[i]) << name;
    }
  EXPECT_FALSE(state.global_step.has_value());
  test::TempDir dir;
  const auto config = dir.write(
      "pretrain.yaml",
      fmt::format("backend: cpu\ntask: pretrain\nmodel: {{hf_config: {}, seq_len: 16}}\n"
                  "batch: {{micro: 4}}\ndata: {{source: pattern, max_predictions: 3}}\nsteps: 1\n"
                  "checkpoint: {{init: {}}}\n",
                  (kData / "tf2/bert_config.json").string(), (kData / "tf2").string()));
  const auto run = test::run_polyhal("run --config " + config.string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("weights: " + (kData / "tf2/ckpt-1").string()), std::string::npos)
      << run.output;
  const auto resume = test::run_polyhal("convert --input " + (kData / "tf2").string() +
                                        " --to checkpoint --output " + (dir.path() / "c").string());
  EXPECT_EQ(resume.exit_code, 2) << resume.output;
  EXPECT_NE(resume.output.find("no global_step"), std::string::npos) << resume.output;
}

TEST(TfCheckpoint, PreTrainingStartsFromATensorFlowCheckpoint) {
  test::TempDir dir;
  const auto config = dir.write(
      "pretrain.yaml",
      fmt::format("backend: cpu\ntask: pretrain\nmodel: {{hf_config: {}, seq_len: 16}}\n"
                  "batch: {{micro: 4}}\ndata: {{source: pattern, max_predictions: 3}}\nsteps: 2\n"
                  "checkpoint: {{init: {}}}\n",
                  (kData / "google/bert_config.json").string(), kGoogle.string()));
  for (const std::string backend : {"cpu", "ipu", "gaudi"}) {
    const auto run = test::run_polyhal("run --config " + config.string() + " --backend " + backend);
    EXPECT_EQ(run.exit_code, 0) << backend << ": " << run.output;
    EXPECT_NE(run.output.find("weights: " + kGoogle.string()), std::string::npos) << run.output;
  }
}

}  // namespace
}  // namespace polyhal
