// The server's model: text inference's setup (inference_task.cpp) held
// open, its packed rows (packed_text_inference.hpp) run per batch, and the
// small head of each task computed per text on the host.
#include "polyhal/app/served_model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include "model/families/model_family.hpp"
#include "plan/plan_fit.hpp"
#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/serve_settings.hpp"
#include "polyhal/error.hpp"
#include "serving/model_inputs.hpp"
#include "serving/splade_head.hpp"
#include "text/packed_lines.hpp"
#include "text/text_packing.hpp"

namespace polyhal {
namespace {

ServedModel::Task served_task(const RunConfig& config, const ModelPlan& card,
                              const ServedTextOptions& options) {
  if (card.heads || card.head == "pretraining")
    throw config.error(card.heads ? "model.heads" : "model.head",
                       "the MLM and NSP heads are not served: model.head none (embeddings), "
                       "classification or question_answering");
  if (card.head == "classification") return ServedModel::Task::classification;
  if (card.head == "question_answering") return ServedModel::Task::question_answering;
  if (options.pooling == "splade") return ServedModel::Task::sparse_embeddings;
  return ServedModel::Task::embeddings;
}

TaskHead served_head(const RunConfig& config, const ModelPlan& card, ServedModel::Task task) {
  TaskHead head;
  if (task == ServedModel::Task::question_answering) {
    head.kind = TaskHead::Kind::question_answering;
  } else if (task == ServedModel::Task::classification) {
    head.kind = TaskHead::Kind::classification;
    head.num_labels = card.num_labels;
    // The label names, where the model's config.json has them.
    if (const auto& file_head = card.file_head; file_head && file_head->kind == head.kind) {
      if (file_head->num_labels != head.num_labels)
        throw config.error(
            "model.num_labels",
            fmt::format("{}, but {} has {} labels (id2label): leave the key out", head.num_labels,
                        card.config_file.string(), file_head->num_labels));
      head.labels = file_head->labels;
      head.multi_label = file_head->multi_label;
    }
    for (auto i = static_cast<std::int64_t>(head.labels.size()); i < head.num_labels; ++i)
      head.labels.push_back(fmt::format("LABEL_{}", i));
  }
  return head;
}

/// The shapes a server prepares for `largest` (batch.micro x model.seq_len)
/// when one text runs per row (inference.packed: false): one row of every
/// multiple of a sixteenth of seq_len (16 tokens at least) below half of
/// it, then every row count up to batch.micro of rows of a quarter, half
/// and whole seq_len.
std::vector<BertShape> row_shapes(const BertShape& largest) {
  std::vector<BertShape> shapes;
  const std::int64_t step = std::max<std::int64_t>(16, largest.seq / 16);
  for (std::int64_t seq = step; seq < largest.seq / 2; seq += step) shapes.push_back({1, seq});
  for (std::int64_t seq : {largest.seq / 4, largest.seq / 2, largest.seq}) {
    if (seq < 16) continue;
    // One row of a quarter is among the single rows above.
    for (std::int64_t rows = seq == largest.seq / 4 ? 2 : 1; rows <= largest.batch; ++rows)
      shapes.push_back({rows, seq});
  }
  return shapes;
}

/// The shapes a server prepares for `largest` when texts are packed: one
/// row of every multiple of a sixteenth of seq_len (16 tokens at least) up
/// to seq_len, then longer single rows up to all of `largest`'s tokens in
/// steps of 32 tokens (coarser for a very large batch.micro: 64 of them at
/// most). Packed texts restart their positions, so a row longer than the
/// model's positions is only a token count to the linears, and the
/// attention sees each text's tokens only. A batch then computes its
/// tokens rounded up to the next step, not to whole rows: the benchmark's
/// batches of 8 to 32 sentences waste 2 to 6% of their tokens, not 9 to 16%.
std::vector<BertShape> packed_shapes(const BertShape& largest) {
  std::vector<BertShape> shapes;
  const std::int64_t step = std::max<std::int64_t>(16, largest.seq / 16);
  for (std::int64_t seq = step; seq < largest.seq; seq += step) shapes.push_back({1, seq});
  const std::int64_t tokens = largest.batch * largest.seq;
  const std::int64_t long_step = std::max<std::int64_t>(32, (tokens / 64 + 15) / 16 * 16);
  for (std::int64_t seq = largest.seq; seq < tokens; seq += long_step) shapes.push_back({1, seq});
  return shapes;
}

/// The shapes a server prepares, fewest tokens first (the first that holds
/// a batch is the cheapest); the one of all `largest`'s tokens last, which
/// holds the weights (one row of them when packed). A lone sentence of 29
/// tokens (the average of tests/data/real_model/sentences.txt) computes 32.
std::vector<BertShape> served_shapes(const BertShape& largest, bool packed) {
  std::vector<BertShape> shapes = packed ? packed_shapes(largest) : row_shapes(largest);
  std::stable_sort(shapes.begin(), shapes.end(), [](const BertShape& a, const BertShape& b) {
    return a.batch * a.seq < b.batch * b.seq;
  });
  shapes.erase(std::unique(shapes.begin(), shapes.end(),
                           [](const BertShape& a, const BertShape& b) {
                             return a.batch == b.batch && a.seq == b.seq;
                           }),
               shapes.end());
  const std::int64_t tokens = largest.batch * largest.seq;
  std::erase_if(shapes, [&](const BertShape& s) { return s.batch * s.seq >= tokens; });
  shapes.push_back(packed ? BertShape{1, tokens} : largest);
  return shapes;
}

HostTensor take_tensor(TensorMap& weights, const std::string& name) {
  auto it = weights.find(name);
  if (it == weights.end())
    throw ConfigError(fmt::format("weights: missing tensor '{}' of the served head", name));
  HostTensor out = std::move(it->second);
  weights.erase(it);
  return out;
}

}  // namespace

namespace {

/// `task` when model.seq_len leaves room for a text's token after the
/// special tokens a request is framed with: [CLS] [SEP], and one more [SEP]
/// for the pairs a classifier or question answering reads.
ServedModel::Task checked_room(const RunConfig& config, const ModelPlan& card,
                               ServedModel::Task task) {
  const bool single =
      task == ServedModel::Task::embeddings || task == ServedModel::Task::sparse_embeddings;
  const std::int64_t framing = single ? 2 : 3;
  if (card.seq_len <= framing)
    throw config.error("model.seq_len",
                       fmt::format("{} leaves no room for text after the {} special tokens a "
                                   "request is framed with: serving needs at least {}",
                                   card.seq_len, framing, framing + 1));
  return task;
}

}  // namespace

struct ServedModel::Impl {
  Task task;
  TaskHead head;
  BertConfig dims;
  std::string name, description;
  BertShape shape;
  std::unique_ptr<Tokenizer> tokenizer;
  SentencePooling pooling;
  /// The model prepared for several shapes, fewest tokens first, the last
  /// batch.micro x model.seq_len, all on one copy of the weights: a batch
  /// runs on the smallest that holds its packed rows in one call, so a lone
  /// short request computes tens of tokens, not a whole batch of rows.
  std::vector<std::unique_ptr<BertInference>> berts;
  Encoding filler;
  bool normalizes = false;  // the model's own choice; run() returns unnormalised vectors
  bool packed = true;       // inference.packed false: one text per row (to measure packing)
  // The head's tensors, Hugging Face's [out, in]: pooler (and its norm, as
  // ModernBERT's head has one) and classifier, or qa_outputs.
  HostTensor pooler_weight, pooler_bias, pooler_gamma, pooler_beta, head_weight, head_bias;
  std::optional<SpladeHead> splade;  // sparse embeddings' MLM head

