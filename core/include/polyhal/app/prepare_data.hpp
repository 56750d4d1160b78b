#pragma once
/// @file prepare_data.hpp
/// Pre-training data from text (`polyhal prepare-data`), as BERT's reference
/// create_pretraining_data.py makes it, written as MLPerf HDF5 part files
/// that `data.source: mlperf_hdf5` reads (and `polyhal pack` packs).
///
/// Input: text files, one sentence per line, documents separated by blank
/// lines (a file's end also ends a document). Each line is tokenized with
/// BERT's WordPiece (tokenizer.hpp); the documents are dealt round-robin to
/// `shards` output files, and each shard makes its instances from its own
/// documents with its own random stream (seed, shard), so the output depends
/// on the seed and the shard count only, never on the thread count.
///
/// Output: DIR/part-SSSSS-of-NNNNN.hdf5 with input_ids, input_mask,
/// segment_ids [rows, max_seq_len], masked_lm_positions, masked_lm_ids
/// [rows, max_predictions] (0-padded) and next_sentence_labels [rows]
/// (1 = B is a random segment), each file written to a temporary name and
/// renamed when complete.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

struct PrepareDataOptions {
  std::vector<std::filesystem::path> inputs;  ///< files, or directories (their regular files)
  std::filesystem::path vocab;                ///< BERT vocab.txt
  std::filesystem::path output;               ///< a new or empty directory
  std::int64_t max_seq_len = 128;
  std::int64_t max_predictions = 20;
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;
  std::int64_t dupe_factor = 10;  ///< passes over the documents, each masked anew
  bool whole_word_masking = false;
  bool lower_case = true;
  SpecialTokensInText special_tokens = SpecialTokensInText::split;
  std::uint64_t seed = 12345;
  std::int64_t shards = 1;  ///< output files
  int threads = 0;          ///< 0: every core
};

/// What preparation read and wrote.
struct PrepareDataReport {
  std::int64_t files = 0, bytes = 0, lines = 0;
  std::int64_t documents = 0;        ///< with at least one token
  std::int64_t empty_documents = 0;  ///< text but no token (only removed characters): left out
  std::int64_t sentences = 0;
  std::int64_t instances = 0, random_next = 0, masked_tokens = 0, real_tokens = 0;
  std::int64_t invalid_utf8 = 0;  ///< byte sequences replaced by U+FFFD (then removed)
  std::string first_invalid;      ///< "file:line" of the first, if any
  std::vector<std::filesystem::path> files_written;
  double seconds = 0;
};

/// Called with a phase ("reading", "instances", "writing"), work done and
/// work in all (bytes, or shards).
using PrepareProgress =
    std::function<void(const std::string& phase, std::int64_t done, std::int64_t total)>;

/// Throws ConfigError for bad options, an unreadable input or vocabulary
/// (naming the file), a vocabulary without [CLS], [SEP], [PAD], [UNK] or
/// [MASK], no document with text, or an output directory that holds files.
PrepareDataReport prepare_pretraining_data(const PrepareDataOptions& options,
                                           const PrepareProgress& progress = {});

}  // namespace polyhal
