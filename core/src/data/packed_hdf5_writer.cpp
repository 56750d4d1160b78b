// `polyhal pack`: MLPerf HDF5 samples into packed rows (packed_data.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "data/hdf5_writer.hpp"
#include "polyhal/app/mlperf_hdf5.hpp"
#include "polyhal/app/packed_data.hpp"
#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"

namespace polyhal {
namespace {

/// One sample reduced to what packing needs, checked.
struct Sequence {
  std::int64_t length = 0;
  std::vector<std::pair<std::int32_t, std::int32_t>> predictions;  // (position, id)
};

Sequence check_sample(const MlperfSample& s, std::int64_t max_len) {
  const auto where = [&](const char* field) {
    return fmt::format("{}: sample {}: field {}", s.file.string(), s.row, field);
  };
  Sequence out;
  for (std::size_t p = 0; p < s.input_mask.size(); ++p) {
    const std::int32_t m = s.input_mask[p];
    if (m != 0 && m != 1)
      throw ConfigError(
          fmt::format("{}: value {} at {}: expected 0 or 1", where("input_mask"), m, p));
    if (m == 1) {
      if (out.length != static_cast<std::int64_t>(p))
        throw ConfigError(fmt::format("{}: a 1 at {} after padding: the tokens must come first",
                                      where("input_mask"), p));
      ++out.length;
    }
  }
  if (out.length == 0) throw ConfigError(fmt::format("{}: no tokens", where("input_mask")));
  if (out.length > max_len)
    throw ConfigError(fmt::format("{}: {} tokens, longer than the pack length {}",
                                  where("input_mask"), out.length, max_len));
  for (std::size_t k = 0; k < s.masked_lm_positions.size(); ++k) {
    const std::int32_t position = s.masked_lm_positions[k];
    if (position == 0) continue;  // padding ([CLS] is never masked)
    if (position < 0 || position >= out.length)
      throw ConfigError(fmt::format("{}: position {} outside the sequence's {} tokens",
                                    where("masked_lm_positions"), position, out.length));
    out.predictions.emplace_back(position, s.masked_lm_ids[k]);
  }
  return out;
}

/// One output file's datasets, row-major.
struct PackedRows {
  std::int64_t rows = 0, seq = 0, predictions = 0, per_pack = 0;
  std::vector<std::int32_t> ids, segments, mask, positions, lm_positions, lm_ids, ns_positions,
      ns_labels;
  std::vector<float> lm_weights, ns_weights;

