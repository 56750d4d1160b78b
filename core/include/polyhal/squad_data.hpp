#pragma once
/// @file squad_data.hpp
/// SQuAD v1.1 and v2.0 in the official JSON layout: data[] articles with
/// paragraphs[] of a context and its qas[] (id, question, answers[] of text
/// and answer_start, and in v2.0 is_impossible). Offsets are in Unicode code
/// points of the context, as the official files count them (Python str).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace polyhal {

struct SquadAnswer {
  std::string text;
  std::int64_t start = 0;  ///< code point offset of the answer in its context
};

struct SquadQuestion {
  std::string id, question;
  std::vector<SquadAnswer> answers;  ///< empty for an unanswerable (v2.0) question
  bool impossible = false;
  std::size_t context = 0;  ///< index into SquadFile::contexts
};

struct SquadFile {
  std::string version;  ///< the file's "version" ("1.1", "v2.0"), empty if absent
  std::vector<std::string> contexts;
  std::vector<SquadQuestion> questions;
  /// Answers whose text is not at their answer_start in the context: counted,
  /// the first few described (file, JSON path), and left out of `answers`.
  std::int64_t misplaced_answers = 0;
  std::vector<std::string> misplaced_examples;
  /// Answerable questions all of whose answers were misplaced: left out.
  std::int64_t dropped_questions = 0;
};

/// Reads an official SQuAD JSON file. Throws ConfigError naming the file and
/// the JSON path (data[3].paragraphs[0].qas[2].id) for a malformed file, a
/// missing or mistyped key, or a duplicate question id. Files above
/// `max_bytes` (default 256 MiB, six times SQuAD v2.0's training set) are
/// refused before they are read: the parsed JSON takes several times its size.
SquadFile read_squad_json(const std::filesystem::path& file,
                          std::uintmax_t max_bytes = std::uintmax_t{256} << 20);

}  // namespace polyhal
