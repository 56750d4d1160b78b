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
    out.push_back({content->get<std::string>(), id->get<std::int32_t>(), flag(t, "single_word"),
                   flag(t, "lstrip"), flag(t, "rstrip"), flag(t, "normalized"), flag(t, "special"),
                   i});
  }
  std::stable_sort(out.begin(), out.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  return out;
}

bool is_word_char(char32_t c) {
  return c == '_' || u_isalnum(static_cast<UChar32>(c)) != 0;
}

/// The character that ends before byte `at` of `text` (0 at the start).
char32_t char_before(const std::string& text, std::size_t at) {
  if (at == 0) return 0;
  std::size_t begin = at - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  const std::u32string c = from_utf8(std::string_view(text).substr(begin, at - begin));
  return c.empty() ? 0 : c.back();
}

char32_t char_at(const std::string& text, std::size_t at) {
  if (at >= text.size()) return 0;
  const std::u32string c = from_utf8(std::string_view(text).substr(at, 4));
  return c.empty() ? 0 : c.front();
}

bool is_space_byte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
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
  added_ = read_added(pipeline, source_);
  for (const AddedToken& t : added_) starts_added_[static_cast<unsigned char>(t.content[0])] = true;
  tokens_ = model_->tokens();
  const std::size_t model_size = tokens_.size();
  for (std::size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& t = added_[i];
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
  for (const AddedToken& t : added_) ids_[t.content] = t.id;  // added tokens first, as tokenizers
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

void PipelineTokenizer::encode_segment(const std::string& text, std::uint32_t base,
                                       SequenceTokens& out, std::vector<std::string>* words) const {
  NormalizedText normalized = NormalizedText::from_utf8(text, base);
  if (normalizer_) normalizer_->normalize(normalized);
  std::vector<NormalizedText> pieces;
  if (!normalized.empty()) pieces.push_back(std::move(normalized));
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

void PipelineTokenizer::split_added(const std::string& text, SequenceTokens& out) const {
  std::size_t done = 0, at = 0;
  while (at < text.size()) {
    const AddedToken* match = nullptr;
    if (starts_added_[static_cast<unsigned char>(text[at])])
      for (const AddedToken& t : added_) {
        if (text.compare(at, t.content.size(), t.content) != 0) continue;
        const std::size_t end = at + t.content.size();
        if (t.single_word &&
            (is_word_char(char_before(text, at)) || is_word_char(char_at(text, end))))
          continue;
        match = &t;
        break;
      }
    if (match == nullptr) {
      ++at;
      continue;
    }
    std::size_t start = at, end = at + match->content.size();
    if (match->lstrip)
      while (start > done && is_space_byte(text[start - 1])) --start;
    if (match->rstrip)
      while (end < text.size() && is_space_byte(text[end])) ++end;
    if (start > done)
      encode_segment(text.substr(done, start - done), static_cast<std::uint32_t>(done), out,
                     nullptr);
    out.ids.push_back(match->id);
    out.offsets.push_back({static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(end)});
    done = at = end;
  }
  if (done < text.size())
    encode_segment(text.substr(done), static_cast<std::uint32_t>(done), out, nullptr);
}

SequenceTokens PipelineTokenizer::encode_sequence(const std::string& text) const {
  SequenceTokens out;
  split_added(text, out);
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
  SequenceTokens ignored;
  encode_segment(text, 0, ignored, &out);
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
    const bool special = std::any_of(added_.begin(), added_.end(),
                                     [&](const AddedToken& t) { return t.special && t.id == i; });
    if (!special) pieces.push_back(token(i));
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
