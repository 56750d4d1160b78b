#pragma once
/// @file serve_questions.hpp
/// Question answering for `polyhal serve` (`POST /v1/question-answering`):
/// a request's questions over one context become SQuAD features as the
/// evaluation makes them (windows of doc_stride over a long context), the
/// model's start and end logits of each feature become answers as the
/// evaluation's post-processing picks them (n-best over every window, each
/// token from its max-context window), with the answer's place in the
/// context in code points, as Hugging Face's question-answering pipeline
/// gives it.
#include <cstdint>
#include <string>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/squad_data.hpp"
#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

struct ServedQuestions {
  SquadFile squad;  ///< one context, the questions in request order
  SquadFeatures features;
};

/// The features of `questions` over `context` for a model reading
/// `max_tokens` tokens: questions cut at 64 tokens, windows 128 tokens
/// apart (less for a short model.seq_len). Throws ApiError (400) when
/// max_tokens leaves no room for the context, and (413) when the windows
/// over all questions would be more than `max_windows`: counted from the
/// token counts before any window is built.
ServedQuestions question_features(const std::vector<std::string>& questions,
                                  const std::string& context, const Tokenizer& tokenizer,
                                  std::int64_t max_tokens, std::int64_t max_windows);

struct ServedAnswer {
  std::string text;
  double score = 0;        ///< probability among the n-best
  std::int64_t start = 0;  ///< code point offset in the context
  std::int64_t end = 0;    ///< one past the answer's last code point
};

/// The `top_k` best answers of each question; `outputs[f]` is feature f's
/// start logits then end logits, one per real token (ServedModel::run).
std::vector<std::vector<ServedAnswer>> served_answers(
    const ServedQuestions& questions, const std::vector<std::vector<float>>& outputs,
    const Tokenizer& tokenizer, std::int64_t max_tokens, std::int64_t top_k,
    std::int64_t max_answer_length);

}  // namespace polyhal
