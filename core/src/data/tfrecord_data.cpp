// TFRecord pre-training data (tfrecord_data.hpp): the layouts told apart,
// their rows turned into the samples the HDF5 readers give.
#include "polyhal/app/tfrecord_data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "data/part_files.hpp"
#include "data/stream_shuffle.hpp"
#include "data/tf_example.hpp"
#include "data/tfrecord_file.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

// Side files the vendors' tools write beside the records.
constexpr std::array<const char*, 5> kSideFileExtensions = {".json", ".index", ".txt", ".log",
                                                            ".md"};
// A directory of more files than this is not a data set polyhal was meant for
// (MLPerf's has 500 parts, Habana's packed one about 1,500).
constexpr std::size_t kMaxFiles = 100000;
// GZIP files that keep their decompressing cursors (up to 8 each) at once.
constexpr std::size_t kGzipFilesWithCursors = 64;
// The record bytes one shuffled block of GZIP data may hold (BERT's records
// are about 10 KB at seq 512: 100,000 of them), and the blocks kept: the
// one being read and the one before, which a lagging reader may still use.
constexpr std::uint64_t kMaxShuffleBlockBytes = std::uint64_t{1} << 30;
constexpr std::size_t kShuffleBlocksKept = 2;

/// Names per layout: ids, mask, segments, positions, lm positions, lm ids,
/// lm weights, ns positions, ns labels, ns weights ("" where absent).
struct LayoutNames {
  const char *ids, *mask, *segments, *positions, *lm_positions, *lm_ids, *lm_weights, *ns_positions,
      *ns_labels, *ns_weights;
};

LayoutNames names_of(TfRecordLayout layout) {
  switch (layout) {
    case TfRecordLayout::google:
      return {"input_ids",
              "input_mask",
              "segment_ids",
              "",
              "masked_lm_positions",
              "masked_lm_ids",
              "masked_lm_weights",
              "",
              "next_sentence_labels",
              ""};
    case TfRecordLayout::habana_packed:
      return {"input_ids",
              "input_mask",
              "segment_ids",
              "positions",
              "masked_lm_positions",
              "masked_lm_ids",
              "masked_lm_weights",
              "next_sentence_positions",
              "next_sentence_labels",
              "next_sentence_weights"};
    case TfRecordLayout::graphcore_remasked:
      return {"input_ids",
              "",
              "segment_ids",
              "input_position",
              "",
              "masked_labels",
              "masked_lm_weights",
              "",
              "next_sentence_labels",
              ""};
    case TfRecordLayout::graphcore_packed:
      break;
  }
  return {"packed_input_ids",
          "packed_input_mask",
          "packed_segment_ids",
          "packed_position_ids",
          "packed_masked_lm_positions",
          "packed_masked_lm_ids",
          "packed_masked_lm_mask",
          "",
          "packed_next_sentence_labels",
          "packed_next_sentence_mask"};
}

TfRecordLayout detect_layout(const detail::TfExample& first, const std::filesystem::path& file) {
  if (first.has("packed_input_ids")) return TfRecordLayout::graphcore_packed;
  if (first.has("input_ids") && first.has("next_sentence_positions"))
    return TfRecordLayout::habana_packed;
  if (first.has("input_position") && first.has("mask_padding_index"))
    return TfRecordLayout::graphcore_remasked;
  if (first.has("input_ids") && first.has("masked_lm_positions") &&
      first.has("next_sentence_labels"))
    return TfRecordLayout::google;
  throw ConfigError(fmt::format(
      "{}: record 0 holds the features {}: not BERT pre-training data in a layout polyhal "
      "reads (Google's create_pretraining_data.py, Habana's or Graphcore's packed layout; "
      "SQuAD and GLUE feature files are not pre-training data)",
      file.string(), first.names()));
}

/// A sequence number stored as a float weight (Habana, Graphcore): a whole
/// number in 0..k.
std::int32_t sequence_number(float w, std::int64_t k, const std::string& where) {
  if (!(w >= 0.0f) || w > static_cast<float>(k) || w != std::floor(w))
    throw ConfigError(fmt::format("{}: {}: expected a sequence number 0..{}", where, w, k));
  return static_cast<std::int32_t>(w);
}

}  // namespace

