#include "polyhal/app/inference_task.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <span>

#include "inference_section.hpp"
#include "packed_text_inference.hpp"
#include "plan/plan_fit.hpp"
#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/app/packed_data.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"
#include "serving/model_inputs.hpp"
#include "tasks/inference_precision.hpp"
#include "text/sentence_pooling.hpp"
#include "util/atomic_file.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

/// Uniform token ids, two segments, no padding: the seeds' generated data.
BertInputs generated_batch(const BertConfig& config, BertShape shape, std::mt19937_64& generator) {
  std::uniform_int_distribution<std::int32_t> token(
      0, static_cast<std::int32_t>(config.vocab_size - 1));
  BertInputs in;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    for (std::int64_t s = 0; s < shape.seq; ++s) {
      in.input_ids.push_back(token(generator));
      in.token_type_ids.push_back(s < shape.seq / 2 ? 0 : 1);
      in.attention_mask.push_back(1);
    }
  }
  return in;
}

std::vector<TextLine> read_text(const std::filesystem::path& file) {
  // Held in memory whole, about twice its size.
  detail::refuse_special_or_oversized_file(file, std::uintmax_t{1} << 30, "text file to infer");
  std::ifstream in(file);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the text file", file.string()));
  std::vector<TextLine> examples;
  // Every line is an example, an empty one too: output `index` i is line i + 1.
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto tab = line.find('\t');  // "sentence A<TAB>sentence B" makes a pair
    if (tab == std::string::npos) {
      examples.push_back({line, std::nullopt});
    } else {
      examples.push_back({line.substr(0, tab), line.substr(tab + 1)});
    }
  }
  if (examples.empty()) throw ConfigError(fmt::format("{}: no text lines", file.string()));
  return examples;
}

/// Top-k vocabulary entries of one logits row.
nlohmann::json top_tokens(const float* logits, std::int64_t vocab, const Tokenizer& tokenizer,
                          int k) {
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  for (std::int32_t i = 0; i < vocab; ++i) order[static_cast<std::size_t>(i)] = i;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](auto x, auto y) { return logits[x] > logits[y]; });
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < k; ++i) {
    const auto id = order[static_cast<std::size_t>(i)];
    out.push_back(
        {{"token",
          id < static_cast<std::int32_t>(tokenizer.vocab_size()) ? tokenizer.token(id) : "?"},
         {"logit", logits[id]}});
  }
  return out;
}

}  // namespace

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto rank =
      static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

namespace {

/// The sentence embedding `polyhal run` writes: dense pooling only (SPLADE's
/// sparse weights are served, POST /embed_sparse).
SentencePooling dense_pooling(const RunConfig& config, const ModelPlan& card) {
  const auto& section = config.section<InferenceSection>();
  if (section.pooling == "splade")
    throw config.error(
        "inference.pooling",
        "splade: sparse vocabulary weights are served (polyhal serve, POST "
        "/embed_sparse); polyhal run writes dense embeddings: auto, mean, cls or max");
  return text_pooling(section.pooling, section.normalize, card);
}

}  // namespace

