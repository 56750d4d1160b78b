#include "text/pipeline_tokenizer.hpp"

#include <fmt/format.h>
#include <unicode/uchar.h>

#include <algorithm>

#include "polyhal/error.hpp"
#include "text/token_decoders.hpp"
#include "text/truncation.hpp"

namespace polyhal::text {
namespace {

constexpr std::size_t kMostAddedTokens = 1 << 16;
constexpr std::int64_t kMostTokens = std::int64_t{1} << 24;

bool flag(const nlohmann::json& json, const char* key) {
  const auto it = json.find(key);
  return it != json.end() && it->is_boolean() && it->get<bool>();
}

std::vector<AddedToken> read_added(const nlohmann::json& pipeline, const std::string& where) {
  std::vector<AddedToken> out;
  const auto it = pipeline.find("added_tokens");
  if (it == pipeline.end() || it->is_null()) return out;
  if (!it->is_array() || it->size() > kMostAddedTokens)
    throw ConfigError(
        fmt::format("{}: added_tokens: expected a list of at most {}", where, kMostAddedTokens));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& t = it->at(i);
    const auto id = t.find("id");
    const auto content = t.find("content");
    if (!t.is_object() || id == t.end() || !id->is_number_integer() ||
        id->get<std::int64_t>() < 0 || id->get<std::int64_t>() >= kMostTokens ||
        content == t.end() || !content->is_string() ||
        content->get_ref<const std::string&>().empty() ||
        content->get_ref<const std::string&>().size() > 1024)
      throw ConfigError(fmt::format(
          "{}: added_tokens[{}]: expected an id below {} and a content of 1 to 1024 bytes", where,
          i, kMostTokens));
    out.push_back({content->get<std::string>(),
                   id->get<std::int32_t>(),
                   flag(t, "single_word"),
                   flag(t, "lstrip"),
                   flag(t, "rstrip"),
                   flag(t, "normalized"),
                   flag(t, "special"),
                   i,
                   {}});
  }
  return out;
}

/// Rust regex's \w, as tokenizers' single_word test uses it.
bool is_word_char(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL) ||
         (U_GET_GC_MASK(u) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

bool is_white_space(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0;
}

/// The tokens sorted longest pattern first, and their first characters.
AddedTokenSet added_token_set(std::vector<AddedToken> tokens) {
  AddedTokenSet set;
  std::erase_if(tokens, [](const AddedToken& t) { return t.pattern.empty(); });
  std::stable_sort(tokens.begin(), tokens.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.pattern.size() > b.pattern.size();
  });
  for (const AddedToken& t : tokens) set.starts[t.pattern.front() & 0xFF] = true;
  set.tokens = std::move(tokens);
  return set;
}

struct AddedMatch {
  std::size_t start = 0, end = 0;  ///< characters, with the whitespace lstrip/rstrip take
  const AddedToken* token = nullptr;
};

/// tokenizers' AddedVocabulary::find_matches: the leftmost-longest matches
/// of `set` in `chars`; a single_word match next to a word character is
/// skipped and the scan goes on after it (as the library's match iterator
/// does); lstrip and rstrip take the whitespace beside the match.
std::vector<AddedMatch> find_added(const std::u32string& chars, const AddedTokenSet& set) {
  std::vector<AddedMatch> out;
  std::size_t done = 0, at = 0;
  while (at < chars.size()) {
    const AddedToken* match = nullptr;
    if (set.starts[chars[at] & 0xFF])
      for (const AddedToken& t : set.tokens)
        if (chars.compare(at, t.pattern.size(), t.pattern) == 0) {
          match = &t;
          break;
        }
    if (match == nullptr) {
      ++at;
      continue;
    }
    std::size_t start = at, end = at + match->pattern.size();
    if (match->single_word && ((start > 0 && is_word_char(chars[start - 1])) ||
                               (end < chars.size() && is_word_char(chars[end])))) {
      at = end;
      continue;
    }
    if (match->lstrip)
      while (start > done && is_white_space(chars[start - 1])) --start;
    if (match->rstrip)
      while (end < chars.size() && is_white_space(chars[end])) ++end;
    out.push_back({start, end, match});
    done = at = end;
  }
  return out;
}

/// `text` split at the matches of `set`: each match's id and offsets go to
/// `out`, and `on_text` takes each piece between them, in order.
template <typename OnText>
void split_on_added(NormalizedText text, const AddedTokenSet& set, SequenceTokens& out,
                    OnText&& on_text) {
  if (text.empty()) return;
  const std::vector<AddedMatch> matches =
      set.tokens.empty() ? std::vector<AddedMatch>{} : find_added(text.chars, set);
  if (matches.empty()) {
    on_text(std::move(text));
    return;
  }
  std::size_t done = 0;
  for (const AddedMatch& m : matches) {
    if (m.start > done) on_text(text.slice(done, m.start));
    out.ids.push_back(m.token->id);
    out.offsets.push_back(text.span_of(m.start, m.end));
    done = m.end;
  }
  if (done < text.size()) on_text(text.slice(done, text.size()));
}

/// tokenizers' longest-first rule (tokenizer.cpp truncate_pair, halves).
void truncate_pair(SequenceTokens& a, SequenceTokens* b, std::size_t room) {
  const std::size_t nb = b ? b->ids.size() : 0;
  if (a.ids.size() + nb <= room) return;
  const auto [keep_a, keep_b] =
      b ? longest_first_lengths(a.ids.size(), nb, room) : std::pair{room, std::size_t{0}};
  const auto cut = [](SequenceTokens& s, std::size_t n) {
    if (s.ids.size() <= n) return;
    s.ids.resize(n);
    s.offsets.resize(n);
  };
  cut(a, keep_a);
  if (b) cut(*b, keep_b);
}

/// A sequence cut to `room` tokens, and the windows past the cut.
struct Windows {
  SequenceTokens main;
  std::vector<SequenceTokens> overflow;
};

SequenceTokens part(const SequenceTokens& s, std::size_t begin, std::size_t end) {
  SequenceTokens out;
  out.ids.assign(s.ids.begin() + static_cast<std::ptrdiff_t>(begin),
                 s.ids.begin() + static_cast<std::ptrdiff_t>(end));
  out.offsets.assign(s.offsets.begin() + static_cast<std::ptrdiff_t>(begin),
                     s.offsets.begin() + static_cast<std::ptrdiff_t>(end));
  return out;
}

/// tokenizers' Encoding::truncate: windows of `room` tokens, each
/// repeating `stride` of the one before, from the right or the left end.
Windows cut(const SequenceTokens& s, std::size_t room, const Truncation& t) {
  const std::size_t n = s.ids.size();
  if (room >= n) return {s, {}};
  if (room == 0) return {SequenceTokens{}, {s}};
  if (t.stride >= room)
    throw ConfigError(fmt::format(
        "truncation: a stride of {} tokens must be below the {} tokens a window holds (the "
        "length less the special tokens)",
        t.stride, room));
  const std::size_t step = room - t.stride;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  if (t.direction == Truncation::Direction::right) {
    for (std::size_t start = 0;; start += step) {
      const std::size_t stop = std::min(start + room, n);
      ranges.emplace_back(start, stop);
      if (stop == n) break;
    }
  } else {
    for (std::size_t last = n; last > 0;) {
      const std::size_t stop = last;
      const std::size_t start = stop > room ? stop - room : 0;
      ranges.emplace_back(start, stop);
      if (start == 0) break;
      last = stop > step ? stop - step : 0;
    }
  }
  Windows out{part(s, ranges[0].first, ranges[0].second), {}};
  for (std::size_t i = 1; i < ranges.size(); ++i)
    out.overflow.push_back(part(s, ranges[i].first, ranges[i].second));
  return out;
}

}  // namespace

