#pragma once
// A tokenizer.json's post-processor: how one text or a pair is framed with
// special tokens and type ids (BertProcessing, RobertaProcessing,
// TemplateProcessing), and whether token offsets lose their byte-level
// spaces (RobertaProcessing and ByteLevel's trim_offsets); a Sequence of
// them applies each.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/normalized_text.hpp"

namespace polyhal::text {

/// One item of a template: a special token's ids, or a sequence (0: A, 1: B).
struct TemplateItem {
  std::vector<std::int32_t> special_ids;
  int sequence = -1;  ///< -1: a special token
  std::int32_t type_id = 0;
};

struct PostProcessor {
  std::vector<TemplateItem> single, pair;
  /// Byte-level offsets lose leading and trailing spaces (Ġ), as
  /// ByteLevel::process_offsets does; `add_prefix_space` keeps the one
  /// space the pre-tokenizer added to a first token.
  bool trim_offsets = false;
  bool add_prefix_space = false;
  /// Special tokens the template adds to one text or a pair.
  std::size_t added(bool is_pair) const;
};

/// The post-processor `json` describes (null: none: sequences as they
/// are, a pair's second with type id 1); `where` names it in errors. Every
/// special token's id is checked against `vocab_size`.
PostProcessor make_post_processor(const nlohmann::json& json, const std::string& where,
                                  std::size_t vocab_size);

}  // namespace polyhal::text
