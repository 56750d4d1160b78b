"""Writes the tokenizer.json fixture and its reference ids with Hugging Face's
tokenizers library (the reference), for the tokenizer conformance test
(tests/tokenizer_test.cpp, TokenizerConformance.*) and the tokenizer.json
seam test (tests/real_model_test.cpp's TokenizerJsonAlone...):

- bert_uncased/tokenizer.json: BertWordPieceTokenizer over
  tests/data/corpus/vocab.txt, lower-casing, saved as current transformers
  saves a BERT's fast tokenizer (no vocab.txt beside it);
- reference.jsonl: one line per text of the fixed corpus (corpus.txt), the
  ids the library gives without special tokens, and for every pair of
  neighbours the framed ids truncated longest first to 16 tokens, twice:
  as the library truncates (its halves rule: the shorter side keeps
  target/2, the longer the rest) and as Google's _truncate_seq_pair
  (run_classifier.py, transformers' slow tokenizers: one token at a time
  from the longer, the second on a tie) truncates the library's ids.

  python3 -m venv /tmp/ref && /tmp/ref/bin/pip install tokenizers==0.22.1
  /tmp/ref/bin/python tests/data/tokenizer_json/make_tokenizer_json.py
"""
import json
import os

from tokenizers import BertWordPieceTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VOCAB = os.path.join(ROOT, "tests", "data", "corpus", "vocab.txt")


def main():
    tokenizer = BertWordPieceTokenizer(VOCAB, lowercase=True, clean_text=True,
                                       handle_chinese_chars=True, strip_accents=None)
    out_dir = os.path.join(HERE, "bert_uncased")
    os.makedirs(out_dir, exist_ok=True)
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"))
    texts = [line.rstrip("\n") for line in open(os.path.join(HERE, "corpus.txt"), encoding="utf-8")]
    with open(os.path.join(HERE, "reference.jsonl"), "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            ids = tokenizer.encode(text, add_special_tokens=False).ids
            partner = texts[(i + 1) % len(texts)]
            tokenizer.enable_truncation(16, strategy="longest_first")
            pair = tokenizer.encode(text, partner).ids
            tokenizer.no_truncation()
            a, b = list(ids), tokenizer.encode(partner, add_special_tokens=False).ids
            while len(a) + len(b) > 16 - 3:  # Google's _truncate_seq_pair
                (a if len(a) > len(b) else b).pop()
            cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
            one_at_a_time = [cls] + a + [sep] + b + [sep]
            f.write(json.dumps({"text": text, "ids": ids, "pair_with_next_16": pair,
                                "pair_with_next_16_one_at_a_time": one_at_a_time},
                               ensure_ascii=False) + "\n")
    print(f"wrote {out_dir}/tokenizer.json and reference.jsonl ({len(texts)} texts)")


if __name__ == "__main__":
    main()