PipelineTokenizer::PipelineTokenizer(const nlohmann::json& pipeline,
                                     const std::filesystem::path& file,
                                     const TokenizerOptions& options)
    : source_(file.string()) {
  const auto part = [&](const char* key) {
    const auto it = pipeline.find(key);
    return it == pipeline.end() ? nlohmann::json() : *it;
  };
  const auto where = [&](const char* key) { return fmt::format("{}: {}", source_, key); };
  // BertTokenizerFast rebuilds a BertNormalizer with tokenizer_config.json's
  // do_lower_case (or data.lower_case): the options carry it.
  nlohmann::json normalizer = part("normalizer");
  if (normalizer.is_object() && normalizer.value("type", "") == "BertNormalizer" &&
      options.bert_lowercase)
    normalizer["lowercase"] = *options.bert_lowercase;
  normalizer_ = make_normalizer(normalizer, where("normalizer"));
  pre_tokenizer_ = make_pre_tokenizer(part("pre_tokenizer"), where("pre_tokenizer"));
  model_ = make_token_model(part("model"), where("model"));
  std::vector<AddedToken> added = read_added(pipeline, source_);
  tokens_ = model_->tokens();
  const std::size_t model_size = tokens_.size();
  for (const AddedToken& t : added) {
    const auto at = static_cast<std::size_t>(t.id);
    if (at >= tokens_.size()) tokens_.resize(at + 1);
    if (at < model_size && tokens_[at] != t.content)
      throw ConfigError(fmt::format("{}: added_tokens[{}]: id {} is both '{}' and '{}'", source_,
                                    t.index, t.id, tokens_[at], t.content));
    tokens_[at] = t.content;
  }
  for (std::size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i].empty())
      throw ConfigError(
          fmt::format("{}: added_tokens: no token has id {} (ids run 0 to {} without a gap)",
                      source_, i, tokens_.size() - 1));
  for (std::size_t i = 0; i < tokens_.size(); ++i)
    ids_.emplace(tokens_[i], static_cast<std::int32_t>(i));
  for (const AddedToken& t : added) ids_[t.content] = t.id;  // added tokens first, as tokenizers
  split_added_tokens(std::move(added));
  post_ = make_post_processor(part("post_processor"), where("post_processor"), tokens_.size());
  decoder_ = part("decoder");
  check_decoder(decoder_, where("decoder"));
  lower_case_ = normalizer_ ? normalizer_->lower_cases() : false;
  const auto find = [&](std::initializer_list<const char*> names, std::int32_t fallback) {
    for (const char* name : names)
      if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
    return fallback;
  };
  special_.unk = model_->unk_id() >= 0 ? model_->unk_id() : find({"[UNK]", "<unk>"}, 0);
  special_.pad = find({"[PAD]", "<pad>"}, 0);
  if (const auto pad = part("padding");
      pad.is_object() && pad.contains("pad_id") && pad.at("pad_id").is_number_integer())
    special_.pad = pad.at("pad_id").get<std::int32_t>();
  special_.cls = find({"[CLS]", "<s>"}, 0);
  special_.sep = find({"[SEP]", "</s>"}, 0);
  for (const TemplateItem& item : post_.single) {
    if (item.special_ids.empty()) continue;
    if (item.sequence < 0 && &item == &post_.single.front())
      special_.cls = item.special_ids.front();
    if (item.sequence < 0 && &item == &post_.single.back()) special_.sep = item.special_ids.back();
  }
  const std::int32_t mask = find({"[MASK]", "<mask>"}, -1);
  if (mask >= 0) special_.mask = mask;
}