  Impl(Device& device, const RunConfig& config, const RunPlan& plan,
       const ServedTextOptions& options)
      : task(checked_room(config, plan.model, served_task(config, plan.model, options))),
        head(served_head(config, plan.model, task)),
        dims(plan.model.dims),
        name(plan.model.name),
        shape{config.batch.micro, plan.model.seq_len},
        tokenizer(open_text_tokenizer(plan.model)),
        pooling(task == Task::embeddings
                    ? text_pooling(options.pooling, options.normalize, plan.model)
                    : SentencePooling{}),
        filler(tokenizer->encode("", std::nullopt, shape.seq)),
        packed(options.packed) {
    const InferencePrecision& precision = inference_precision(config, plan.precision);
    for (const BertShape& each : served_shapes(shape, packed)) {
      berts.push_back(refusing_precision(config, [&] {
        return std::make_unique<BertInference>(device, dims, each, precision, false, true);
      }));
    }
    // serve.replicas loads the model that many times on this device: the
    // plan checks them all, so `serve --check` (which loads one) says
    // whether N fit.
    MemoryReport memory = berts.back()->plan_memory();
    const std::int64_t copies = serve_settings(config).replicas;
    if (copies > 1) {
      memory.device += fmt::format(" ({} replicas, serve.replicas)", copies);
      memory.required_bytes *= static_cast<std::uint64_t>(copies);
      memory.fits = memory.fits && memory.required_bytes <= memory.capacity_bytes;
    }
    require_plan_fits(memory);
    bool pooler_absent = false;
    const bool dense_encoder = task == Task::embeddings || task == Task::sparse_embeddings;
    TensorMap head_tensors;
    TensorMap weights = read_inference_weights(config, plan.model, head, !dense_encoder,
                                               &pooler_absent, &head_tensors);
    if (!dense_encoder) take_head(weights);
    if (task == Task::sparse_embeddings)
      splade.emplace(
          head_tensors, weights.at("bert.embeddings.word_embeddings.weight"), dims.layer_norm_eps,
          plan.model.model_weights.empty() ? plan.model.model_dir : plan.model.model_weights);
    berts.back()->load_weights(weights);
    for (std::size_t i = 0; i + 1 < berts.size(); ++i) berts[i]->share_weights(*berts.back());
    std::vector<std::string> shown;
    for (const auto& bert : berts)
      shown.push_back(fmt::format("{}x{}", bert->shape().batch, bert->shape().seq));
    // Packed, they run in steps of 16 and 32 tokens: the ends say enough.
    if (shown.size() > 12) {
      shown.erase(shown.begin() + 6, shown.end() - 3);
      shown.insert(shown.begin() + 6, "...");
    }
    spdlog::info("serve: the model in {} shapes (rows x tokens) on one copy of its weights: {}",
                 berts.size(), fmt::join(shown, ", "));
    normalizes = pooling.normalize;
    pooling.normalize = false;
    describe();
    if (!packed) description += "; one text per row (inference.packed: false)";
  }

