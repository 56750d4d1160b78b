// A tokenizer.json read whole as its pipeline (normaliser, pre-tokenizer,
// model, post-processor, decoder, added tokens), and the same bytes as a
// SentencePiece model (sentencepiece.bpe.model, XLM-R's slow file): a file
// that reads is then asked to encode a fixed mix of scripts, alone and as a
// pair, and decode.
#include <string>

#include "fuzz_input.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (const char* name : {"tokenizer.json", "sentencepiece.bpe.model"}) {
    const auto file = polyhal::fuzz::as_file(name, data, size);
    try {
      const auto tokenizer = polyhal::open_tokenizer({file, {}});
      const auto e =
          tokenizer->encode("Héllo, wörld! 你好 😀  x\ty <s>[CLS]", std::string("ok"), 16);
      (void)tokenizer->decode(e.input_ids);
      (void)tokenizer->words("a  b");
    } catch (const polyhal::Error&) {
    }
  }
  return 0;
}