void PipelineTokenizer::split_added_tokens(std::vector<AddedToken> added) {
  is_special_.assign(tokens_.size(), false);
  std::vector<AddedToken> raw, normalized;
  for (AddedToken& t : added) {
    if (t.special) is_special_[static_cast<std::size_t>(t.id)] = true;
    // tokenizers matches a normalized token as the normaliser writes it.
    NormalizedText pattern = NormalizedText::from_utf8(t.content);
    if (t.normalized && normalizer_) normalizer_->normalize(pattern);
    t.pattern = std::move(pattern.chars);
    (t.normalized ? normalized : raw).push_back(std::move(t));
  }
  raw_added_ = added_token_set(std::move(raw));
  normalized_added_ = added_token_set(std::move(normalized));
}

void PipelineTokenizer::encode_normalized(NormalizedText text, SequenceTokens& out,
                                          std::vector<std::string>* words) const {
  std::vector<NormalizedText> pieces;
  if (!text.empty()) pieces.push_back(std::move(text));
  if (pre_tokenizer_) pre_tokenizer_->split(pieces);
  std::vector<WordPiece> found;
  for (const NormalizedText& word : pieces) {
    if (words) words->push_back(word.utf8());
    found.clear();
    model_->tokenize(word.chars, found);
    for (const WordPiece& p : found) {
      out.ids.push_back(p.id);
      out.offsets.push_back(word.span_of(p.begin, p.end));
    }
  }
}

