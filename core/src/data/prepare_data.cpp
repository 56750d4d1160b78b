// `polyhal prepare-data` (prepare_data.hpp): text -> documents of token ids
// through a oneTBB pipeline (read chunks of lines in order, tokenize them in
// parallel, gather documents in order), then each shard's instances in
// parallel, then the part files.
#include "polyhal/app/prepare_data.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>
#include <unicode/uchar.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>

#include "data/hdf5_writer.hpp"
#include "data/pretraining_instances.hpp"
#include "polyhal/error.hpp"
#include "util/regular_file.hpp"
#include "util/utf8.hpp"

namespace polyhal {
namespace {

using detail::Document;
using detail::Instance;

constexpr std::size_t kLinesPerChunk = 2048;

void check_options(const PrepareDataOptions& o) {
  const auto fail = [](const std::string& option, const std::string& why) {
    throw ConfigError(fmt::format("{}: {}", option, why));
  };
  if (o.inputs.empty()) fail("--input", "give at least one text file or directory");
  if (o.vocab.empty()) fail("--vocab", "required: the BERT vocab.txt to tokenize with");
  if (o.output.empty()) fail("--output", "required: a new or empty directory");
  if (o.max_seq_len < 5 || o.max_seq_len > 65536)
    fail("--max-seq-len", fmt::format("expected 5..65536, got {}", o.max_seq_len));
  if (o.max_predictions < 1 || o.max_predictions > o.max_seq_len)
    fail("--max-predictions", fmt::format("expected 1..{} (the sequence length), got {}",
                                          o.max_seq_len, o.max_predictions));
  if (!(o.masked_lm_prob > 0.0 && o.masked_lm_prob < 1.0))
    fail("--masked-lm-prob", fmt::format("expected a share in (0, 1), got {}", o.masked_lm_prob));
  if (!(o.short_seq_prob >= 0.0 && o.short_seq_prob <= 1.0))
    fail("--short-seq-prob", fmt::format("expected a share in [0, 1], got {}", o.short_seq_prob));
  if (o.dupe_factor < 1 || o.dupe_factor > 1000)
    fail("--dupe-factor", fmt::format("expected 1..1000, got {}", o.dupe_factor));
  if (o.shards < 1 || o.shards > 100000)
    fail("--shards", fmt::format("expected 1..100000, got {}", o.shards));
  if (o.threads < 0)
    fail("--threads", fmt::format("expected 0 (every core) or more, got {}", o.threads));
}

/// The input files, directories expanded to their regular files by name.
std::vector<std::filesystem::path> input_files(const std::vector<std::filesystem::path>& inputs) {
  std::vector<std::filesystem::path> files;
  for (const auto& input : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(input, ec)) {
      std::vector<std::filesystem::path> inside;
      for (const auto& entry : std::filesystem::directory_iterator(input, ec)) {
        std::error_code entry_ec;
        const bool regular = entry.is_regular_file(entry_ec);
        if (entry_ec && entry_ec.value() == ELOOP)
          throw ConfigError(
              fmt::format("{}: --input: a loop of symbolic links (each names the "
                          "next)",
                          entry.path().string()));
        if (regular) inside.push_back(entry.path());
      }
      std::sort(inside.begin(), inside.end());
      if (inside.empty())
        throw ConfigError(fmt::format("{}: --input directory holds no file", input.string()));
      files.insert(files.end(), inside.begin(), inside.end());
    } else if (std::filesystem::is_regular_file(input, ec)) {
      files.push_back(input);
    } else if (ec.value() == ELOOP) {
      throw ConfigError(fmt::format("{}: --input: a loop of symbolic links (each names the next)",
                                    input.string()));
    } else if (std::filesystem::exists(input, ec)) {
      // /dev/zero, a FIFO: text read from them never ends.
      throw ConfigError(fmt::format(
          "{}: --input is a device, FIFO or socket: give text files or a directory of them",
          input.string()));
    } else {
      throw ConfigError(fmt::format("{}: --input: no such file or directory", input.string()));
    }
  }
  return files;
}

/// Refuses an output directory that holds anything: part files of another
/// run would mix with these.
void check_output(const std::filesystem::path& output) {
  std::error_code ec;
  if (!std::filesystem::exists(output, ec)) return;
  if (!std::filesystem::is_directory(output, ec))
    throw ConfigError(fmt::format("{}: --output exists and is not a directory", output.string()));
  for (const auto& entry : std::filesystem::directory_iterator(output, ec)) {
    throw ConfigError(fmt::format(
        "{}: --output already holds {}: choose a new or empty directory, so files of two runs "
        "never mix",
        output.string(), entry.path().filename().string()));
  }
}

/// Lines of one file, in order.
struct Chunk {
  std::size_t file = 0;
  std::int64_t first_line = 0;  // 1-based
  std::int64_t bytes = 0;
  bool file_start = false;
  std::vector<std::string> lines;
  // Filled by the tokenizing stage:
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<bool> blank;
  std::int64_t invalid = 0, first_invalid_line = 0;
};

/// Python's str.strip() leaves nothing: every code point is whitespace.
bool blank(const std::string& line) {
  for (std::size_t i = 0; i < line.size();) {
    const char32_t c = utf8::next(line, i);
    if (!u_isUWhiteSpace(static_cast<UChar32>(c)) && !(c >= 0x1C && c <= 0x1F)) return false;
  }
  return true;
}

/// Reads chunks of lines from the files in order.
class ChunkReader {
 public:
  explicit ChunkReader(const std::vector<std::filesystem::path>& files) : files_(files) {}
  std::unique_ptr<Chunk> next() {
    while (current_ < files_.size()) {
      if (!in_) {
        detail::refuse_special_file(files_[current_]);
        in_.emplace(files_[current_], std::ios::binary);
        if (!*in_)
          throw ConfigError(fmt::format("{}: cannot read (--input)", files_[current_].string()));
        line_ = 0;
        starting_ = true;
      }
      auto chunk = std::make_unique<Chunk>();
      chunk->file = current_;
      chunk->first_line = line_ + 1;
      chunk->file_start = std::exchange(starting_, false);
      for (std::string line; chunk->lines.size() < kLinesPerChunk && std::getline(*in_, line);) {
        chunk->bytes += static_cast<std::int64_t>(line.size()) + 1;
        chunk->lines.push_back(std::move(line));
        ++line_;
      }
      if (in_->bad())
        throw ConfigError(fmt::format("{}:{}: read error", files_[current_].string(), line_ + 1));
      if (chunk->lines.size() < kLinesPerChunk) {  // the file's end
        in_.reset();
        ++current_;
      }
      if (!chunk->lines.empty() || chunk->file_start) return chunk;
    }
    return nullptr;
  }

