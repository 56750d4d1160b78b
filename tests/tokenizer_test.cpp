// WordPiece against the cases of Google BERT's tokenization_test.py, plus
// pairs, truncation and padding as run_classifier.py builds them.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "polyhal/app/wordpiece_tokenizer.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

using Tokens = std::vector<std::string>;

struct Vocab {
  test::TempDir dir;
  std::filesystem::path file;
  Vocab() {
    file = dir.write("vocab.txt",
                     "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nwant\n##want\n##ed\nwa\nun\nrunn\n##"
                     "ing\n,\nlow\nlowest\n"
                     "hello\n!\nhow\nare\nyou\n?\n\xe5\x8d\x9a\n\xe6\x8e\xa8\n");
  }
};

TEST(Tokenizer, BasicLowerCasesStripsAccentsSplitsPunctuation) {
  Vocab v;
  WordPieceTokenizer lower(v.file, true);
  EXPECT_EQ(lower.basic_tokenize(" \tHeLLo!how  \n Are yoU?  "),
            (Tokens{"hello", "!", "how", "are", "you", "?"}));
  EXPECT_EQ(lower.basic_tokenize("H\xc3\xa9llo"), (Tokens{"hello"}));
  WordPieceTokenizer cased(v.file, false);
  EXPECT_EQ(cased.basic_tokenize(" \tHeLLo!how  \n Are yoU?  "),
            (Tokens{"HeLLo", "!", "how", "Are", "yoU", "?"}));
}

TEST(Tokenizer, ChineseCharactersAreSingleTokens) {
  Vocab v;
  WordPieceTokenizer t(v.file, true);
  EXPECT_EQ(t.basic_tokenize("ah\xe5\x8d\x9a\xe6\x8e\xa8zz"),
            (Tokens{"ah", "\xe5\x8d\x9a", "\xe6\x8e\xa8", "zz"}));
}

TEST(Tokenizer, WordPieceIsGreedyLongestMatchFirst) {
  Vocab v;
  WordPieceTokenizer t(v.file, true);
  EXPECT_EQ(t.tokenize(""), Tokens{});
  EXPECT_EQ(t.tokenize("unwanted running"), (Tokens{"un", "##want", "##ed", "runn", "##ing"}));
  EXPECT_EQ(t.tokenize("unwantedX running"), (Tokens{"[UNK]", "runn", "##ing"}));
  EXPECT_EQ(t.tokenize("UNwant\xc3\xa9"
                       "d,running"),
            (Tokens{"un", "##want", "##ed", ",", "runn", "##ing"}));
  // max_input_chars_per_word is 200, as the reference's.
  std::string word;
  for (int i = 0; i < 50; ++i) word += "want";
  EXPECT_EQ(t.tokenize(word).size(), 50u);
  EXPECT_EQ(t.tokenize(word).back(), "##want");
  EXPECT_EQ(t.tokenize(word + "want"), Tokens{"[UNK]"});
}

TEST(Tokenizer, LiteralSpecialTokensAreSplitAsTheReferenceOrKeptAsHuggingFace) {
  Vocab v;
  const std::string text = "hello [MASK] you [cls]";
  WordPieceTokenizer reference(v.file, true);
  EXPECT_EQ(reference.basic_tokenize(text),
            (Tokens{"hello", "[", "mask", "]", "you", "[", "cls", "]"}));
  WordPieceTokenizer kept(v.file, true, SpecialTokensInText::keep);
  EXPECT_EQ(kept.basic_tokenize(text), (Tokens{"hello", "[MASK]", "you", "[", "cls", "]"}))
      << "only the exact special token is kept whole";
  EXPECT_EQ(kept.tokenize(text), (Tokens{"hello", "[MASK]", "you", "[UNK]", "[UNK]", "[UNK]"}));
  // Found anywhere in the raw text, as Hugging Face's tokenizers do; text
  // that only becomes "[MASK]" once cleaned is not one.
  EXPECT_EQ(kept.basic_tokenize("x[MASK].[SEP][[CLS]]"),
            (Tokens{"x", "[MASK]", ".", "[SEP]", "[", "[CLS]", "]"}));
  EXPECT_EQ(kept.basic_tokenize("[MA\u200bSK]"), (Tokens{"[", "mask", "]"}));
  EXPECT_EQ(reference.basic_tokenize("x[MASK]"), (Tokens{"x", "[", "mask", "]"}));
}

