#pragma once
// Packed MLPerf HDF5 (`polyhal pack`) as a pre-training source (inside libpolyhal).
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "data/sample_order.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/app/tfrecord_data.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

/// Reader(data.files), its errors (which name the data file) prefixed with
/// where data.files was set.
template <class Reader>
std::unique_ptr<Reader> open_data_files(const DataSource& config) {
  try {
    return std::make_unique<Reader>(config.data.files);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: key '{}': {}", config.locate(config.data.key("files")),
                                  config.data.key("files"), e.what()));
  }
}

/// Micro-batches of `shape.batch` packed rows of data.files; the files' row
/// length must equal model.seq_len. Throws ConfigError naming data.files.
std::unique_ptr<PretrainingData> open_packed_data(const DataSource& config, const BertConfig& model,
                                                  BertShape shape);

/// Micro-batches of packed TFRecord rows (already opened; `format` names
/// them in the log), visited in `order`.
std::unique_ptr<PretrainingData> open_packed_rows(std::unique_ptr<TfRecordPackedReader> reader,
                                                  std::string format, const DataSource& config,
                                                  const BertConfig& model, BertShape shape,
                                                  SampleOrder order);

}  // namespace polyhal
