#pragma once
// The order of data that can only be read in order (GZIP TFRecord), as
// TensorFlow users shuffle it (the seeds' input pipelines: shuffle the
// files, then a bounded shuffle buffer): each epoch reads the files in
// another seeded order, one after another, and shuffles that stream in
// consecutive blocks of `buffer` samples. Every sample comes once per epoch;
// a position names its sample without any state, so a resumed run continues
// the order exactly; reading a block's records in stream order costs one
// decompressing pass over the files per epoch.
#include <cstdint>
#include <vector>

namespace polyhal::detail {

class StreamShuffle {
 public:
  /// `file_records`: the records of each file, in the set's (name) order;
  /// `buffer` > 0 samples shuffled together.
  StreamShuffle(std::vector<std::int64_t> file_records, std::uint64_t seed, std::int64_t buffer);

  /// Where stream position `position` (epoch = position / records) falls.
  struct Place {
    std::uint64_t epoch = 0;
    std::int64_t block = 0;   ///< of the epoch's stream
    std::int64_t offset = 0;  ///< into block_records(epoch, block)
  };
  Place place(std::uint64_t position) const;

  /// The records of a block (indexes into the whole set, files in name
  /// order), in the order the epoch's stream reads them.
  std::vector<std::int64_t> block_records(std::uint64_t epoch, std::int64_t block) const;

  /// The record stream position `position` reads.
  std::int64_t record_at(std::uint64_t position) const;

  std::int64_t records() const noexcept { return records_; }
  std::int64_t buffer() const noexcept { return buffer_; }

 private:
  std::vector<std::int64_t> file_records_, first_record_;
  std::uint64_t seed_;
  std::int64_t buffer_, records_ = 0;
};

}  // namespace polyhal::detail
