#include "packed_text_inference.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "text/text_packing.hpp"

namespace polyhal {
namespace {

/// Lines tokenized and packed at a time: memory stays bounded on a large
/// file; each chunk's last row may be partly empty.
constexpr std::size_t kLinesPerChunk = 8192;

/// Hugging Face's BertPooler on one [CLS] row: tanh(W x + b).
std::vector<float> host_pooler(std::span<const float> cls, const HostTensor& weight,
                               const HostTensor& bias) {
  std::vector<float> out = host_linear(cls, weight, bias);
  for (float& v : out) v = std::tanh(v);
  return out;
}

}  // namespace

void infer_packed_text(BertInference& bert, const PackedTextJob& job, InferenceResult& result) {
  const BertShape shape = bert.shape();
  const auto h = static_cast<std::size_t>(result.config.hidden_size);
  const auto& lines = *job.lines;
  const auto& tokenizer = *job.tokenizer;
  // A row of the last batch with no line: [CLS] [SEP] as a sequence of its
  // own, so every row keeps the block structure packed attention needs.
  const Encoding filler = tokenizer.encode("", std::nullopt, shape.seq);
  const auto began = std::chrono::steady_clock::now();
  PackedRunStats stats;
  for (std::size_t first = 0; first < lines.size(); first += kLinesPerChunk) {
    const std::size_t count = std::min(kLinesPerChunk, lines.size() - first);
    std::vector<LineTokens> tokens(count);
    for (std::size_t i = 0; i < count; ++i) {
      const auto& line = lines[first + i];
      tokens[i] = line_tokens(tokenizer.encode(line.a, line.b, shape.seq));
      result.real_tokens += static_cast<std::int64_t>(tokens[i].ids.size());
    }
    run_packed_lines(
        bert, tokens, filler,
        [&](std::size_t example, std::span<const float> hidden) {
          const LineTokens& line = tokens[example];
          const std::size_t n = line.ids.size();
          const std::size_t index = first + example;
          nlohmann::json out{{"index", index}, {"line", index + 1}};
          nlohmann::json names = nlohmann::json::array();
          for (const std::int32_t id : line.ids) names.push_back(tokenizer.token(id));
          out["tokens"] = std::move(names);
          if (job.pooler_weight)
            out["pooled"] = host_pooler(hidden.first(h), *job.pooler_weight, *job.pooler_bias);
          if (job.pooling.mode != "none")
            out["embedding"] = pool_sentence(hidden, std::vector<std::int32_t>(n, 1),
                                             result.config.hidden_size, job.pooling);
          if (job.hidden_states) {
            nlohmann::json rows = nlohmann::json::array();
            for (std::size_t t = 0; t < n; ++t)
              rows.push_back(
                  std::vector<float>(hidden.begin() + static_cast<std::ptrdiff_t>(t * h),
                                     hidden.begin() + static_cast<std::ptrdiff_t>((t + 1) * h)));
            out["last_hidden_state"] = std::move(rows);
          }
          job.write(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
          ++result.text_examples;
        },
        &stats);
  }
  result.computed_tokens += stats.computed_tokens;
  result.batch_seconds.insert(result.batch_seconds.end(), stats.batch_seconds.begin(),
                              stats.batch_seconds.end());
  result.measured_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

}  // namespace polyhal
