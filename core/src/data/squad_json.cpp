// The official SQuAD JSON files, checked key by key.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "polyhal/app/json_input.hpp"
#include "polyhal/app/squad_data.hpp"
#include "polyhal/error.hpp"
#include "util/regular_file.hpp"
#include "util/utf8.hpp"

namespace polyhal {
namespace {

/// How many misplaced answers are described in full.
constexpr std::size_t kMisplacedExamples = 5;

using json = nlohmann::json;

class Reader {
 public:
  explicit Reader(std::filesystem::path file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
    throw ConfigError(fmt::format("{}: {}: {}", file_.string(), path, problem));
  }
  const json& member(const json& object, const std::string& path, const char* key) const {
    if (!object.is_object()) fail(path, "expected an object");
    const auto it = object.find(key);
    if (it == object.end()) fail(path, fmt::format("missing key '{}'", key));
    return *it;
  }
  const json& array(const json& object, const std::string& path, const char* key) const {
    const json& value = member(object, path, key);
    if (!value.is_array()) fail(path + "." + key, "expected an array");
    return value;
  }
  std::string text(const json& object, const std::string& path, const char* key) const {
    const json& value = member(object, path, key);
    if (!value.is_string()) fail(path + "." + key, "expected a string");
    return value.get<std::string>();
  }

 private:
  std::filesystem::path file_;
};

/// The byte offset of code point `index` in UTF-8 `text`, or npos past the end.
std::size_t byte_offset(const std::string& text, std::int64_t index) {
  std::size_t byte = 0;
  for (std::int64_t k = 0; k < index; ++k) {
    if (byte >= text.size()) return std::string::npos;
    utf8::next(text, byte);
  }
  return byte;
}

}  // namespace

SquadFile read_squad_json(const std::filesystem::path& file, std::uintmax_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) throw ConfigError(fmt::format("{}: cannot read the SQuAD file", file.string()));
  if (size > max_bytes) {
    throw ConfigError(fmt::format("{}: {} bytes, more than the {} a SQuAD file may have",
                                  file.string(), size, max_bytes));
  }
  detail::refuse_special_file(file);
  std::ifstream in(file, std::ios::binary);
  json root;
  try {
    root = parse_json_input(in, file.string());
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  const Reader r(file);
  SquadFile out;
  if (root.is_object() && root.contains("version") && root["version"].is_string())
    out.version = root["version"].get<std::string>();
  const json& data = r.array(root, "$", "data");
  std::set<std::string> ids;
  for (std::size_t a = 0; a < data.size(); ++a) {
    const std::string article = fmt::format("data[{}]", a);
    const json& paragraphs = r.array(data[a], article, "paragraphs");
    for (std::size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string paragraph = fmt::format("{}.paragraphs[{}]", article, p);
      out.contexts.push_back(r.text(paragraphs[p], paragraph, "context"));
      const std::string& context = out.contexts.back();
      const json& qas = r.array(paragraphs[p], paragraph, "qas");
      for (std::size_t q = 0; q < qas.size(); ++q) {
        const std::string path = fmt::format("{}.qas[{}]", paragraph, q);
        SquadQuestion question;
        question.id = r.text(qas[q], path, "id");
        question.question = r.text(qas[q], path, "question");
        question.context = out.contexts.size() - 1;
        if (!ids.insert(question.id).second)
          r.fail(path + ".id", fmt::format("duplicate question id \"{}\"", question.id));
        if (qas[q].contains("is_impossible")) {
          if (!qas[q]["is_impossible"].is_boolean())
            r.fail(path + ".is_impossible", "expected true or false");
          question.impossible = qas[q]["is_impossible"].get<bool>();
        }
        // No "answers" at all: a question to predict, without gold answers.
        static const json no_answers = json::array();
        const json& answers =
            qas[q].contains("answers") ? r.array(qas[q], path, "answers") : no_answers;
        for (std::size_t k = 0; k < answers.size() && !question.impossible; ++k) {
          const std::string answer_path = fmt::format("{}.answers[{}]", path, k);
          SquadAnswer answer;
          answer.text = r.text(answers[k], answer_path, "text");
          const json& start = r.member(answers[k], answer_path, "answer_start");
          if (!start.is_number_integer() || start.get<std::int64_t>() < 0)
            r.fail(answer_path + ".answer_start", "expected a non-negative integer");
          answer.start = start.get<std::int64_t>();
          const std::size_t byte = byte_offset(context, answer.start);
          if (byte == std::string::npos ||
              context.compare(byte, answer.text.size(), answer.text) != 0) {
            if (out.misplaced_examples.size() < kMisplacedExamples) {
              out.misplaced_examples.push_back(
                  fmt::format("{}: {}: \"{}\" is not at offset {} of its context", file.string(),
                              answer_path, answer.text, answer.start));
            }
            ++out.misplaced_answers;
            continue;
          }
          question.answers.push_back(std::move(answer));
        }
        if (!question.impossible && !answers.empty() && question.answers.empty()) {
          ++out.dropped_questions;
          continue;
        }
        out.questions.push_back(std::move(question));
      }
    }
  }
  return out;
}

}  // namespace polyhal