TEST(Tokenizer, LowerCasingIsPerCharacterAsHuggingFace) {
  Vocab v;
  WordPieceTokenizer t(v.file, true);
  // No final-sigma rule: "ΟΔΟΣ" is "οδοσ", not "οδος".
  EXPECT_EQ(t.basic_tokenize("ΟΔΟΣ."), (Tokens{"οδοσ", "."}));
  // Capital I with dot: "i" and a combining dot, which accent stripping removes.
  EXPECT_EQ(t.basic_tokenize("İstanbul"), (Tokens{"istanbul"}));
}

TEST(Tokenizer, TheLongestWordIsAnOption) {
  Vocab v;
  std::string word;
  for (int i = 0; i < 38; ++i) word += "want";  // 152 characters
  EXPECT_EQ(WordPieceTokenizer(v.file, true).tokenize(word).size(), 38u)
      << "Google's limit, 200 characters";
  TokenizerOptions hugging_face;
  hugging_face.max_chars_per_word = kHuggingFaceMaxCharsPerWord;
  EXPECT_EQ(WordPieceTokenizer(v.file, hugging_face).tokenize(word), Tokens{"[UNK]"});
}

TEST(Tokenizer, LineAndParagraphSeparatorsAreWhitespace) {
  Vocab v;
  WordPieceTokenizer t(v.file, true);
  EXPECT_EQ(t.tokenize("how\u2028are\u2029you"), (Tokens{"how", "are", "you"}));
  EXPECT_EQ(t.tokenize("how\u3000are"), (Tokens{"how", "are"}));  // Zs
}

TEST(Tokenizer, ControlFormatAndPrivateUseCharactersAreRemoved) {
  Vocab v;
  WordPieceTokenizer t(v.file, true);
  // Cc (U+0001, U+0085) and Cf (U+200B zero-width space, U+00AD soft hyphen) go.
  EXPECT_EQ(t.basic_tokenize("how\x01"
                             "are\u200byou\u00ad\u0085"),
            (Tokens{"howareyou"}));
  // Private use (U+E000) goes too, as in Hugging Face's tokenizers;
  // unassigned (U+0378) stays, as in BertTokenizerFast, an unknown word.
  EXPECT_EQ(t.basic_tokenize("how \ue000 are\u0378"), (Tokens{"how", "are\u0378"}));
  EXPECT_EQ(t.tokenize("how \ue000 are\u0378"), (Tokens{"how", "[UNK]"}));
}

TEST(Tokenizer, ControlCharactersAreDroppedAndWhitespaceSplits) {
  Vocab v;
  WordPieceTokenizer t(v.file, true);
  EXPECT_EQ(t.basic_tokenize("how\x01"
                             "are\xc2\xa0you"),
            (Tokens{"howare", "you"}));
}