const char* to_string(TfRecordLayout layout) {
  switch (layout) {
    case TfRecordLayout::google:
      return "google";
    case TfRecordLayout::habana_packed:
      return "habana_packed";
    case TfRecordLayout::graphcore_remasked:
      return "graphcore_remasked";
    case TfRecordLayout::graphcore_packed:
      return "graphcore_packed";
  }
  return "?";
}

std::vector<std::filesystem::path> tfrecord_files(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) {
    if (!std::filesystem::exists(path, error))
      throw ConfigError(fmt::format("{}: no such file or directory", path.string()));
    return {path};
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(path)) {
    const auto name = entry.path().filename().string();
    const auto extension = entry.path().extension().string();
    if (name.starts_with('.') || !entry.is_regular_file() ||
        std::find(kSideFileExtensions.begin(), kSideFileExtensions.end(), extension) !=
            kSideFileExtensions.end())
      continue;
    if (files.size() == kMaxFiles)
      throw ConfigError(fmt::format("{}: more than {} files", path.string(), kMaxFiles));
    files.push_back(entry.path());
  }
  if (files.empty())
    throw ConfigError(fmt::format("{}: no TFRecord files in this directory", path.string()));
  std::sort(files.begin(), files.end());
  // A directory is the whole set; one part file named alone is the user's choice.
  detail::check_part_set(path, files);
  return files;
}

struct TfRecordSet::Impl {
  std::vector<std::filesystem::path> paths;
  std::vector<detail::TfRecordFile> files;
  std::vector<std::int64_t> first_record;  // of each file in the whole set
  TfRecordLayout layout = TfRecordLayout::google;
  LayoutNames names{};
  std::int64_t records = 0, seq = 0, predictions = 0, sequences = 1;
  // The GZIP files read most recently, newest first: only these keep
  // decompressing cursors (each holds a descriptor), so a shuffled read of
  // thousands of GZIP files stays far below the usual 1,024.
  mutable std::mutex recent_mutex;
  mutable std::list<std::size_t> recent_gzip;

  /// Notes that GZIP file `f` was read; closes the cursors of the one read
  /// longest ago once more than kGzipFilesWithCursors hold some.
  void read_gzip(std::size_t f) const {
    std::size_t release = files.size();
    {
      const std::scoped_lock lock(recent_mutex);
      const auto it = std::find(recent_gzip.begin(), recent_gzip.end(), f);
      if (it != recent_gzip.end()) {
        recent_gzip.splice(recent_gzip.begin(), recent_gzip, it);
        return;
      }
      recent_gzip.push_front(f);
      if (recent_gzip.size() <= kGzipFilesWithCursors) return;
      release = recent_gzip.back();
      recent_gzip.pop_back();
    }
    files[release].release_cursors();
  }

  /// The file (its number) and the record in it of sample `index`.
  std::pair<std::size_t, std::int64_t> place(std::int64_t index) const {
    const auto f =
        static_cast<std::size_t>(std::upper_bound(first_record.begin(), first_record.end(), index) -
                                 first_record.begin() - 1);
    return {f, index - first_record[f]};
  }