  /// The head's tensors out of `weights`, and a zero pooler where the model
  /// has none (question answering): the encoder's pooler runs but is unused.
  void take_head(TensorMap& weights) {
    const auto h = dims.hidden_size;
    const auto& family = families::model_family(dims.model_type);
    if (task == Task::classification || family.qa_prediction_head()) {
      pooler_weight = take_tensor(weights, kPoolerWeight);
      pooler_bias = take_tensor(weights, kPoolerBias);
      if (family.pooler_norm()) {
        pooler_gamma = take_tensor(weights, "bert.pooler.norm.weight");
        pooler_beta = take_tensor(weights, "bert.pooler.norm.bias");
      }
      head_weight = take_tensor(weights, "classifier.weight");
      head_bias = take_tensor(weights, "classifier.bias");
    } else {
      head_weight = take_tensor(weights, "qa_outputs.weight");
      head_bias = take_tensor(weights, "qa_outputs.bias");
    }
    weights[kPoolerWeight] = {{h, h}, std::vector<float>(static_cast<std::size_t>(h * h))};
    weights[kPoolerBias] = {{h}, std::vector<float>(static_cast<std::size_t>(h))};
  }

  void describe() {
    switch (task) {
      case Task::embeddings:
        description = fmt::format("embeddings: {} pooling{}{}", pooling.mode,
                                  normalizes ? ", L2-normalised" : "",
                                  pooling.source.empty() ? "" : " (from " + pooling.source + ")");
        break;
      case Task::classification: {
        std::vector<std::string> shown(
            head.labels.begin(),
            head.labels.begin() + std::min<std::ptrdiff_t>(8, std::ssize(head.labels)));
        description = fmt::format("classification: {} label{} ({}{})", head.num_labels,
                                  head.num_labels == 1 ? "" : "s", fmt::join(shown, ", "),
                                  head.labels.size() > shown.size() ? ", ..." : "");
        break;
      }
      case Task::question_answering:
        description = "question answering: start and end logits per token";
        break;
      case Task::sparse_embeddings:
        description = fmt::format(
            "sparse embeddings (SPLADE): log(1 + relu) of the MLM logits, "
            "max over the tokens, {} dimensions",
            splade ? splade->vocab_size() : 0);
        break;
    }
  }

  /// Whether `lines` fill one call of `call`, placed as the server places
  /// them (first-fit decreasing, text_packing.hpp).
  bool one_call(std::span<const LineTokens> lines, const BertShape& call) const {
    std::vector<std::int64_t> lengths;
    for (const auto& line : lines) {
      lengths.push_back(static_cast<std::int64_t>(line.ids.size()));
      if (lengths.back() > call.seq) return false;
    }
    return pack_lines(lengths, call.seq, call.batch, packed ? call.seq : 1,
                      RowPacking::first_fit_decreasing)
               .size() == 1;
  }

