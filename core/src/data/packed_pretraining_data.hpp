#pragma once
// Packed MLPerf HDF5 (`polyhal pack`) as a pre-training source (inside libpolyhal).
#include <memory>

#include "polyhal/pretraining_data.hpp"

namespace polyhal {

/// Micro-batches of `shape.batch` packed rows of data.files; the files' row
/// length must equal model.seq_len. Throws ConfigError naming data.files.
std::unique_ptr<PretrainingData> open_packed_data(const RunConfig& config, const BertConfig& model,
                                                  BertShape shape);

}  // namespace polyhal