  /// Graphcore's remasked row put back in Google's layout: the P masked
  /// tokens come first, then the others up to seq_padding_index, each with
  /// its original position in input_position.
  MlperfSample remasked_sample(const detail::TfExample& e, std::int64_t index) const {
    const auto s_len = static_cast<std::size_t>(seq);
    const auto p = static_cast<std::size_t>(predictions);
    MlperfSample s;
    const auto [f, row] = place(index);
    s.file = paths[f], s.row = row;
    const auto where = [&](const char* feature) {
      return fmt::format("{}: record {}: feature '{}'", s.file.string(), s.row, feature);
    };
    const auto ids = e.ints("input_ids", s_len), positions = e.ints("input_position", s_len),
               segments = e.ints("segment_ids", s_len), labels = e.ints("masked_labels", p);
    const std::int32_t masked = e.ints("mask_padding_index", 1).front();
    const std::int32_t end = e.ints("seq_padding_index", 1).front();
    if (masked < 0 || static_cast<std::size_t>(masked) > p)
      throw ConfigError(
          fmt::format("{} = {}: outside 0..{}", where("mask_padding_index"), masked, p));
    if (end < static_cast<std::int32_t>(p) || static_cast<std::size_t>(end) > s_len)
      throw ConfigError(
          fmt::format("{} = {}: outside {}..{}", where("seq_padding_index"), end, p, s_len));
    s.input_ids.assign(s_len, 0), s.input_mask.assign(s_len, 0), s.segment_ids.assign(s_len, 0);
    s.masked_lm_positions.assign(p, 0), s.masked_lm_ids.assign(p, 0);
    std::size_t tokens = 0;
    for (std::size_t slot = 0; slot < static_cast<std::size_t>(end); ++slot) {
      if (slot >= static_cast<std::size_t>(masked) && slot < p) continue;  // unused mask slots
      const std::int32_t at = positions[slot];
      if (at < 0 || static_cast<std::size_t>(at) >= s_len ||
          s.input_mask[static_cast<std::size_t>(at)])
        throw ConfigError(fmt::format("{}[{}] = {}: not a free position of the {}-token sequence",
                                      where("input_position"), slot, at, s_len));
      const auto a = static_cast<std::size_t>(at);
      s.input_ids[a] = ids[slot], s.segment_ids[a] = segments[slot], s.input_mask[a] = 1;
      if (slot < static_cast<std::size_t>(masked)) {
        s.masked_lm_positions[slot] = at;
        s.masked_lm_ids[slot] = labels[slot];
      }
      ++tokens;
    }
    for (std::size_t t = 0; t < s_len; ++t)  // the tokens fill the start of the sequence
      if ((t < tokens) != (s.input_mask[t] == 1))
        throw ConfigError(fmt::format("{}: the {} tokens' positions leave a gap at {}",
                                      where("input_position"), tokens, t));
    s.next_sentence_label = e.ints("next_sentence_labels", 1).front();
    return s;
  }

  // data.shuffle over GZIP files: the stream's order and its decoded blocks.
  std::optional<detail::StreamShuffle> stream;
  struct Block {
    std::uint64_t epoch = 0;
    std::int64_t number = 0;
    std::vector<std::int64_t> order;                      // its records, in stream order
    std::unordered_map<std::int64_t, std::string> bytes;  // by record index
  };
  mutable std::mutex blocks_mutex;
  mutable std::deque<std::shared_ptr<const Block>> blocks;  // newest first

  /// The cached bytes of record `index`, or nullptr.
  std::shared_ptr<const std::string> cached(std::int64_t index) const {
    const std::scoped_lock lock(blocks_mutex);
    for (const auto& block : blocks)
      if (const auto it = block->bytes.find(index); it != block->bytes.end())
        return {block, &it->second};  // shares the block's lifetime
    return nullptr;
  }

  /// Block `number` of `epoch`, read in stream order (one pass over each
  /// GZIP file's part of it) unless it is cached.
  std::shared_ptr<const Block> load_block(std::uint64_t epoch, std::int64_t number) const {
    const std::scoped_lock lock(blocks_mutex);
    for (const auto& block : blocks)
      if (block->epoch == epoch && block->number == number) return block;
    auto block = std::make_shared<Block>();
    block->epoch = epoch, block->number = number;
    block->order = stream->block_records(epoch, number);
    std::uint64_t total = 0;
    for (const std::int64_t index : block->order) {
      const auto [f, r] = place(index);
      std::string bytes = files[f].record(r);
      if (files[f].gzip()) read_gzip(f);
      total += bytes.size();
      if (total > kMaxShuffleBlockBytes)
        throw ConfigError(fmt::format(
            "{}: the {} records of one shuffle block hold more than {} MiB (at record {} of "
            "{}): lower data.shuffle_buffer",
            paths.front().string(), stream->buffer(), kMaxShuffleBlockBytes >> 20, r,
            files[f].path().string()));
      block->bytes.emplace(index, std::move(bytes));
    }
    blocks.push_front(block);
    if (blocks.size() > kShuffleBlocksKept) blocks.pop_back();
    return block;
  }

  /// The file and record `index` falls in, parsed.
  detail::TfExample example(std::int64_t index) const {
    if (index < 0 || index >= records)
      throw Error(ExitCode::failure, fmt::format("TFRecord sample {} asked of {}", index, records));
    const auto [f, r] = place(index);
    if (const auto bytes = cached(index)) return detail::TfExample(*bytes, files[f].path(), r);
    std::string bytes = files[f].record(r);
    if (files[f].gzip()) read_gzip(f);
    return detail::TfExample(bytes, files[f].path(), r);
  }
};

