#pragma once
/// @file convert_checkpoint.hpp
/// `polyhal convert --to checkpoint`: a TensorFlow pre-training checkpoint
/// (Google's run_pretraining.py, the MLPerf reference, the vendors' recipes)
/// with its optimizer state, into a polyhal checkpoint directory that task
/// pretrain resumes from (checkpoint.dir, checkpoint.resume: true) at the
/// checkpoint's global_step, with its Adam/LAMB moments.
#include "polyhal/app/convert_model.hpp"
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// Reads and checks as convert_tf_to_hf does, then asks for a pre-training
/// model (the MLM and NSP heads), global_step, and a first and second
/// moment of each weight's shape (second moments not negative); writes
/// options.output/checkpoint-<global_step>.safetensors (atomically). Throws
/// ConfigError naming the checkpoint and what is missing, and when
/// options.output already holds a checkpoint.
ConvertResult convert_tf_to_checkpoint(const ConvertOptions& options);

}  // namespace polyhal