  /// The model of the fewest tokens that runs `lines` in one call (the
  /// largest, in several calls, when none does).
  BertInference& smallest_holding(std::span<const LineTokens> lines) {
    for (auto& bert : berts)
      if (one_call(lines, bert->shape())) return *bert;
    return *berts.back();
  }

  /// The end of the longest run of lines from `first` that one call of the
  /// largest shape holds (at least one line: each fits a row).
  std::size_t one_call_end(const std::vector<LineTokens>& lines, std::size_t first) const {
    const BertShape largest = berts.back()->shape();
    const auto holds = [&](std::size_t end) {
      return one_call(std::span(lines).subspan(first, end - first), largest);
    };
    if (holds(lines.size())) return lines.size();
    std::size_t fits = first + 1, fails = lines.size();
    while (fails - fits > 1) {
      const std::size_t middle = fits + (fails - fits) / 2;
      (holds(middle) ? fits : fails) = middle;
    }
    return fits;
  }

  /// What the family's classifier reads of one sequence's hidden states
  /// [tokens, H]: its first token (or ModernBERT's mean of them) through the
  /// pooler (predicted_row).
  std::vector<float> classifier_input(std::span<const float> hidden, std::size_t tokens) const {
    const auto h = static_cast<std::size_t>(dims.hidden_size);
    const auto& family = families::model_family(dims.model_type);
    std::vector<float> first(hidden.begin(), hidden.begin() + static_cast<std::ptrdiff_t>(h));
    if (family.mean_pooled_classifier(dims)) {
      std::vector<double> sum(h);
      for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t c = 0; c < h; ++c) sum[c] += hidden[t * h + c];
      for (std::size_t c = 0; c < h; ++c)
        first[c] = static_cast<float>(sum[c] / static_cast<double>(tokens));
    }
    return predicted_row(first);
  }

  /// One row [H] through the pooler's dense layer and activation (BERT's
  /// tanh, DistilBERT's ReLU, ELECTRA's and ModernBERT's GELU), then
  /// ModernBERT's norm: its classifier's input, and each token's before
  /// its question-answering classifier.
  std::vector<float> predicted_row(std::span<const float> row) const {
    const auto h = static_cast<std::size_t>(dims.hidden_size);
    const auto& family = families::model_family(dims.model_type);
    std::vector<float> pooled = host_linear(row, pooler_weight, pooler_bias);
    for (float& v : pooled) {
      switch (family.pooler_activation()) {
        case Activation::tanh:
          v = std::tanh(v);
          break;
        case Activation::relu:
          v = std::max(v, 0.0f);
          break;
        case Activation::gelu:
          v = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
          break;
        case Activation::none:
          break;
      }
    }
    if (!family.pooler_norm()) return pooled;
    double mean = 0, variance = 0;
    for (const float v : pooled) mean += v;
    mean /= static_cast<double>(h);
    for (const float v : pooled) variance += (v - mean) * (v - mean);
    variance /= static_cast<double>(h);
    const double rstd = 1.0 / std::sqrt(variance + dims.layer_norm_eps);
    for (std::size_t c = 0; c < h; ++c)
      pooled[c] = static_cast<float>((pooled[c] - mean) * rstd) * pooler_gamma.values[c] +
                  pooler_beta.values[c];
    return pooled;
  }

  std::vector<float> head_outputs(std::span<const float> hidden, std::size_t tokens) const {
    const auto h = static_cast<std::size_t>(dims.hidden_size);
    switch (task) {
      case Task::embeddings:
        return pool_sentence(hidden, std::vector<std::int32_t>(tokens, 1), dims.hidden_size,
                             pooling);
      case Task::classification:
        return host_linear(classifier_input(hidden, tokens), head_weight, head_bias);
      case Task::sparse_embeddings:
        return splade->weights(hidden, tokens);
      case Task::question_answering:
        break;
    }
    const bool prediction_head = families::model_family(dims.model_type).qa_prediction_head();
    std::vector<float> out(2 * tokens);
    for (std::size_t t = 0; t < tokens; ++t) {
      const auto token = hidden.subspan(t * h, h);
      const auto both = prediction_head ? host_linear(predicted_row(token), head_weight, head_bias)
                                        : host_linear(token, head_weight, head_bias);
      out[t] = both[0];
      out[tokens + t] = both[1];
    }
    return out;
  }
};

ServedModel::ServedModel(Device& device, const RunConfig& config, const RunPlan& plan,
                         const ServedTextOptions& options)
    : impl_(std::make_unique<Impl>(device, config, plan, options)) {
  if (impl_->task == Task::embeddings && impl_->pooling.mode == "none")
    throw config.error("inference.pooling",
                       "none: an embedding server needs a sentence embedding; set mean, cls or "
                       "max (or auto with a sentence-transformers directory)");
}