 private:
  const std::vector<std::filesystem::path>& files_;
  std::size_t current_ = 0;
  std::optional<std::ifstream> in_;
  std::int64_t line_ = 0;
  bool starting_ = true;
};

/// Tokens of each line, and which lines are blank; invalid UTF-8 repaired.
void tokenize_chunk(Chunk& chunk, const Tokenizer& tokenizer) {
  chunk.ids.resize(chunk.lines.size());
  chunk.blank.resize(chunk.lines.size());
  for (std::size_t l = 0; l < chunk.lines.size(); ++l) {
    std::string& line = chunk.lines[l];
    if (const std::size_t bad = utf8::repair(line); bad > 0) {
      if (chunk.invalid == 0)
        chunk.first_invalid_line = chunk.first_line + static_cast<std::int64_t>(l);
      chunk.invalid += static_cast<std::int64_t>(bad);
    }
    chunk.blank[l] = blank(line);
    if (chunk.blank[l]) continue;
    for (const auto& token : tokenizer.tokenize(line)) chunk.ids[l].push_back(tokenizer.id(token));
    line.clear();
    line.shrink_to_fit();
  }
}

/// One shard's instances as an MLPerf HDF5 file.
void write_part(const std::filesystem::path& path, const std::vector<Instance>& instances,
                std::int64_t seq, std::int64_t predictions) {
  const auto n = static_cast<std::int64_t>(instances.size());
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n * seq), 0), mask(ids.size(), 0),
      segments(ids.size(), 0);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(n * predictions), 0),
      labels(positions.size(), 0), next(static_cast<std::size_t>(n), 0);
  for (std::int64_t r = 0; r < n; ++r) {
    const Instance& instance = instances[static_cast<std::size_t>(r)];
    const auto row = static_cast<std::size_t>(r * seq);
    for (std::size_t t = 0; t < instance.tokens.size(); ++t) {
      ids[row + t] = instance.tokens[t];
      mask[row + t] = 1;
      segments[row + t] = static_cast<std::int64_t>(t) >= instance.segment_a ? 1 : 0;
    }
    const auto lm = static_cast<std::size_t>(r * predictions);
    for (std::size_t k = 0; k < instance.masked_positions.size(); ++k) {
      positions[lm + k] = instance.masked_positions[k];
      labels[lm + k] = instance.masked_labels[k];
    }
    next[static_cast<std::size_t>(r)] = instance.random_next ? 1 : 0;
  }
  detail::Hdf5Writer file(path);
  file.dataset("input_ids", n, seq, detail::Hdf5Stored::i32, ids.data());
  file.dataset("input_mask", n, seq, detail::Hdf5Stored::i8, mask.data());
  file.dataset("segment_ids", n, seq, detail::Hdf5Stored::i8, segments.data());
  file.dataset("masked_lm_positions", n, predictions, detail::Hdf5Stored::i32, positions.data());
  file.dataset("masked_lm_ids", n, predictions, detail::Hdf5Stored::i32, labels.data());
  file.dataset("next_sentence_labels", n, 0, detail::Hdf5Stored::i8, next.data());
  file.commit();
}

