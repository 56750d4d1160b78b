#include "text/token_models.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <queue>
#include <tuple>

#include "polyhal/error.hpp"
#include "text/normalized_text.hpp"

namespace polyhal::text {
namespace {

// The model's vocabulary limit (docs/hardening.md).
constexpr std::int64_t kMostTokens = std::int64_t{1} << 24;
constexpr std::size_t kMostPieceChars = 256;

std::optional<std::string> optional_string(const nlohmann::json& json, const char* key,
                                           const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw ConfigError(fmt::format("{}.{}: expected a string", where, key));
  return it->get<std::string>();
}

bool flag(const nlohmann::json& json, const char* key, bool fallback, const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw ConfigError(fmt::format("{}.{}: expected true or false", where, key));
  return it->get<bool>();
}

/// vocab {token: id} as a list, every id in [0, n) once.
std::vector<std::string> vocab_object(const nlohmann::json& json, const std::string& where) {
  const auto it = json.find("vocab");
  if (it == json.end() || !it->is_object() || it->empty() ||
      static_cast<std::int64_t>(it->size()) > kMostTokens)
    throw ConfigError(fmt::format("{}.vocab: expected an object of 1 to {} token: id entries",
                                  where, kMostTokens));
  std::vector<std::string> tokens(it->size());
  std::vector<bool> placed(it->size());
  for (const auto& [token, id] : it->items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() >= static_cast<std::int64_t>(tokens.size()) ||
        placed[id.get<std::size_t>()])
      throw ConfigError(
          fmt::format("{}.vocab: token '{}' has id {}: expected ids 0 to {} each once", where,
                      token.substr(0, 40), id.dump(), tokens.size() - 1));
    tokens[id.get<std::size_t>()] = token;
    placed[id.get<std::size_t>()] = true;
  }
  return tokens;
}

class WordPieceModel final : public TokenModel {
 public:
  WordPieceModel(const nlohmann::json& json, const std::string& where) {
    tokens_ = vocab_object(json, where);
    index(where);
    prefix_ = optional_string(json, "continuing_subword_prefix", where).value_or("##");
    const std::string unk = optional_string(json, "unk_token", where).value_or("[UNK]");
    unk_ = id_of(unk);
    if (unk_ < 0)
      throw ConfigError(fmt::format("{}.unk_token: {} is not in the vocabulary", where, unk));
    if (const auto it = json.find("max_input_chars_per_word"); it != json.end()) {
      if (!it->is_number_integer() || it->get<std::int64_t>() < 1 ||
          it->get<std::int64_t>() > (1 << 20))
        throw ConfigError(
            fmt::format("{}.max_input_chars_per_word: expected 1 to {}", where, 1 << 20));
      max_chars_ = it->get<std::size_t>();
    }
  }
  void tokenize(const std::u32string& word, std::vector<WordPiece>& out) const override {
    const auto n = static_cast<std::uint32_t>(word.size());
    if (word.size() > max_chars_) {
      out.push_back({unk_, 0, n});
      return;
    }
    const std::size_t first = out.size();
    std::uint32_t start = 0;
    while (start < n) {
      std::uint32_t end = n;
      std::int32_t found = -1;
      while (start < end) {
        std::string piece = to_utf8(std::u32string_view(word).substr(start, end - start));
        if (start > 0) piece = prefix_ + piece;
        if (const std::int32_t id = id_of(piece); id >= 0) {
          found = id;
          break;
        }
        --end;
      }
      if (found < 0) {  // one unknown piece makes the whole word unknown
        out.resize(first);
        out.push_back({unk_, 0, n});
        return;
      }
      out.push_back({found, start, end});
      start = end;
    }
  }
  const std::string& continuing_prefix() const override { return prefix_; }