namespace {

void infer_text(BertInference& bert, const RunConfig& config, const ModelPlan& card,
                const Tokenizer& tokenizer, const TaskHead& head, bool pooler_absent,
                InferenceResult& result) {
  const BertShape shape = bert.shape();
  const bool heads = card.heads;
  const auto examples = read_text(config.data.text_file);
  if (config.section<InferenceSection>().output.empty())
    throw ConfigError("inference.output: required with data.source text");
  // Beside its target and renamed when complete: an interrupted run or a
  // full disk never leaves a truncated output under the real name.
  detail::AtomicOutput out(config.section<InferenceSection>().output);
  const auto& section = config.section<InferenceSection>();
  const SentencePooling pooling = dense_pooling(config, card);
  const auto began = std::chrono::steady_clock::now();
  BertOutputs outputs;
  for (std::size_t first = 0; first < examples.size();
       first += static_cast<std::size_t>(shape.batch)) {
    BertInputs in;
    std::vector<Encoding> encodings;
    for (std::int64_t b = 0; b < shape.batch; ++b) {
      const std::size_t index = first + static_cast<std::size_t>(b);
      // The last batch is filled with empty examples whose results are dropped.
      const TextLine example =
          index < examples.size() ? examples[index] : TextLine{"", std::nullopt};
      encodings.push_back(tokenizer.encode(example.a, example.b, shape.seq));
      const auto& e = encodings.back();
      in.input_ids.insert(in.input_ids.end(), e.input_ids.begin(), e.input_ids.end());
      in.token_type_ids.insert(in.token_type_ids.end(), e.token_type_ids.begin(),
                               e.token_type_ids.end());
      in.attention_mask.insert(in.attention_mask.end(), e.attention_mask.begin(),
                               e.attention_mask.end());
      if (index < examples.size())
        result.real_tokens += std::count_if(e.attention_mask.begin(), e.attention_mask.end(),
                                            [](std::int32_t m) { return m != 0; });
    }
    result.computed_tokens += shape.batch * shape.seq;
    const auto start = std::chrono::steady_clock::now();
    bert.run(in, &outputs);
    result.batch_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    const auto h = static_cast<std::size_t>(result.config.hidden_size);
    for (std::int64_t b = 0;
         b < shape.batch && first + static_cast<std::size_t>(b) < examples.size(); ++b) {
      const auto& e = encodings[static_cast<std::size_t>(b)];
      const std::size_t index = first + static_cast<std::size_t>(b);
      nlohmann::json line{{"index", index}, {"line", index + 1}, {"tokens", e.tokens}};
      const auto slice = [b](const std::vector<float>& all, std::size_t width) {
        return std::vector<float>(
            all.begin() + static_cast<std::ptrdiff_t>(b) * static_cast<std::ptrdiff_t>(width),
            all.begin() + static_cast<std::ptrdiff_t>(b + 1) * static_cast<std::ptrdiff_t>(width));
      };
      if (!outputs.pooled.empty() && !pooler_absent) line["pooled"] = slice(outputs.pooled, h);
      const auto seq = static_cast<std::size_t>(shape.seq);
      const std::span<const float> hidden(
          outputs.last_hidden_state.data() + static_cast<std::size_t>(b) * seq * h, seq * h);
      if (pooling.mode != "none")
        line["embedding"] =
            pool_sentence(hidden, e.attention_mask, result.config.hidden_size, pooling);
      if (section.hidden_states) {
        nlohmann::json rows = nlohmann::json::array();
        for (std::size_t t = 0; t < seq; ++t)
          if (e.attention_mask[t] != 0)
            rows.push_back(
                std::vector<float>(hidden.begin() + static_cast<std::ptrdiff_t>(t * h),
                                   hidden.begin() + static_cast<std::ptrdiff_t>((t + 1) * h)));
        line["last_hidden_state"] = std::move(rows);
      }
      if (!outputs.start_logits.empty()) {
        line["start_logits"] = slice(outputs.start_logits, static_cast<std::size_t>(shape.seq));
        line["end_logits"] = slice(outputs.end_logits, static_cast<std::size_t>(shape.seq));
      }
      if (!outputs.logits.empty())
        line["logits"] = slice(outputs.logits, static_cast<std::size_t>(head.num_labels));
      if (heads) {
        line["nsp_logits"] = {outputs.nsp_logits[static_cast<std::size_t>(2 * b)],
                              outputs.nsp_logits[static_cast<std::size_t>(2 * b + 1)]};
        nlohmann::json masks = nlohmann::json::array();
        for (std::int64_t s = 0; s < shape.seq; ++s) {
          if (e.tokens[static_cast<std::size_t>(s)] != "[MASK]") continue;
          const float* row =
              outputs.mlm_logits.data() + (b * shape.seq + s) * result.config.vocab_size;
          masks.push_back(
              {{"position", s}, {"top", top_tokens(row, result.config.vocab_size, tokenizer, 5)}});
        }
        line["masked_predictions"] = masks;
      }
      out.write(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      ++result.text_examples;
    }
  }
  result.measured_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  out.commit();
}

/// Text inference without a head, on packed rows (packed_text_inference.hpp).
void infer_text_packed(BertInference& bert, const RunConfig& config, const ModelPlan& card,
                       const Tokenizer& tokenizer, const TensorMap& weights, bool pooler_absent,
                       InferenceResult& result) {
  const auto& section = config.section<InferenceSection>();
  if (section.output.empty()) throw ConfigError("inference.output: required with data.source text");
  const auto lines = read_text(config.data.text_file);
  detail::AtomicOutput out(section.output);
  PackedTextJob job;
  job.lines = &lines;
  job.tokenizer = &tokenizer;
  job.pooling = dense_pooling(config, card);
  job.hidden_states = section.hidden_states;
  if (!pooler_absent) {
    job.pooler_weight = &weights.at(kPoolerWeight);
    job.pooler_bias = &weights.at(kPoolerBias);
  }
  job.write = [&out](const std::string& text) { out.write(text); };
  infer_packed_text(bert, job, result);
  out.commit();
}

/// The benchmark: warm-up, then inference.iterations batches of generated
/// inputs, or as many as fit in inference.duration_seconds.
void time_generated_batches(BertInference& bert, const RunConfig& config, InferenceResult& result) {
  const BertShape shape = bert.shape();
  std::mt19937_64 generator(config.data.seed);
  const BertInputs in = generated_batch(result.config, shape, generator);
  for (int i = 0; i < config.section<InferenceSection>().warmup; ++i) bert.run(in, nullptr);
  // A count of batches, or (duration_seconds) as many as fit in the time.
  const auto began = std::chrono::steady_clock::now();
  const auto timed = config.section<InferenceSection>().duration_seconds > 0;
  const auto until =
      began +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(config.section<InferenceSection>().duration_seconds));
  // A word every few seconds, so a long measurement is not silence.
  constexpr auto kProgressEvery = std::chrono::seconds(5);
  auto next_word = began + kProgressEvery;
  const int iterations = config.section<InferenceSection>().iterations;
  for (int i = 0; timed ? (i == 0 || std::chrono::steady_clock::now() < until) : i < iterations;
       ++i) {
    const auto start = std::chrono::steady_clock::now();
    bert.run(in, nullptr);
    const auto end = std::chrono::steady_clock::now();
    result.batch_seconds.push_back(std::chrono::duration<double>(end - start).count());
    spdlog::debug("batch {}: {:.3f} ms", i, result.batch_seconds.back() * 1e3);
    if (end >= next_word) {
      next_word = end + kProgressEvery;
      const double elapsed = std::chrono::duration<double>(end - began).count();
      if (timed)
        spdlog::info("measuring: {:.0f} of {:g} s, {} batches so far", elapsed,
                     config.section<InferenceSection>().duration_seconds, i + 1);
      else
        spdlog::info("measuring: {} of {} batches in {:.0f} s", i + 1, iterations, elapsed);
    }
  }
  result.measured_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

}  // namespace

namespace {

/// A device model's estimated timeline of the window's batches: each a
/// forward pass of the kernels the model prices, back to back.
void trace_estimated_batches(const BertInference& bert, StepTrace& trace) {
  const auto kernels = bert.estimated_kernels();
  if (!kernels) throw RuntimeFailure("--profile: the device model gives no estimate of a batch");
  TraceTrack& track = trace.lane(0).track("inference");
  double t = 0;
  for (std::int64_t batch = trace.window().first; batch <= trace.window().last; ++batch) {
    const double begin = t;
    for (const auto& k : *kernels) {
      track.slice_at(k.name, "kernel", t, k.seconds * 1e6, k.args);
      t += k.seconds * 1e6;
    }
    track.slice_at("forward", "phase", begin, t - begin);
    track.slice_at(fmt::format("batch {}", batch), "step", begin, t - begin, {{"batch", batch}});
  }
  trace.set_metadata("estimated_batch_seconds",
                     t / 1e6 / static_cast<double>(trace.window().size()));
}

}  // namespace

InferenceResult run_inference(const TaskContext& context, bool compile_only, StepTrace* trace) {
  Device& device = context.device;
  const RunConfig& config = context.config;
  const PrecisionPlan& plan = context.plan.precision;
  InferenceResult result;
  result.config = context.plan.model.dims;
  result.model_name = context.plan.model.name;
  result.batch = config.batch.micro;
  const ModelPlan& card = context.plan.model;
  result.seq = card.seq_len;
  const BertShape shape{result.batch, result.seq};
  if (config.data.source == "mlperf_hdf5" || config.data.source == "tfrecord") {
    // Pre-training files carry no inputs this task can time or answer:
    // never fall back to generated data in their place.
    throw config.error(
        "data.source",
        fmt::format("task inference reads generated, pattern or text data, not "
                    "{} ({}{}): pre-training files are read by task pretrain",
                    config.data.source, config.data.files.string(),
                    config.data.source == "mlperf_hdf5" && is_packed_data(config.data.files)
                        ? ", packed rows"
                        : ""));
  }
  const bool text = config.data.source == "text";
  std::unique_ptr<Tokenizer> tokenizer;
  if (text) tokenizer = open_text_tokenizer(card);
  const bool heads = card.heads;
  // model.head question_answering / classification: the fine-tuned model
  // classes (the seeds' SQuAD inference benchmark).
  const bool task_head = card.head == "question_answering" || card.head == "classification";
  TaskHead head;
  if (task_head) {
    head.kind = card.head == "question_answering" ? TaskHead::Kind::question_answering
                                                  : TaskHead::Kind::classification;
    head.num_labels = head.kind == TaskHead::Kind::classification ? card.num_labels : 2;
  }
  // Text without a head runs on packed rows: no compute on padding.
  const bool packed = text && !task_head && !heads && config.section<InferenceSection>().packed;
  const InferencePrecision& precision = inference_precision(config, plan);
  BertInference bert = refusing_precision(config, [&] {
    return task_head ? BertInference(device, result.config, shape, precision, head)
                     : BertInference(device, result.config, shape, precision, heads, packed);
  });
  result.memory = bert.plan_memory();
  result.flops_per_batch = bert.flops();
  result.estimated_batch_seconds = bert.estimate_seconds();
  if (trace && trace->estimated()) trace_estimated_batches(bert, *trace);
  if (compile_only) return result;
  require_plan_fits(result.memory);

  bool pooler_absent = false;
  const TensorMap weights =
      read_inference_weights(config, card, head, task_head || heads, &pooler_absent);
  if (!config.model.save.empty()) {
    // Hugging Face layout: the directory loads with BertForPreTraining.from_pretrained.
    TensorMap saved = weights;
    if (pooler_absent)  // saved as it came: without the zeros standing in for it
      std::erase_if(saved,
                    [](const auto& entry) { return entry.first.starts_with(kPoolerPrefix); });
    export_hf_directory(config.model.save, result.config, head, saved);
    spdlog::info("saved config.json and model.safetensors to {}", config.model.save.string());
  }
  check_int8_weights(config, context.plan.precision, weights);
  bert.load_weights(weights);
  if (trace && !trace->estimated()) bert.set_trace(&trace->lane(0));
  const bool calibrate = !config.model.calibrate.empty();
  if (calibrate) {
    spdlog::info(
        "calibrating int8 scales: every batch also reads each encoder linear's input, "
        "so this run's timings are not the model's");
    bert.start_calibration();
  }
  if (text) {
    if (packed) {
      infer_text_packed(bert, config, card, *tokenizer, weights, pooler_absent, result);
    } else {
      infer_text(bert, config, card, *tokenizer, head, pooler_absent, result);
    }
  } else {
    time_generated_batches(bert, config, result);
  }
  if (calibrate) write_calibration(config, plan, bert, weights);
  result.profile = bert.profile();
  result.forward_runs = bert.runs();
  return result;
}

ServedTextOptions served_text_options(const RunConfig& config) {
  const auto& section = config.section<InferenceSection>();
  return {section.pooling, section.normalize, section.packed};
}

}  // namespace polyhal