/// Masking and sequence settings with the vocabulary's special token ids.
detail::InstanceSettings instance_settings(const PrepareDataOptions& options,
                                           const Tokenizer& tokenizer) {
  detail::InstanceSettings settings;
  settings.max_seq_len = options.max_seq_len;
  settings.max_predictions = options.max_predictions;
  settings.masked_lm_prob = options.masked_lm_prob;
  settings.short_seq_prob = options.short_seq_prob;
  settings.whole_word_masking = options.whole_word_masking;
  settings.cls = tokenizer.special_ids().cls;
  settings.sep = tokenizer.special_ids().sep;
  settings.mask = tokenizer.special_ids().mask.value_or(tokenizer.special_ids().unk);
  settings.vocab_size = static_cast<std::int32_t>(tokenizer.vocab_size());
  settings.continuation.resize(tokenizer.vocab_size());
  for (std::size_t id = 0; id < tokenizer.vocab_size(); ++id)
    settings.continuation[id] = tokenizer.continues_word(static_cast<std::int32_t>(id));

  return settings;
}

/// Every file's documents (blank lines end them), tokenized in parallel in
/// chunks and kept in file order; counts lines, sentences and bytes.
std::vector<Document> read_documents(const std::vector<std::filesystem::path>& files,
                                     const Tokenizer& tokenizer, tbb::task_arena& arena,
                                     std::int64_t total_bytes, const PrepareProgress& progress,
                                     PrepareDataReport& report) {
  std::vector<Document> documents;
  arena.execute([&] {
    ChunkReader reader(files);
    Document current;
    bool text_in_current = false;  // a line that was not blank, tokens or not
    const auto end_document = [&] {
      if (!current.empty()) {
        documents.push_back(std::move(current));
      } else if (text_in_current) {
        ++report.empty_documents;  // only characters the tokenizer removes
      }
      current = {};
      text_in_current = false;
    };
    tbb::parallel_pipeline(
        static_cast<std::size_t>(2 * std::max(1, arena.max_concurrency())),
        tbb::make_filter<void, Chunk*>(tbb::filter_mode::serial_in_order,
                                       [&](tbb::flow_control& control) -> Chunk* {
                                         auto chunk = reader.next();
                                         if (!chunk) control.stop();
                                         return chunk.release();
                                       }) &
            tbb::make_filter<Chunk*, Chunk*>(tbb::filter_mode::parallel,
                                             [&](Chunk* chunk) {
                                               tokenize_chunk(*chunk, tokenizer);
                                               return chunk;
                                             }) &
            tbb::make_filter<Chunk*, void>(tbb::filter_mode::serial_in_order, [&](Chunk* raw) {
              const std::unique_ptr<Chunk> chunk(raw);
              // A file's end ends its last document too.
              if (chunk->file_start) end_document();
              for (std::size_t l = 0; l < chunk->lines.size(); ++l) {
                if (chunk->blank[l]) {
                  end_document();
                  continue;
                }
                text_in_current = true;
                if (!chunk->ids[l].empty()) {
                  current.push_back(std::move(chunk->ids[l]));
                  ++report.sentences;
                }
              }
              report.lines += static_cast<std::int64_t>(chunk->lines.size());
              report.bytes += chunk->bytes;
              if (chunk->invalid > 0 && report.invalid_utf8 == 0)
                report.first_invalid =
                    fmt::format("{}:{}", files[chunk->file].string(), chunk->first_invalid_line);
              report.invalid_utf8 += chunk->invalid;
              if (progress) progress("reading", std::min(report.bytes, total_bytes), total_bytes);
            }));
    end_document();
  });
  return documents;
}

}  // namespace