  PackedRows(std::int64_t n, std::int64_t s, std::int64_t p, std::int64_t k)
      : rows(n), seq(s), predictions(p), per_pack(k) {
    const auto tokens = static_cast<std::size_t>(n * s);
    ids.assign(tokens, 0), segments.assign(tokens, 0), mask.assign(tokens, 0),
        positions.assign(tokens, 0);
    const auto lm = static_cast<std::size_t>(n * p);
    lm_positions.assign(lm, 0), lm_ids.assign(lm, 0), lm_weights.assign(lm, 0.0f);
    const auto ns = static_cast<std::size_t>(n * k);
    ns_positions.assign(ns, 0), ns_labels.assign(ns, 0), ns_weights.assign(ns, 0.0f);
  }
};

void write_file(const std::filesystem::path& path, const PackedRows& r,
                const PackOptions& options) {
  detail::Hdf5Writer file(path);
  const std::int64_t n = r.rows, s = r.seq, p = r.predictions, k = r.per_pack;
  constexpr auto i32 = detail::Hdf5Stored::i32, f32 = detail::Hdf5Stored::f32;
  file.dataset("packed_input_ids", n, s, i32, r.ids.data());
  file.dataset("packed_segment_ids", n, s, i32, r.segments.data());
  file.dataset("packed_input_mask", n, s, i32, r.mask.data());
  file.dataset("packed_position_ids", n, s, i32, r.positions.data());
  file.dataset("packed_masked_lm_positions", n, p, i32, r.lm_positions.data());
  file.dataset("packed_masked_lm_ids", n, p, i32, r.lm_ids.data());
  file.dataset("packed_masked_lm_weights", n, p, f32, r.lm_weights.data());
  file.dataset("packed_next_sentence_positions", n, k, i32, r.ns_positions.data());
  file.dataset("packed_next_sentence_labels", n, k, i32, r.ns_labels.data());
  file.dataset("packed_next_sentence_weights", n, k, f32, r.ns_weights.data());
  file.attribute("algorithm", options.algorithm);
  file.attribute("max_sequences_per_pack", std::to_string(options.max_sequences_per_pack));
  file.attribute("source", options.input.string());
  file.commit();
}

}  // namespace

PackResult pack_mlperf_hdf5(const PackOptions& options, const PackProgress& progress) {
  detail::hdf5_module();  // without it, fail before anything is read or made
  if (options.max_seq_len < 1 || options.max_seq_len > 65536)
    throw ConfigError(fmt::format("--max-seq-len: expected 1..65536, got {}", options.max_seq_len));
  if (options.rows_per_file < 1)
    throw ConfigError(
        fmt::format("--rows-per-file: expected at least 1, got {}", options.rows_per_file));
  std::error_code ec;
  if (std::filesystem::exists(options.output, ec)) {
    if (!std::filesystem::is_directory(options.output, ec))
      throw ConfigError(
          fmt::format("{}: --output exists and is not a directory", options.output.string()));
    for (const auto& entry : std::filesystem::directory_iterator(options.output)) {
      const auto ext = entry.path().extension();
      if (ext == ".hdf5" || ext == ".h5")
        throw ConfigError(fmt::format(
            "{}: --output already holds {}: choose an empty directory, so packed and other files "
            "are not mixed",
            options.output.string(), entry.path().filename().string()));
    }
  }
  if (is_packed_data(options.input)) {
    throw ConfigError(fmt::format(
        "{}: --input holds packed rows already (dataset packed_input_ids): pack the unpacked "
        "MLPerf files they were made from",
        options.input.string()));
  }
  const MlperfHdf5Reader reader(options.input);
  const std::int64_t total = reader.size();
  std::vector<Sequence> sequences;
  std::vector<std::int64_t> lengths;
  std::vector<std::int32_t> labels;
  // Grown as rows are read: a file claiming more rows than it holds cannot make us
  // allocate for them up front.
  sequences.reserve(static_cast<std::size_t>(std::min<std::int64_t>(total, 1 << 20)));
  for (std::int64_t i = 0; i < total; ++i) {
    const MlperfSample sample = reader.sample(i);
    sequences.push_back(check_sample(sample, options.max_seq_len));
    lengths.push_back(sequences.back().length);
    labels.push_back(sample.next_sentence_label);
    if (progress && (i % 4096 == 0 || i + 1 == total)) progress("reading", i + 1, total);
  }
  PackResult result;
  const auto packs = pack_sequences(lengths, options.max_seq_len, options.max_sequences_per_pack,
                                    options.algorithm, &result.stats);
  for (const auto& pack : packs) {
    std::int64_t predictions = 0;
    for (const std::int64_t i : pack)
      predictions +=
          static_cast<std::int64_t>(sequences[static_cast<std::size_t>(i)].predictions.size());
    result.max_predictions_per_pack = std::max(result.max_predictions_per_pack, predictions);
  }
  std::filesystem::create_directories(options.output);
  const auto count = static_cast<std::int64_t>(packs.size());
  const std::int64_t files = (count + options.rows_per_file - 1) / options.rows_per_file;
  const std::int64_t seq = options.max_seq_len, k = options.max_sequences_per_pack;
  const std::int64_t p = std::max<std::int64_t>(result.max_predictions_per_pack, 1);
  for (std::int64_t f = 0; f < files; ++f) {
    const std::int64_t first = f * options.rows_per_file;
    const std::int64_t rows = std::min(options.rows_per_file, count - first);
    PackedRows out(rows, seq, p, k);
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto& pack = packs[static_cast<std::size_t>(first + r)];
      std::int64_t offset = 0, predicted = 0;
      for (std::size_t q = 0; q < pack.size(); ++q) {
        const auto index = pack[q];
        const MlperfSample sample = reader.sample(index);
        const Sequence& sequence = sequences[static_cast<std::size_t>(index)];
        for (std::int64_t t = 0; t < sequence.length; ++t) {
          const auto at = static_cast<std::size_t>(r * seq + offset + t);
          out.ids[at] = sample.input_ids[static_cast<std::size_t>(t)];
          out.segments[at] = sample.segment_ids[static_cast<std::size_t>(t)];
          out.mask[at] = static_cast<std::int32_t>(q + 1);
          out.positions[at] = static_cast<std::int32_t>(t);
        }
        for (const auto& [position, id] : sequence.predictions) {
          const auto at = static_cast<std::size_t>(r * p + predicted++);
          out.lm_positions[at] = static_cast<std::int32_t>(offset + position);
          out.lm_ids[at] = id;
          out.lm_weights[at] = 1.0f;
        }
        const auto ns = static_cast<std::size_t>(r * k) + q;
        out.ns_positions[ns] = static_cast<std::int32_t>(offset);
        out.ns_labels[ns] = labels[static_cast<std::size_t>(index)];
        out.ns_weights[ns] = 1.0f;
        offset += sequence.length;
      }
      if (progress && ((first + r) % 4096 == 0 || first + r + 1 == count))
        progress("writing", first + r + 1, count);
    }
    const auto path = options.output / fmt::format("part-{:05}-of-{:05}.hdf5", f, files);
    write_file(path, out, options);
    result.files.push_back(path);
  }
  return result;
}

}  // namespace polyhal
