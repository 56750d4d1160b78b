#include "data/stream_shuffle.hpp"

#include <algorithm>
#include <utility>

#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/error.hpp"
#include "util/splitmix.hpp"

namespace polyhal::detail {

StreamShuffle::StreamShuffle(std::vector<std::int64_t> file_records, std::uint64_t seed,
                             std::int64_t buffer)
    : file_records_(std::move(file_records)), seed_(seed), buffer_(buffer) {
  if (buffer_ < 1) throw Error(ExitCode::failure, "a shuffle buffer of no samples");
  for (const std::int64_t n : file_records_) {
    first_record_.push_back(records_);
    records_ += n;
  }
  if (records_ == 0) throw Error(ExitCode::failure, "a shuffled stream of no records");
}

StreamShuffle::Place StreamShuffle::place(std::uint64_t position) const {
  const auto n = static_cast<std::uint64_t>(records_);
  const std::uint64_t epoch = position / n;
  const auto j = static_cast<std::int64_t>(position % n);
  const std::int64_t block = j / buffer_, start = block * buffer_;
  const std::int64_t length = std::min(buffer_, records_ - start);
  // A key per (seed, epoch, block): sample_at's first epoch of it.
  const std::uint64_t key = detail::splitmix64(
      seed_ ^ detail::splitmix64(epoch * 0x9e3779b97f4a7c15ull + 1) ^
      detail::splitmix64(static_cast<std::uint64_t>(block) + 0x632be59bd9b4e019ull));
  const std::int64_t offset = sample_at(static_cast<std::uint64_t>(j - start), length, key, true);
  return {epoch, block, offset};
}

std::vector<std::int64_t> StreamShuffle::block_records(std::uint64_t epoch,
                                                       std::int64_t block) const {
  const std::int64_t files = static_cast<std::int64_t>(file_records_.size());
  const std::int64_t start = block * buffer_, end = std::min(records_, start + buffer_);
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(end - start, 0)));
  std::int64_t stream = 0;  // where the next file starts in the epoch's stream
  for (std::int64_t k = 0; k < files && stream < end; ++k) {
    // The epoch's file order: sample_at's permutation of epoch `epoch`.
    const auto f = static_cast<std::size_t>(
        sample_at(epoch * static_cast<std::uint64_t>(files) + static_cast<std::uint64_t>(k), files,
                  seed_, true));
    const std::int64_t size = file_records_[f];
    for (std::int64_t r = std::max(start - stream, std::int64_t{0}); r < size && stream + r < end;
         ++r)
      out.push_back(first_record_[f] + r);
    stream += size;
  }
  return out;
}

std::int64_t StreamShuffle::record_at(std::uint64_t position) const {
  const Place p = place(position);
  return block_records(p.epoch, p.block)[static_cast<std::size_t>(p.offset)];
}

}  // namespace polyhal::detail