 private:
  std::string prefix_;
  std::size_t max_chars_ = 100;
};

class BpeModel final : public TokenModel {
 public:
  BpeModel(const nlohmann::json& json, const std::string& where) {
    tokens_ = vocab_object(json, where);
    index(where);
    prefix_ = optional_string(json, "continuing_subword_prefix", where).value_or("");
    suffix_ = optional_string(json, "end_of_word_suffix", where).value_or("");
    if (const auto unk = optional_string(json, "unk_token", where)) {
      unk_ = id_of(*unk);
      if (unk_ < 0)
        throw ConfigError(fmt::format("{}.unk_token: {} is not in the vocabulary", where, *unk));
    }
    fuse_unk_ = flag(json, "fuse_unk", false, where);
    byte_fallback_ = flag(json, "byte_fallback", false, where);
    ignore_merges_ = flag(json, "ignore_merges", false, where);
    read_merges(json, where);
  }

  void tokenize(const std::u32string& word, std::vector<WordPiece>& out) const override {
    if (word.empty()) return;
    if (ignore_merges_) {
      if (const std::int32_t whole = id_of(to_utf8(word)); whole >= 0) {
        out.push_back({whole, 0, static_cast<std::uint32_t>(word.size())});
        return;
      }
    }
    std::vector<WordPiece> symbols = initial_symbols(word);
    merge(symbols);
    out.insert(out.end(), symbols.begin(), symbols.end());
  }

 private:
  void read_merges(const nlohmann::json& json, const std::string& where) {
    const auto it = json.find("merges");
    if (it == json.end() || !it->is_array() || static_cast<std::int64_t>(it->size()) > kMostTokens)
      throw ConfigError(
          fmt::format("{}.merges: expected a list of at most {} merges", where, kMostTokens));
    for (std::size_t rank = 0; rank < it->size(); ++rank) {
      const auto& merge = it->at(rank);
      std::string a, b;
      if (merge.is_string()) {
        const std::string& text = merge.get_ref<const std::string&>();
        const auto space = text.find(' ', 1);
        if (space == std::string::npos) bad_merge(where, rank);
        a = text.substr(0, space);
        b = text.substr(space + 1);
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
                 merge[1].is_string()) {
        a = merge[0].get<std::string>();
        b = merge[1].get<std::string>();
      } else {
        bad_merge(where, rank);
      }
      const std::string joined =
          a + (!prefix_.empty() && b.starts_with(prefix_) ? b.substr(prefix_.size()) : b);
      const std::int32_t ia = id_of(a), ib = id_of(b), joined_id = id_of(joined);
      if (ia < 0 || ib < 0 || joined_id < 0)
        throw ConfigError(
            fmt::format("{}.merges[{}]: '{}' + '{}' merges tokens the vocabulary does not hold",
                        where, rank, a.substr(0, 40), b.substr(0, 40)));
      // The first of repeated merges ranks (as a map keeps its first entry).
      merges_.emplace(key(ia, ib), std::make_pair(static_cast<std::uint32_t>(rank), joined_id));
    }
  }
  [[noreturn]] static void bad_merge(const std::string& where, std::size_t rank) {
    throw ConfigError(
        fmt::format("{}.merges[{}]: expected \"a b\" or [\"a\", \"b\"]", where, rank));
  }
  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }

  /// One symbol per character (its prefix and suffix added), unknown
  /// characters as their bytes (byte_fallback) or the unknown token.
  std::vector<WordPiece> initial_symbols(const std::u32string& word) const {
    std::vector<WordPiece> symbols;
    const auto n = static_cast<std::uint32_t>(word.size());
    for (std::uint32_t i = 0; i < n; ++i) {
      std::string piece;
      append_utf8(word[i], piece);
      const std::string bytes = piece;
      if (i > 0) piece = prefix_ + piece;
      if (i + 1 == n) piece += suffix_;
      if (const std::int32_t id = id_of(piece); id >= 0) {
        symbols.push_back({id, i, i + 1});
        continue;
      }
      if (byte_fallback_) {
        if (const auto ids = byte_pieces(bytes)) {
          for (const std::int32_t id : *ids) symbols.push_back({id, i, i + 1});
          continue;
        }
      }
      if (unk_ < 0) continue;  // no unknown token: the character is dropped
      if (fuse_unk_ && !symbols.empty() && symbols.back().id == unk_) {
        symbols.back().end = i + 1;
      } else {
        symbols.push_back({unk_, i, i + 1});
      }
    }
    return symbols;
  }