TfRecordSet::TfRecordSet(const std::filesystem::path& path) : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.paths = tfrecord_files(path);
  for (const auto& file : m.paths) {
    m.files.emplace_back(file);
    m.first_record.push_back(m.records);
    m.records += m.files.back().size();
  }
  // Files in name order may start with empty ones: the first record says the layout.
  if (m.records == 0)
    throw ConfigError(fmt::format("{}: no records in {} file(s)", path.string(), m.paths.size()));
  const detail::TfExample first = m.example(0);
  m.layout = detect_layout(first, m.paths[m.place(0).first]);
  m.names = names_of(m.layout);
  m.seq = static_cast<std::int64_t>(first.count(m.names.ids));
  // The remasked layout's masked_lm_positions is not padded: its width is
  // that of masked_labels.
  m.predictions = static_cast<std::int64_t>(first.count(
      m.layout == TfRecordLayout::graphcore_remasked ? m.names.lm_ids : m.names.lm_positions));
  if (m.layout != TfRecordLayout::google && m.layout != TfRecordLayout::graphcore_remasked)
    m.sequences = static_cast<std::int64_t>(first.count(m.names.ns_labels));
  if (m.seq < 2 || m.predictions < 1 || m.sequences < 1)
    throw ConfigError(fmt::format(
        "{}: record 0 ({} layout): {} tokens, {} masked positions, {} sequences per row: an "
        "empty feature",
        m.paths.front().string(), to_string(m.layout), m.seq, m.predictions, m.sequences));
}

TfRecordSet::~TfRecordSet() = default;

TfRecordLayout TfRecordSet::layout() const noexcept {
  return impl_->layout;
}
bool TfRecordSet::packed() const noexcept {
  return impl_->layout == TfRecordLayout::habana_packed ||
         impl_->layout == TfRecordLayout::graphcore_packed;
}
bool TfRecordSet::any_gzip() const noexcept {
  return std::any_of(impl_->files.begin(), impl_->files.end(),
                     [](const detail::TfRecordFile& f) { return f.gzip(); });
}
std::int64_t TfRecordSet::size() const noexcept {
  return impl_->records;
}
std::int64_t TfRecordSet::seq_len() const noexcept {
  return impl_->seq;
}
std::int64_t TfRecordSet::max_predictions() const noexcept {
  return impl_->predictions;
}
std::int64_t TfRecordSet::max_sequences() const noexcept {
  return impl_->sequences;
}
const std::vector<std::filesystem::path>& TfRecordSet::files() const noexcept {
  return impl_->paths;
}

void TfRecordSet::shuffle_in_blocks(std::uint64_t seed, std::int64_t buffer) {
  std::vector<std::int64_t> sizes;
  for (const auto& file : impl_->files) sizes.push_back(file.size());
  impl_->stream.emplace(std::move(sizes), seed, buffer);
}

std::int64_t TfRecordSet::record_at(std::uint64_t position) const {
  const auto& m = *impl_;
  if (!m.stream) return static_cast<std::int64_t>(position % static_cast<std::uint64_t>(m.records));
  const detail::StreamShuffle::Place p = m.stream->place(position);
  return m.load_block(p.epoch, p.block)->order[static_cast<std::size_t>(p.offset)];
}