TEST(Tokenizer, PairsGetTypesTruncationAndPadding) {
  Vocab v;
  WordPieceTokenizer t(v.file, true);
  const auto e = t.encode("hello how", std::string("are you"), 10);
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "hello", "how", "[SEP]", "are", "you", "[SEP]", "[PAD]",
                              "[PAD]", "[PAD]"}));
  EXPECT_EQ(e.token_type_ids, (std::vector<std::int32_t>{0, 0, 0, 0, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (std::vector<std::int32_t>{1, 1, 1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(e.input_ids[1], 15);
  // Longest side loses tokens first until [CLS] a [SEP] b [SEP] fits in 6.
  const auto cut = t.encode("hello how are you", std::string("low"), 6);
  EXPECT_EQ(cut.tokens, (Tokens{"[CLS]", "hello", "how", "[SEP]", "low", "[SEP]"}));
  // On a tie the second loses one (the reference's _truncate_seq_pair).
  const auto tie = t.encode("hello how", std::string("are you"), 6);
  EXPECT_EQ(tie.tokens, (Tokens{"[CLS]", "hello", "how", "[SEP]", "are", "[SEP]"}));
  const auto b_longer = t.encode("hello", std::string("how are you"), 6);
  EXPECT_EQ(b_longer.tokens, (Tokens{"[CLS]", "hello", "[SEP]", "how", "are", "[SEP]"}));
}

TEST(Tokenizer, VocabularyWithoutSpecialTokensIsRejected) {
  test::TempDir dir;
  const auto file = dir.write("vocab.txt", "a\nb\n");
  try {
    WordPieceTokenizer t(file, true);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary has no [CLS] token"), std::string::npos);
  }
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

const std::filesystem::path kTokenizerJson =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tokenizer_json";

/// Every tokenizer implementation, opened through the interface, against
/// the ids Hugging Face's tokenizers library gives for a fixed corpus
/// (tests/data/tokenizer_json/make_tokenizer_json.py wrote the reference):
/// each text alone without special tokens, and framed with its neighbour,
/// truncated longest first to 16 tokens by the tokenizer's rule (a
/// vocab.txt: Google's one at a time; a tokenizer.json: the library's).
void expect_conformance(const Tokenizer& tokenizer, const std::string& kind) {
  std::ifstream in(kTokenizerJson / "reference.jsonl");
  std::size_t texts = 0;
  std::vector<std::string> corpus;
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(nlohmann::json::parse(line));
    corpus.push_back(lines.back()["text"].get<std::string>());
  }
  ASSERT_GT(lines.size(), 50u);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto want = lines[i]["ids"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(tokenizer.ids(corpus[i]), want) << kind << ": '" << corpus[i] << "'";
    const Encoding pair = tokenizer.encode(corpus[i], corpus[(i + 1) % corpus.size()], 16);
    std::vector<std::int32_t> real;
    for (std::size_t k = 0; k < pair.input_ids.size(); ++k)
      if (pair.attention_mask[k] == 1) real.push_back(pair.input_ids[k]);
    const char* rule = tokenizer.pair_truncation() == PairTruncation::halves
                           ? "pair_with_next_16"
                           : "pair_with_next_16_one_at_a_time";
    EXPECT_EQ(real, lines[i][rule].get<std::vector<std::int32_t>>())
        << kind << ": pair of '" << corpus[i] << "'";
    ++texts;
  }
  EXPECT_EQ(texts, lines.size());
}

TEST(TokenizerConformance, WordPieceFromVocabTxtGivesTheReferenceIds) {
  TokenizerOptions options{true, SpecialTokensInText::keep, kHuggingFaceMaxCharsPerWord};
  const auto tokenizer = open_tokenizer(
      {std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/corpus/vocab.txt", options});
  expect_conformance(*tokenizer, "vocab.txt");
}

TEST(TokenizerConformance, WordPieceFromTokenizerJsonGivesTheReferenceIds) {
  TokenizerOptions options{true, SpecialTokensInText::keep, kHuggingFaceMaxCharsPerWord};
  const auto tokenizer = open_tokenizer({kTokenizerJson / "bert_uncased/tokenizer.json", options});
  EXPECT_EQ(tokenizer->vocab_size(), 85u);
  EXPECT_EQ(tokenizer->special_ids().cls, 2);
  expect_conformance(*tokenizer, "tokenizer.json");
}

TEST(TokenizerJson, MalformedVocabulariesAreRefusedNamingFileAndKey) {
  test::TempDir dir;
  const auto refused = [&](const std::string& body, const std::string& needle) {
    const auto file = dir.write("t" + std::to_string(body.size()) + ".json", body);
    try {
      open_tokenizer({file, TokenizerOptions{}});
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    }
  };
  refused(R"({"model": {"type": "WordLevel", "vocab": {"a": 0}}})",
          "WordLevel: not a model polyhal implements");
  refused(R"({"model": {"type": "BPE", "vocab": {"a": 0}}})", "merges");
  refused(R"({"model": {"type": "WordPiece", "vocab": {"[CLS]": 0, "[SEP]": 2}},
             "added_tokens": [{"id": 3, "content": "[PAD]"}]})",
          "model.vocab: token '[SEP]' has id 2: expected ids 0 to 1 each once");
  refused(R"({"model": {"type": "WordPiece", "vocab": {"[CLS]": 0, "[SEP]": 7}}})",
          "expected ids 0 to 1");
  refused(R"({"model": {"type": "WordPiece", "vocab": {"[CLS]": "x"}}})", "has id \"x\"");
  refused(R"({"model": {"type": "WordPiece", "vocab": {"[CLS]": 0, "[SEP]": 1}}})",
          "model.unk_token: [UNK] is not in the vocabulary");
  refused(R"({"model": {"type": "WordPiece", "vocab": {"[CLS]": 0, "[UNK]": 1}},
          "added_tokens": [{"id": 0, "content": "[SEP]"}]})",
          "added_tokens[0]: id 0 is both '[CLS]' and '[SEP]'");
  refused(R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0}},
          "added_tokens": [{"id": 2, "content": "[SEP]"}]})",
          "no token has id 1");
  refused(R"({"model": {"type": "WordPiece", "vocab": {"a": 16777216}}})", "has id 16777216");
}

TEST(Tokenizer, DecodeJoinsPiecesAsBertTokenizerDoes) {
  Vocab v;
  WordPieceTokenizer t(v.file, true);
  EXPECT_EQ(t.decode(t.encode("unwanted, running!", std::nullopt, 12).input_ids),
            "unwanted, running!");
}

}  // namespace
}  // namespace polyhal