  /// Applies the merges, the lowest rank first (the leftmost on a tie), in
  /// O(n log n): symbols form a linked list, candidate pairs a heap whose
  /// stale entries are skipped.
  void merge(std::vector<WordPiece>& symbols) const {
    const std::size_t n = symbols.size();
    if (n < 2) return;
    std::vector<std::int64_t> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (std::size_t i = 0; i < n; ++i) {
      prev[i] = static_cast<std::int64_t>(i) - 1;
      next[i] = i + 1 < n ? static_cast<std::int64_t>(i + 1) : -1;
    }
    using Candidate = std::tuple<std::uint32_t, std::size_t, std::int32_t, std::int32_t>;
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    const auto push = [&](std::size_t left) {
      if (next[left] < 0) return;
      const auto right = static_cast<std::size_t>(next[left]);
      const auto it = merges_.find(key(symbols[left].id, symbols[right].id));
      if (it != merges_.end())
        heap.emplace(it->second.first, left, symbols[left].id, symbols[right].id);
    };
    for (std::size_t i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const auto [rank, left, left_id, right_id] = heap.top();
      heap.pop();
      if (!alive[left] || next[left] < 0) continue;
      const auto right = static_cast<std::size_t>(next[left]);
      if (symbols[left].id != left_id || symbols[right].id != right_id) continue;
      symbols[left].id = merges_.at(key(left_id, right_id)).second;
      symbols[left].end = symbols[right].end;
      alive[right] = false;
      next[left] = next[right];
      if (next[right] >= 0)
        prev[static_cast<std::size_t>(next[right])] = static_cast<std::int64_t>(left);
      if (prev[left] >= 0) push(static_cast<std::size_t>(prev[left]));
      push(left);
    }
    std::vector<WordPiece> merged;
    for (std::int64_t i = 0; i >= 0; i = next[static_cast<std::size_t>(i)])
      merged.push_back(symbols[static_cast<std::size_t>(i)]);
    symbols = std::move(merged);
  }

  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::int32_t>> merges_;
};

class UnigramModel final : public TokenModel {
 public:
  UnigramModel(const nlohmann::json& json, const std::string& where) {
    const auto it = json.find("vocab");
    if (it == json.end() || !it->is_array() || it->empty() ||
        static_cast<std::int64_t>(it->size()) > kMostTokens)
      throw ConfigError(fmt::format("{}.vocab: expected a list of 1 to {} [piece, score] pairs",
                                    where, kMostTokens));
    scores_.reserve(it->size());
    for (std::size_t i = 0; i < it->size(); ++i) {
      const auto& entry = it->at(i);
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
        throw ConfigError(fmt::format("{}.vocab[{}]: expected [piece, score]", where, i));
      tokens_.push_back(entry[0].get<std::string>());
      scores_.push_back(entry[1].get<double>());
      longest_ = std::max(longest_, from_utf8(tokens_.back()).size());
    }
    longest_ = std::min(longest_, kMostPieceChars);
    index(where);
    if (const auto unk = json.find("unk_id"); unk != json.end() && !unk->is_null()) {
      if (!unk->is_number_integer() || unk->get<std::int64_t>() < 0 ||
          unk->get<std::int64_t>() >= static_cast<std::int64_t>(tokens_.size()))
        throw ConfigError(fmt::format("{}.unk_id: expected an id of the vocabulary", where));
      unk_ = unk->get<std::int32_t>();
    }
    byte_fallback_ = flag(json, "byte_fallback", false, where);
    min_score_ = *std::min_element(scores_.begin(), scores_.end());
  }