MlperfSample TfRecordSet::sample(std::int64_t index) const {
  const auto& m = *impl_;
  if (packed())
    throw Error(ExitCode::failure,
                fmt::format("{}: packed rows read as unpacked", m.paths.front().string()));
  const detail::TfExample e = m.example(index);
  const auto seq = static_cast<std::size_t>(m.seq);
  const auto p = static_cast<std::size_t>(m.predictions);
  if (m.layout == TfRecordLayout::graphcore_remasked) return m.remasked_sample(e, index);
  MlperfSample s;
  s.input_ids = e.ints("input_ids", seq);
  s.input_mask = e.ints("input_mask", seq);
  s.segment_ids = e.ints("segment_ids", seq);
  s.masked_lm_positions = e.ints("masked_lm_positions", p);
  s.masked_lm_ids = e.ints("masked_lm_ids", p);
  const std::vector<float> weights = e.floats("masked_lm_weights", p);
  s.next_sentence_label = e.ints("next_sentence_labels", 1).front();
  const auto [f, row] = m.place(index);
  s.file = m.paths[f], s.row = row;
  for (std::size_t k = 0; k < p; ++k) {
    if (weights[k] != 0.0f && weights[k] != 1.0f)
      throw ConfigError(
          fmt::format("{}: record {}: feature 'masked_lm_weights'[{}] = {}: "
                      "expected 0 or 1",
                      s.file.string(), s.row, k, weights[k]));
    if (weights[k] == 0.0f) s.masked_lm_positions[k] = 0;  // MLPerf HDF5's padding
  }
  return s;
}

namespace {

/// How many sequences a Graphcore packed row holds: the last entries of its
/// next-sentence weights are 1 (one per sequence, from the end), the others
/// 0; checked, with `where(q)` naming entry q.
template <class Weights, class Where>
std::size_t graphcore_sequences(const Weights& ns_weights, std::size_t seq, const PackedSample& s,
                                const Where& where) {
  const std::size_t k = ns_weights.size();
  std::size_t sequences = 0;
  while (sequences < k && ns_weights[k - 1 - sequences] == 1.0f) ++sequences;
  for (std::size_t q = 0; q < k; ++q) {
    const bool real = k - 1 - q < sequences;
    if (ns_weights[q] != (real ? 1.0f : 0.0f))
      throw ConfigError(fmt::format("{} = {}: the sequences' entries are the last {}, from the end",
                                    where(q), ns_weights[q], sequences));
  }
  if (sequences == 0 || sequences >= seq)
    throw ConfigError(fmt::format("{}: record {}: {} sequences in a row of {} tokens",
                                  s.file.string(), s.row, sequences, seq));
  return sequences;
}

}  // namespace