PrepareDataReport prepare_pretraining_data(const PrepareDataOptions& options,
                                           const PrepareProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  check_options(options);
  const auto files = input_files(options.inputs);
  check_output(options.output);
  // Without the HDF5 module, say so before minutes of reading.
  detail::hdf5_module();
  const auto opened =
      open_tokenizer({options.vocab, TokenizerOptions{options.lower_case, options.special_tokens}});
  const Tokenizer& tokenizer = *opened;
  if (!tokenizer.special_ids().mask)
    throw ConfigError(fmt::format("{}: vocabulary has no [MASK] token", options.vocab.string()));
  const detail::InstanceSettings settings = instance_settings(options, tokenizer);
  PrepareDataReport report;
  report.files = static_cast<std::int64_t>(files.size());
  std::int64_t total_bytes = 0;
  for (const auto& file : files) {
    std::error_code ec;
    total_bytes += static_cast<std::int64_t>(std::filesystem::file_size(file, ec));
  }
  tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
  std::vector<Document> documents =
      read_documents(files, tokenizer, arena, total_bytes, progress, report);
  report.documents = static_cast<std::int64_t>(documents.size());
  if (documents.empty()) {
    throw ConfigError(
        fmt::format("{}: no document with text (one sentence per line, documents "
                    "separated by blank lines)",
                    files.front().string()));
  }
  if (options.shards > report.documents) {
    throw ConfigError(fmt::format("--shards: {} shards for {} documents: every shard needs one",
                                  options.shards, report.documents));
  }
  // Documents dealt round-robin: each shard a share of every file.
  const auto shards = static_cast<std::size_t>(options.shards);
  std::vector<std::vector<Document>> shard_documents(shards);
  for (std::size_t d = 0; d < documents.size(); ++d)
    shard_documents[d % shards].push_back(std::move(documents[d]));
  documents = {};
  std::vector<std::vector<Instance>> shard_instances(shards);
  std::atomic<std::int64_t> built{0};
  arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, shards, [&](std::size_t s) {
      detail::DataRandom rng(options.seed, s);
      shard_instances[s] = detail::create_instances(std::move(shard_documents[s]),
                                                    options.dupe_factor, settings, rng);
      shard_documents[s] = {};
      built.fetch_add(1);
    });
  });
  if (progress) progress("instances", built.load(), options.shards);
  std::filesystem::create_directories(options.output);
  for (std::size_t s = 0; s < shards; ++s) {
    for (const Instance& instance : shard_instances[s]) {
      ++report.instances;
      report.random_next += instance.random_next ? 1 : 0;
      report.masked_tokens += static_cast<std::int64_t>(instance.masked_positions.size());
      report.real_tokens += static_cast<std::int64_t>(instance.tokens.size());
    }
    const auto path = options.output / fmt::format("part-{:05}-of-{:05}.hdf5", s, shards);
    write_part(path, shard_instances[s], options.max_seq_len, options.max_predictions);
    shard_instances[s] = {};
    report.files_written.push_back(path);
    if (progress) progress("writing", static_cast<std::int64_t>(s + 1), options.shards);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace polyhal