ServedModel::~ServedModel() = default;

ServedModel::Text ServedModel::tokenize(const std::string& text,
                                        const std::optional<std::string>& second) const {
  std::optional<std::vector<std::int32_t>> b;
  if (second) b = text_ids(*second);
  return frame(text_ids(text), std::move(b));
}

ServedModel::Text ServedModel::tokenize_keeping_end(const std::string& text) const {
  std::vector<std::int32_t> ids = text_ids(text);
  // What the frame adds ([CLS] [SEP], <s> </s>, ...) is what an empty text gets.
  const auto framing = static_cast<std::int64_t>(frame({}).ids.size());
  const std::int64_t room = std::max<std::int64_t>(impl_->shape.seq - framing, 0);
  const bool cut = static_cast<std::int64_t>(ids.size()) > room;
  if (cut) ids.erase(ids.begin(), ids.end() - room);
  Text out = frame(std::move(ids));
  out.truncated = out.truncated || cut;
  return out;
}

std::vector<std::int32_t> ServedModel::text_ids(const std::string& text) const {
  return impl_->tokenizer->ids(text);
}

ServedModel::Text ServedModel::frame(std::vector<std::int32_t> a,
                                     std::optional<std::vector<std::int32_t>> b) const {
  Text out;
  const LineTokens tokens = line_tokens(
      impl_->tokenizer->encode_ids(std::move(a), std::move(b), impl_->shape.seq, &out.truncated));
  out.ids = tokens.ids;
  out.types = tokens.types;
  return out;
}

std::vector<std::vector<float>> ServedModel::run(const std::vector<Text>& texts, Output output) {
  auto& m = *impl_;
  std::vector<LineTokens> lines(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto n = texts[i].ids.size();
    if (n < 2 || static_cast<std::int64_t>(n) > m.shape.seq || texts[i].types.size() != n)
      throw Error(ExitCode::failure, fmt::format("serve: text {} has {} tokens", i, n));
    lines[i] = {texts[i].ids, texts[i].types};
  }
  std::vector<std::vector<float>> out(texts.size());
  // As many texts as one call of the largest shape holds, on the smallest
  // shape that holds them (one call, for most batches).
  for (std::size_t first = 0; first < lines.size();) {
    const std::size_t end = m.one_call_end(lines, first);
    const std::vector<LineTokens> part(lines.begin() + static_cast<std::ptrdiff_t>(first),
                                       lines.begin() + static_cast<std::ptrdiff_t>(end));
    run_packed_lines(
        m.smallest_holding(part), part, m.filler,
        [&](std::size_t i, std::span<const float> hidden) {
          const std::size_t tokens = part[i].ids.size();
          out[first + i] =
              output == Output::tokens
                  ? std::vector<float>(
                        hidden.begin(),
                        hidden.begin() + static_cast<std::ptrdiff_t>(
                                             tokens * static_cast<std::size_t>(m.dims.hidden_size)))
                  : m.head_outputs(hidden, tokens);
        },
        nullptr, m.packed ? 0 : 1, RowPacking::first_fit_decreasing);
    first = end;
  }
  return out;
}

ServedModel::Task ServedModel::task() const noexcept {
  return impl_->task;
}
std::int64_t ServedModel::dimensions() const noexcept {
  switch (impl_->task) {
    case Task::embeddings:
      return impl_->dims.hidden_size;
    case Task::classification:
      return impl_->head.num_labels;
    case Task::sparse_embeddings:
      return impl_->splade->vocab_size();
    case Task::question_answering:
      break;
  }
  return 2;
}
std::int64_t ServedModel::max_tokens() const noexcept {
  return impl_->shape.seq;
}
std::int64_t ServedModel::tokens_per_call() const noexcept {
  return impl_->shape.batch * impl_->shape.seq;
}
const std::string& ServedModel::model_name() const noexcept {
  return impl_->name;
}
bool ServedModel::normalizes() const noexcept {
  return impl_->normalizes;
}
const std::vector<std::string>& ServedModel::labels() const noexcept {
  return impl_->head.labels;
}
bool ServedModel::independent_labels() const noexcept {
  return impl_->head.multi_label || impl_->head.num_labels == 1;
}
const std::string& ServedModel::description() const noexcept {
  return impl_->description;
}
const Tokenizer& ServedModel::tokenizer() const noexcept {
  return *impl_->tokenizer;
}

}  // namespace polyhal