PackedSample TfRecordSet::packed_sample(std::int64_t index) const {
  const auto& m = *impl_;
  const auto& n = m.names;
  if (!packed())
    throw Error(ExitCode::failure,
                fmt::format("{}: unpacked rows read as packed", m.paths.front().string()));
  const detail::TfExample e = m.example(index);
  const auto seq = static_cast<std::size_t>(m.seq);
  const auto p = static_cast<std::size_t>(m.predictions);
  const auto k = static_cast<std::size_t>(m.sequences);
  PackedSample s;
  const auto [f, row] = m.place(index);
  s.file = m.paths[f], s.row = row;
  const auto where = [&](const char* feature, std::size_t at) {
    return fmt::format("{}: record {}: feature '{}'[{}]", s.file.string(), s.row, feature, at);
  };
  const auto ids = e.ints(n.ids, seq), mask = e.ints(n.mask, seq),
             segments = e.ints(n.segments, seq), positions = e.ints(n.positions, seq);
  const auto lm_positions = e.ints(n.lm_positions, p), lm_ids = e.ints(n.lm_ids, p);
  const auto lm_weights = e.floats(n.lm_weights, p);
  const auto ns_labels = e.ints(n.ns_labels, k);
  const auto ns_weights = e.floats(n.ns_weights, k);
  const auto kk = static_cast<std::int64_t>(k);
  s.masked_lm_ids = lm_ids;
  s.masked_lm_positions = lm_positions;
  s.masked_lm_weights.resize(p);
  for (std::size_t q = 0; q < p; ++q)
    s.masked_lm_weights[q] =
        sequence_number(lm_weights[q], kk, where(n.lm_weights, q)) > 0 ? 1.0f : 0.0f;
  s.next_sentence_weights.resize(k);
  if (m.layout == TfRecordLayout::habana_packed) {
    s.input_ids = ids, s.input_mask = mask, s.segment_ids = segments, s.position_ids = positions;
    s.next_sentence_positions = e.ints(n.ns_positions, k);
    s.next_sentence_labels = ns_labels;
    for (std::size_t q = 0; q < k; ++q) {
      s.next_sentence_weights[q] = ns_weights[q];
      if (ns_weights[q] == 0.0f) s.next_sentence_positions[q] = 0;
    }
    for (std::size_t q = 0; q < p; ++q) {  // the sequence a weight names holds the token
      const auto number = sequence_number(lm_weights[q], kk, where(n.lm_weights, q));
      const std::int32_t at = lm_positions[q];
      if (number > 0 && (at < 0 || static_cast<std::size_t>(at) >= seq ||
                         mask[static_cast<std::size_t>(at)] != number))
        throw ConfigError(fmt::format("{} = {}: position {} is not a token of sequence {}",
                                      where(n.lm_weights, q), lm_weights[q], at, number));
    }
    check_packed_row(s);
    return s;
  }
  // Graphcore: the [CLS] of sequence j (1-based) is at seq - j, its label
  // at k - j; the sequences' other tokens come first, in order. Rebuilt with
  // each [CLS] in front of its sequence: a token of sequence j moves j places.
  const std::size_t sequences = graphcore_sequences(
      ns_weights, seq, s, [&](std::size_t q) { return where(n.ns_weights, q); });
  const std::size_t body = seq - sequences;
  std::vector<std::int32_t> moved_to(seq, -1);
  s.input_ids.assign(seq, 0), s.input_mask.assign(seq, 0), s.segment_ids.assign(seq, 0),
      s.position_ids.assign(seq, 0);
  s.next_sentence_positions.assign(k, 0), s.next_sentence_labels.assign(k, 0);
  std::size_t t = 0, out = 0;
  for (std::size_t j = 1; j <= sequences; ++j) {
    const std::size_t cls = seq - j;
    if (mask[cls] != static_cast<std::int32_t>(j) || positions[cls] != 0)
      throw ConfigError(
          fmt::format("{} = {}: expected the [CLS] of sequence {} (mask {}, "
                      "position 0)",
                      where(n.mask, cls), mask[cls], j, j));
    s.next_sentence_positions[j - 1] = static_cast<std::int32_t>(out);
    s.next_sentence_labels[j - 1] = ns_labels[k - j];
    s.next_sentence_weights[j - 1] = 1.0f;
    s.input_ids[out] = ids[cls], s.input_mask[out] = static_cast<std::int32_t>(j),
    s.segment_ids[out] = segments[cls], moved_to[cls] = static_cast<std::int32_t>(out);
    ++out;
    for (; t < body && mask[t] == static_cast<std::int32_t>(j); ++t, ++out) {
      s.input_ids[out] = ids[t], s.input_mask[out] = mask[t], s.segment_ids[out] = segments[t],
      s.position_ids[out] = positions[t], moved_to[t] = static_cast<std::int32_t>(out);
    }
  }
  for (; t < body; ++t) {
    if (mask[t] != 0)
      throw ConfigError(
          fmt::format("{} = {}: sequences must be numbered 1, 2, ... in order, "
                      "then padding 0",
                      where(n.mask, t), mask[t]));
  }
  for (std::size_t q = 0; q < p; ++q) {
    if (s.masked_lm_weights[q] == 0.0f) {
      s.masked_lm_positions[q] = 0;
      continue;
    }
    const std::int32_t at = lm_positions[q];
    const auto number = sequence_number(lm_weights[q], kk, where(n.lm_weights, q));
    if (at < 0 || static_cast<std::size_t>(at) >= seq ||
        moved_to[static_cast<std::size_t>(at)] < 0 || mask[static_cast<std::size_t>(at)] != number)
      throw ConfigError(
          fmt::format("{} = {}: not a token of sequence {}", where(n.lm_positions, q), at, number));
    s.masked_lm_positions[q] = moved_to[static_cast<std::size_t>(at)];
  }
  check_packed_row(s);
  return s;
}

TfRecordReader::TfRecordReader(std::unique_ptr<TfRecordSet> set) : set_(std::move(set)) {
  if (set_->packed())
    throw ConfigError(fmt::format("{}: packed rows ({} layout), read as unpacked",
                                  set_->files().front().string(), to_string(set_->layout())));
}

TfRecordPackedReader::TfRecordPackedReader(std::unique_ptr<TfRecordSet> set)
    : set_(std::move(set)) {
  if (!set_->packed())
    throw ConfigError(fmt::format("{}: unpacked rows ({} layout), read as packed",
                                  set_->files().front().string(), to_string(set_->layout())));
}

}  // namespace polyhal
