#pragma once
// Synthetic fine-tuning data whose answers follow from the text, shared by
// the task tests of BERT and GroupBERT.
#include <filesystem>
#include <random>
#include <string>

#include "test_support.hpp"

namespace polyhal::test {

/// Words w0..w39 of the synthetic vocabulary.
constexpr int kSyntheticWords = 40;

/// One random word w0..w39.
std::string synthetic_word(std::mt19937& rng);

/// vocab.txt in `dir`: [PAD] [UNK] [CLS] [SEP] [MASK], w0..w39 and the marker
/// and question words (52 tokens).
std::filesystem::path write_synthetic_vocab(const TempDir& dir);

/// SQuAD v1.1 JSON: random words with "key" inserted; the answer is the
/// word after it, so only reading the text finds it. Question ids are
/// `prefix` and a number.
std::string squad_json(int questions, const std::string& prefix, unsigned seed);

}  // namespace polyhal::test