// tokenizers' AddedVocabulary::extract_and_normalize: the non-normalized
// added tokens split out of the raw text; each piece between them
// normalised, the normalized added tokens split out of it; the pre-tokenizer
// and the model on what is left.
SequenceTokens PipelineTokenizer::encode_sequence(const std::string& text) const {
  SequenceTokens out;
  split_on_added(NormalizedText::from_utf8(text), raw_added_, out, [&](NormalizedText piece) {
    if (normalizer_) normalizer_->normalize(piece);
    split_on_added(std::move(piece), normalized_added_, out,
                   [&](NormalizedText rest) { encode_normalized(std::move(rest), out, nullptr); });
  });
  return out;
}

void PipelineTokenizer::trim_offsets(SequenceTokens& s) const {
  if (!post_.trim_offsets) return;
  const auto is_space = [](char32_t c) {
    return c == 0x120 || u_isUWhiteSpace(static_cast<UChar32>(c));
  };
  for (std::size_t i = 0; i < s.ids.size(); ++i) {
    const std::u32string chars = from_utf8(token(s.ids[i]));
    std::size_t leading = 0, trailing = 0;
    while (leading < chars.size() && is_space(chars[leading])) ++leading;
    while (trailing < chars.size() && is_space(chars[chars.size() - 1 - trailing])) ++trailing;
    ByteSpan& o = s.offsets[i];
    if (leading > 0) {
      const bool first = i == 0 || o.start == 0;
      if (first && post_.add_prefix_space && leading == 1) leading = 0;
      o.start = std::min(o.start + static_cast<std::uint32_t>(leading), o.end);
    }
    if (trailing > 0 && o.end >= trailing)
      o.end = std::max(o.end - static_cast<std::uint32_t>(trailing), o.start);
  }
}

Encoding PipelineTokenizer::frame(SequenceTokens a, std::optional<SequenceTokens> b,
                                  std::int64_t max_length, bool* truncated) const {
  const std::size_t framing = post_.added(b.has_value());
  const std::size_t total = a.ids.size() + (b ? b->ids.size() : 0) + framing;
  // max_length 0: neither truncated nor padded.
  const auto limit = max_length <= 0 ? total
                                     : static_cast<std::size_t>(std::max<std::int64_t>(
                                           max_length, static_cast<std::int64_t>(framing)));
  if (truncated) *truncated = total > limit;
  truncate_pair(a, b ? &*b : nullptr, limit - framing);
  trim_offsets(a);
  if (b) trim_offsets(*b);
  Encoding e;
  const auto add = [&](std::int32_t id, std::int32_t type, std::int32_t mask, ByteSpan offset,
                       std::int32_t sequence) {
    e.tokens.push_back(token(id));
    e.input_ids.push_back(id);
    e.token_type_ids.push_back(type);
    e.attention_mask.push_back(mask);
    e.offsets.emplace_back(offset.start, offset.end);
    e.sequence_ids.push_back(sequence);
  };
  for (const TemplateItem& item : b ? post_.pair : post_.single) {
    if (item.sequence < 0) {
      for (const std::int32_t id : item.special_ids) add(id, item.type_id, 1, {}, -1);
      continue;
    }
    const SequenceTokens& s = item.sequence == 0 ? a : *b;
    for (std::size_t i = 0; i < s.ids.size(); ++i)
      add(s.ids[i], item.type_id, 1, i < s.offsets.size() ? s.offsets[i] : ByteSpan{},
          item.sequence);
  }
  while (e.input_ids.size() < limit) add(special_.pad, 0, 0, {}, -1);
  return e;
}

Encoding PipelineTokenizer::encode(const std::string& text_a,
                                   const std::optional<std::string>& text_b,
                                   std::int64_t max_length, bool* truncated) const {
  std::optional<SequenceTokens> b;
  if (text_b) b = encode_sequence(*text_b);
  return frame(encode_sequence(text_a), std::move(b), max_length, truncated);
}

Encoding PipelineTokenizer::encode_ids(std::vector<std::int32_t> a,
                                       std::optional<std::vector<std::int32_t>> b,
                                       std::int64_t max_length, bool* truncated) const {
  SequenceTokens first{std::move(a), {}};
  first.offsets.resize(first.ids.size());
  std::optional<SequenceTokens> second;
  if (b) {
    second = SequenceTokens{std::move(*b), {}};
    second->offsets.resize(second->ids.size());
  }
  return frame(std::move(first), std::move(second), max_length, truncated);
}

