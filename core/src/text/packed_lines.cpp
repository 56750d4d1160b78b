#include "text/packed_lines.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace polyhal {
namespace {

/// Makes a packed row's padding [first, end) one more sequence, numbered
/// `sequence`, that attends only itself. As padding (mask 0) each of its
/// tokens would attend every real token of the row: for a served row of 32
/// sentences, 1,007 tokens and 17 of padding, 17 x 1,007 query-key pairs
/// beside the sentences' own 32 x 30 x 30. Fenced, it costs its length squared,
/// so only a tail shorter than the row's real tokens is fenced (not a row
/// of [CLS] [SEP] filler). Its outputs are thrown away either way.
void fence_padding(std::vector<std::int32_t>& mask, std::size_t first, std::size_t end,
                   std::int32_t sequence) {
  for (std::size_t t = first; t < end; ++t) mask[t] = sequence;
}

}  // namespace

std::vector<float> host_linear(std::span<const float> x, const HostTensor& weight,
                               const HostTensor& bias) {
  const std::size_t in = x.size(), out_size = bias.values.size();
  if (weight.values.size() != in * out_size)
    throw std::invalid_argument("host_linear: the weight is not [bias size, input size]");
  std::vector<float> out(out_size);
  for (std::size_t o = 0; o < out_size; ++o) {
    double sum = bias.values[o];
    const float* row = weight.values.data() + o * in;
    for (std::size_t i = 0; i < in; ++i) sum += static_cast<double>(row[i]) * x[i];
    out[o] = static_cast<float>(sum);
  }
  return out;
}

void run_packed_lines(BertInference& bert, const std::vector<LineTokens>& lines,
                      const Encoding& filler, const PackedLineDone& done, PackedRunStats* stats,
                      std::int64_t max_per_row, RowPacking packing) {
  const BertShape shape = bert.shape();
  const auto seq = static_cast<std::size_t>(shape.seq);
  std::vector<std::int64_t> lengths(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i)
    lengths[i] = static_cast<std::int64_t>(lines[i].ids.size());
  BertOutputs outputs;
  const std::int64_t per_row = max_per_row > 0 ? max_per_row : shape.seq;
  // Calibration reads every token's activations, padding's too: fenced,
  // padding ([PAD] at position 0, attending only itself) is no longer like
  // the real tokens around it, and the static scales came out worse.
  const bool fence = !bert.calibrating();
  for (const PackedBatch& batch : pack_lines(lengths, shape.seq, shape.batch, per_row, packing)) {
    BertInputs in;
    in.input_ids.assign(static_cast<std::size_t>(shape.batch) * seq, 0);
    in.token_type_ids.assign(in.input_ids.size(), 0);
    in.attention_mask.assign(in.input_ids.size(), 0);
    in.position_ids.assign(in.input_ids.size(), 0);
    for (std::size_t r = 0; r < static_cast<std::size_t>(shape.batch); ++r) {
      const std::size_t row = r * seq;
      if (r >= batch.rows.size()) {
        for (std::size_t t = 0; t < seq && filler.attention_mask[t] != 0; ++t) {
          in.input_ids[row + t] = filler.input_ids[t];
          in.attention_mask[row + t] = 1;
          in.position_ids[row + t] = static_cast<std::int32_t>(t);
        }
        continue;
      }
      std::int64_t used = 0;
      for (std::size_t k = 0; k < batch.rows[r].size(); ++k) {
        const PackedSlot& slot = batch.rows[r][k];
        const LineTokens& line = lines[slot.example];
        for (std::size_t t = 0; t < line.ids.size(); ++t) {
          const std::size_t at = row + static_cast<std::size_t>(slot.offset) + t;
          in.input_ids[at] = line.ids[t];
          in.token_type_ids[at] = line.types[t];
          in.attention_mask[at] = static_cast<std::int32_t>(k + 1);
          in.position_ids[at] = static_cast<std::int32_t>(t);
        }
        used = std::max(used, slot.offset + static_cast<std::int64_t>(line.ids.size()));
      }
      const auto sequences = static_cast<std::int64_t>(batch.rows[r].size());
      if (fence && sequences < per_row && shape.seq - used < used)
        fence_padding(in.attention_mask, row + static_cast<std::size_t>(used), row + seq,
                      static_cast<std::int32_t>(sequences + 1));
    }
    const auto start = std::chrono::steady_clock::now();
    bert.run(in, &outputs);
    if (stats) {
      stats->computed_tokens += shape.batch * shape.seq;
      stats->batch_seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const std::size_t h =
        outputs.last_hidden_state.size() / (static_cast<std::size_t>(shape.batch) * seq);
    for (std::size_t r = 0; r < batch.rows.size(); ++r) {
      for (const PackedSlot& slot : batch.rows[r]) {
        const std::size_t n = lines[slot.example].ids.size();
        done(slot.example,
             std::span<const float>(outputs.last_hidden_state.data() +
                                        (r * seq + static_cast<std::size_t>(slot.offset)) * h,
                                    n * h));
      }
    }
  }
}

void run_packed_lines(BertInference& bert, const std::vector<LineTokens>& lines,
                      const Encoding& filler, const PackedLineDone& done, PackedRunStats* stats,
                      std::int64_t max_per_row) {
  run_packed_lines(bert, lines, filler, done, stats, max_per_row, RowPacking::in_order);
}

LineTokens line_tokens(const Encoding& e) {
  const auto n = static_cast<std::size_t>(std::count_if(
      e.attention_mask.begin(), e.attention_mask.end(), [](std::int32_t m) { return m != 0; }));
  LineTokens out;
  out.ids.assign(e.input_ids.begin(), e.input_ids.begin() + static_cast<std::ptrdiff_t>(n));
  out.types.assign(e.token_type_ids.begin(),
                   e.token_type_ids.begin() + static_cast<std::ptrdiff_t>(n));
  return out;
}

}  // namespace polyhal