  void tokenize(const std::u32string& word, std::vector<WordPiece>& out) const override {
    const std::size_t n = word.size();
    if (n == 0) return;
    struct Best {
      double score = 0.0;
      std::int64_t from = -1;
      std::int32_t id = -1;
    };
    std::vector<Best> best(n + 1);
    best[0].from = 0;
    const double unk_score = min_score_ - 10.0;
    std::string piece;
    for (std::size_t start = 0; start < n; ++start) {
      if (best[start].from < 0) continue;
      const double here = best[start].score;
      bool single = false;
      piece.clear();
      for (std::size_t length = 1; length <= longest_ && start + length <= n; ++length) {
        append_utf8(word[start + length - 1], piece);
        const std::int32_t id = id_of(piece);
        if (id < 0) continue;
        const double candidate = here + scores_[static_cast<std::size_t>(id)];
        Best& target = best[start + length];
        if (target.from < 0 || target.score < candidate)
          target = {candidate, static_cast<std::int64_t>(start), id};
        if (length == 1) single = true;
      }
      if (!single) {
        const double candidate = here + unk_score;
        Best& target = best[start + 1];
        if (target.from < 0 || target.score < candidate)
          target = {candidate, static_cast<std::int64_t>(start), unk_};
      }
    }
    std::vector<WordPiece> path;
    for (std::size_t end = n; end > 0;) {
      const auto from = static_cast<std::size_t>(best[end].from);
      path.push_back(
          {best[end].id, static_cast<std::uint32_t>(from), static_cast<std::uint32_t>(end)});
      end = from;
    }
    std::reverse(path.begin(), path.end());
    emit(word, path, out);
  }

 private:
  // Unknown pieces side by side become one (tokenizers' fuse_unk), or with
  // byte_fallback their bytes' <0xXX> pieces.
  void emit(const std::u32string& word, const std::vector<WordPiece>& path,
            std::vector<WordPiece>& out) const {
    const std::size_t first = out.size();
    for (const WordPiece& p : path) {
      const bool unknown = p.id == unk_ || p.id < 0;
      if (unknown && byte_fallback_) {
        if (const auto ids =
                byte_pieces(to_utf8(std::u32string_view(word).substr(p.begin, p.end - p.begin)))) {
          for (const std::int32_t id : *ids) out.push_back({id, p.begin, p.end});
          continue;
        }
      }
      if (unknown && out.size() > first && out.back().id == unk_ && out.back().end == p.begin) {
        out.back().end = p.end;
        continue;
      }
      out.push_back({unknown ? unk_ : p.id, p.begin, p.end});
    }
  }
  std::vector<double> scores_;
  double min_score_ = 0.0;
  std::size_t longest_ = 1;
  bool byte_fallback_ = false;
};

}  // namespace

std::int32_t TokenModel::id_of(const std::string& token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

std::optional<std::vector<std::int32_t>> TokenModel::byte_pieces(const std::string& bytes) const {
  std::vector<std::int32_t> ids;
  for (const char b : bytes) {
    const std::int32_t id = id_of(fmt::format("<0x{:02X}>", static_cast<unsigned char>(b)));
    if (id < 0) return std::nullopt;
    ids.push_back(id);
  }
  return ids;
}

const std::string& TokenModel::continuing_prefix() const {
  static const std::string none;
  return none;
}

void TokenModel::index(const std::string& where) {
  if (static_cast<std::int64_t>(tokens_.size()) > kMostTokens)
    throw ConfigError(fmt::format("{}: {} tokens, more than the {} a model holds", where,
                                  tokens_.size(), kMostTokens));
  ids_.reserve(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i)
    ids_.emplace(tokens_[i], static_cast<std::int32_t>(i));  // a repeated token: the first id
}

std::unique_ptr<TokenModel> make_token_model(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object())
    throw ConfigError(fmt::format("{}: expected the tokenizer's model object", where));
  const auto type = json.find("type");
  const std::string kind = type != json.end() && type->is_string() ? type->get<std::string>()
                           : json.contains("merges")               ? "BPE"
                           : json.contains("unk_id")               ? "Unigram"
                                                                   : "WordPiece";
  if (kind == "WordPiece") return std::make_unique<WordPieceModel>(json, where);
  if (kind == "BPE") return std::make_unique<BpeModel>(json, where);
  if (kind == "Unigram") return std::make_unique<UnigramModel>(json, where);
  throw ConfigError(fmt::format(
      "{}.type: {}: not a model polyhal implements (WordPiece, BPE, Unigram)", where, kind));
}

}  // namespace polyhal::text
