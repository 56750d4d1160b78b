#pragma once
/// @file tokenizer.hpp
/// The text layer's tokenizer interface: what every task, the server and
/// the data tools use to turn text into a model's input ids, whatever the
/// tokenizer's kind. The kinds implement it in core/src/text/ (WordPiece
/// today, from a vocab.txt or a tokenizer.json); open_tokenizer() picks one
/// from a TokenizerSpec, and nothing outside the text layer names a kind.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// One encoded example, padded to the sequence length.
struct Encoding {
  std::vector<std::string> tokens;  ///< including [CLS], [SEP], [PAD]
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> token_type_ids;
  std::vector<std::int32_t> attention_mask;
  /// Each token's [start, end) in bytes of the text it came from ({0, 0}
  /// for special tokens and padding), where the tokenizer tracks them (a
  /// tokenizer.json's pipeline); empty otherwise.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> offsets;
  /// Which text each token came from: 0, 1 (a pair's second) or -1 (a
  /// special token, padding); filled with `offsets`.
  std::vector<std::int32_t> sequence_ids;
};

/// What a literal "[MASK]", "[CLS]", "[SEP]", "[PAD]" or "[UNK]" in the
/// input text becomes. `split`: what BERT's reference tokenization.py does,
/// punctuation splitting making it "[", "mask", "]" (the data the seeds'
/// models were trained on). `keep`: one special token, as Hugging Face's
/// tokenizers do.
enum class SpecialTokensInText : std::uint8_t { split, keep };

/// Google's tokenization.py: a word of more characters is [UNK].
inline constexpr std::size_t kGoogleMaxCharsPerWord = 200;
/// Hugging Face's BertTokenizer and its tokenizer.json default.
inline constexpr std::size_t kHuggingFaceMaxCharsPerWord = 100;

/// How a pair too long for the model loses tokens, longest first.
enum class PairTruncation : std::uint8_t {
  /// One token at a time from the longer side, the second on a tie:
  /// Google's _truncate_seq_pair (run_classifier.py, run_squad.py) and
  /// transformers' slow tokenizers. A vocab.txt's rule.
  one_at_a_time,
  /// Hugging Face's tokenizers library (fast tokenizers, TEI): when both
  /// sides must be cut, the shorter keeps half the room and the longer the
  /// rest. A tokenizer.json's rule.
  halves,
};

/// How text becomes tokens, besides the vocabulary.
struct TokenizerOptions {
  bool lower_case = true;  ///< lower-case and strip accents
  SpecialTokensInText special = SpecialTokensInText::split;
  std::size_t max_chars_per_word = kGoogleMaxCharsPerWord;
  PairTruncation pair_truncation = PairTruncation::one_at_a_time;
  /// A tokenizer.json's BertNormalizer lowercase as BertTokenizerFast
  /// rebuilds it from tokenizer_config.json's do_lower_case (or
  /// data.lower_case); unset: the file's own.
  std::optional<bool> bert_lowercase = std::nullopt;
};

/// The ids a model's inputs are framed with.
struct SpecialTokenIds {
  std::int32_t cls = 0, sep = 0, pad = 0, unk = 0;
  std::optional<std::int32_t> mask;  ///< absent when the vocabulary has none
};

/// How a text or pair longer than its room is cut, as the tokenizers
/// library's TruncationParams say: which side, from which end, and with a
/// stride the windows the cut leaves over (question answering over a long
/// context: only_second with a stride).
struct Truncation {
  enum class Strategy : std::uint8_t { longest_first, only_first, only_second };
  enum class Direction : std::uint8_t { right, left };
  Strategy strategy = Strategy::longest_first;
  Direction direction = Direction::right;
  std::size_t stride = 0;  ///< tokens each window repeats of the one before
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// The text as normalisation and pre-tokenisation leave it: the words
  /// before the model splits them into pieces (SQuAD's answer alignment).
  virtual std::vector<std::string> words(const std::string& text) const = 0;
  /// Text -> the model's pieces, without special tokens.
  virtual std::vector<std::string> tokenize(const std::string& text) const = 0;
  /// Text -> ids, without special tokens.
  virtual std::vector<std::int32_t> ids(const std::string& text) const;
  virtual std::int32_t id(const std::string& token) const = 0;  ///< unk's id if unknown
  /// Throws RuntimeFailure for an id outside the vocabulary.
  virtual const std::string& token(std::int32_t id) const = 0;
  virtual std::size_t vocab_size() const noexcept = 0;
  virtual bool lower_case() const noexcept = 0;
  virtual const SpecialTokenIds& special_ids() const noexcept = 0;
  /// Whether piece `id` continues the word before it (WordPiece's "##"):
  /// whole-word masking keeps such pieces with their word.
  virtual bool continues_word(std::int32_t id) const = 0;
  /// Ids back to text as the reference decoder joins them, special tokens left out.
  virtual std::string decode(const std::vector<std::int32_t>& ids) const = 0;
  virtual PairTruncation pair_truncation() const noexcept = 0;

  /// [CLS] a [SEP] (b [SEP]) from ids without special tokens, truncating
  /// longest first by pair_truncation() to fit `max_length`, then padding
  /// with [PAD] (attention_mask 0). Sets `*truncated` when a token was cut.
  /// A tokenizer.json frames with its own post-processor's template.
  virtual Encoding encode_ids(std::vector<std::int32_t> a,
                              std::optional<std::vector<std::int32_t>> b, std::int64_t max_length,
                              bool* truncated = nullptr) const;
  /// The same from text (with offsets where the tokenizer tracks them).
  virtual Encoding encode(const std::string& text_a, const std::optional<std::string>& text_b,
                          std::int64_t max_length, bool* truncated = nullptr) const;
  /// The text or pair framed and cut to `max_length` as `truncation` says,
  /// then every window the cut leaves over (tokenizers' overflowing
  /// encodings, in its order), each padded to `max_length`. A tokenizer.json
  /// implements every strategy; a vocab.txt longest_first with no stride
  /// (Google's rule) and refuses the others with a ConfigError.
  virtual std::vector<Encoding> encode_windows(const std::string& text_a,
                                               const std::optional<std::string>& text_b,
                                               std::int64_t max_length,
                                               const Truncation& truncation) const;
};

/// Which tokenizer to open: a vocab.txt (WordPiece, with the
/// tokenizer_config.json and tokenizer.json beside it) or a tokenizer.json
/// (whose pairs then truncate as the tokenizers library does, whatever
/// options.pair_truncation says).
struct TokenizerSpec {
  std::filesystem::path file;
  TokenizerOptions options;
  /// The model's vocab_size (its embedding's rows): a tokenizer with more
  /// tokens is refused when it opens, naming the file (0: not checked).
  std::int64_t model_vocab = 0;
};

/// The tokenizer `spec` names. Throws ConfigError naming the file (and the
/// key inside it) when it cannot be read or asks for what is not implemented.
std::unique_ptr<Tokenizer> open_tokenizer(const TokenizerSpec& spec);

}  // namespace polyhal
