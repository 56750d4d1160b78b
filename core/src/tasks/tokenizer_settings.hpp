#pragma once
// The tokenizer settings a model directory ships beside its vocab.txt
// (Hugging Face's tokenizer_config.json), so a real model tokenizes as its
// authors did with no hand editing; a setting polyhal's WordPiece does not
// implement is an error naming the file, never a silent difference.
#include "polyhal/app/config.hpp"

namespace polyhal {

/// Whether text is lower-cased (and accents stripped) for `config`'s
/// data.vocab: data.lower_case when the config gives it, else the
/// directory's do_lower_case, else true (BERT's uncased default). Checks
/// the rest of tokenizer_config.json (tokenizer_class, strip_accents,
/// tokenize_chinese_chars, do_basic_tokenize, never_split): ConfigError
/// naming the file and the setting for one polyhal does not implement.
bool tokenizer_lower_case(const RunConfig& config);

}  // namespace polyhal