std::vector<std::string> PipelineTokenizer::words(const std::string& text) const {
  std::vector<std::string> out;
  NormalizedText normalized = NormalizedText::from_utf8(text);
  if (normalizer_) normalizer_->normalize(normalized);
  SequenceTokens ignored;
  encode_normalized(std::move(normalized), ignored, &out);
  return out;
}

std::vector<std::string> PipelineTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const std::int32_t i : encode_sequence(text).ids) out.push_back(token(i));
  return out;
}

std::vector<std::int32_t> PipelineTokenizer::ids(const std::string& text) const {
  return encode_sequence(text).ids;
}

std::int32_t PipelineTokenizer::id(const std::string& t) const {
  const auto it = ids_.find(t);
  return it == ids_.end() ? special_.unk : it->second;
}

const std::string& PipelineTokenizer::token(std::int32_t i) const {
  if (i < 0 || static_cast<std::size_t>(i) >= tokens_.size())
    throw RuntimeFailure(fmt::format("token id {} outside the vocabulary", i));
  return tokens_[static_cast<std::size_t>(i)];
}

bool PipelineTokenizer::continues_word(std::int32_t i) const {
  const std::string& t = token(i);
  if (!model_->continuing_prefix().empty()) return t.starts_with(model_->continuing_prefix());
  // Byte-level BPE and SentencePiece mark a word's first piece instead.
  return !(t.starts_with("\u0120") || t.starts_with("\u2581"));
}

std::string PipelineTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::vector<std::string> pieces;
  for (const std::int32_t i : ids) {
    const std::string& piece = token(i);  // checks the id
    if (!is_special_[static_cast<std::size_t>(i)]) pieces.push_back(piece);
  }
  return decode_tokens(decoder_, std::move(pieces));
}

// tokenizers' truncate_encodings, then Encoding::merge_with's order: the
// main pair, each overflow of the first with the second and with each of
// the second's overflows, then the first with each of the second's.
std::vector<Encoding> PipelineTokenizer::encode_windows(const std::string& text_a,
                                                        const std::optional<std::string>& text_b,
                                                        std::int64_t max_length,
                                                        const Truncation& truncation) const {
  SequenceTokens a = encode_sequence(text_a);
  std::optional<SequenceTokens> b;
  if (text_b) b = encode_sequence(*text_b);
  const std::size_t framing = post_.added(b.has_value());
  const std::size_t room = max_length > static_cast<std::int64_t>(framing)
                               ? static_cast<std::size_t>(max_length) - framing
                               : 0;
  const std::size_t na = a.ids.size(), nb = b ? b->ids.size() : 0;
  Windows first{a, {}}, second{b ? *b : SequenceTokens{}, {}};
  if (na + nb > room) {
    const std::size_t to_remove = na + nb - room;
    using Strategy = Truncation::Strategy;
    if (truncation.strategy == Strategy::longest_first) {
      const auto [keep_a, keep_b] =
          b ? longest_first_lengths(na, nb, room) : std::pair{room, std::size_t{0}};
      first = cut(a, keep_a, truncation);
      if (b) second = cut(*b, keep_b, truncation);
    } else {
      const bool on_second = truncation.strategy == Strategy::only_second;
      if (on_second && !b)
        throw ConfigError("truncation only_second: there is no second text to cut");
      const std::size_t length = on_second ? nb : na;
      if (length <= to_remove)
        throw ConfigError(fmt::format(
            "truncation only_{}: the {} text has {} tokens, too few to lose {}",
            on_second ? "second" : "first", on_second ? "second" : "first", length, to_remove));
      (on_second ? second : first) = cut(on_second ? *b : a, length - to_remove, truncation);
    }
  }
  const auto framed = [&](const SequenceTokens& x, const SequenceTokens* y) {
    SequenceTokens left = x;
    std::optional<SequenceTokens> right;
    if (y) right = *y;
    return frame(std::move(left), std::move(right), max_length, nullptr);
  };
  std::vector<Encoding> out{framed(first.main, b ? &second.main : nullptr)};
  for (const SequenceTokens& o : first.overflow) {
    out.push_back(framed(o, b ? &second.main : nullptr));
    for (const SequenceTokens& p : second.overflow) out.push_back(framed(o, &p));
  }
  for (const SequenceTokens& p : second.overflow) out.push_back(framed(first.main, &p));
  return out;
}

}  // namespace polyhal::text
