"""Writes the tokenizer.json files of each kind and their reference
encodings with Hugging Face's tokenizers library, for the pipeline
conformance test (tests/tokenizer_pipeline_test.cpp). No model of these
kinds can be fetched here, so each is trained offline on the test corpora
and saved as the hub's files are made:

- bpe_byte_level/tokenizer.json: RoBERTa's layout: byte-level BPE (merges),
  ByteLevel pre-tokenizer and decoder, RobertaProcessing (<s> a </s></s> b
  </s>), trained with tokenizers' BpeTrainer;
- unigram_precompiled/tokenizer.json: XLM-R's layout: a SentencePiece
  Unigram model trained with sentencepiece (nmt_nfkc normalisation), then
  converted by transformers' own XLMRobertaConverter, which writes the
  Precompiled normaliser (SentencePiece's compiled character map), the
  Metaspace pre-tokenizer and the template post-processor as the hub's
  XLM-R files have them;
- unigram_nmt/tokenizer.json: a Unigram trained by tokenizers' own
  SentencePieceUnigramTokenizer, whose normaliser is Nmt, NFKC and a
  Replace of runs of spaces (the layout of the Unigram and SentencePiece
  BPE tokenizers people train with tokenizers), Metaspace, RobertaProcessing;
- wordpiece/tokenizer.json: ../tokenizer_json/bert_uncased's, re-read;
- roberta_slow_files/: the byte-level BPE as RoBERTa's slow files
  (vocab.json, merges.txt, tokenizer_config.json), the reference what
  transformers' RobertaTokenizerFast converts them to;
- xlmr_slow_files/: the Unigram's sentencepiece.bpe.model (XLM-R's slow
  file) with its tokenizer_config.json, the reference what
  XLMRobertaTokenizerFast converts it to;
- wordpiece_added/, unigram_added/: the WordPiece and the Unigram with
  added tokens of every kind (normalized ones, matched in the normalised
  text, and raw ones; single_word, lstrip, rstrip, special), on the lines
  of added_lines.txt, which put them beside words, Unicode spaces, each
  other and the normaliser's rewrites.

reference.jsonl: for each kind and each line of corpus.txt (varied real
text: many scripts, emoji, control and private-use characters, long words,
accents, CJK), the ids and byte offsets without special tokens, the framed
ids with special tokens, and every neighbour pair framed and truncated
longest first at 8, 16 and 32 tokens (ids, type ids, offsets), and the
windows of WINDOWS' truncations with their overflowing encodings (every
fourth line, which keeps the file small).

  python3 -m venv /tmp/ref && /tmp/ref/bin/pip install tokenizers==0.22.1 \\
      sentencepiece==0.2.0 transformers==4.57.1 protobuf==5.29.3
  /tmp/ref/bin/python tests/data/tokenizer_pipeline/make_pipeline_tokenizers.py [KIND ...]

With kinds named, only those are remade (the others' files and records stay).
"""
import json
import os
import shutil
import tempfile

import sentencepiece as spm
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import RobertaTokenizerFast, XLMRobertaTokenizer, XLMRobertaTokenizerFast
from transformers.convert_slow_tokenizer import XLMRobertaConverter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PAIR_LENGTHS = (8, 16, 32)
# (max_length, stride, strategy, direction, pair): question answering's
# windows (only_second with a stride), the other strategies and the left end.
WINDOWS = ((24, 4, "only_second", "right", True), (16, 2, "longest_first", "left", True),
           (12, 3, "only_first", "right", False), (10, 0, "longest_first", "right", False))


def corpus_lines():
    with open(os.path.join(HERE, "corpus.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def training_text():
    """The corpus and the other test texts, for the trainers."""
    texts = corpus_lines() * 3
    for name in ("tests/data/real_model/sentences.txt", "tests/data/corpus/text/part-0.txt",
                 "tests/data/corpus/text/part-1.txt"):
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            texts += [line.rstrip("\n") for line in f if line.strip()]
    return texts


def make_bpe(out_dir):
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2,
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(training_text(), trainer)
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0),
                                                            trim_offsets=True,
                                                            add_prefix_space=False)
    os.makedirs(out_dir, exist_ok=True)
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"))


def make_unigram(out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "train.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n".join(training_text()) + "\n")
        prefix = os.path.join(tmp, "spm")
        spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=1500,
                                       model_type="unigram", normalization_rule_name="nmt_nfkc",
                                       character_coverage=0.9995, byte_fallback=False,
                                       unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                       seed_sentencepiece_size=20000, num_threads=1,
                                       minloglevel=2)
        slow = XLMRobertaTokenizer(vocab_file=prefix + ".model")
        fast = XLMRobertaConverter(slow).converted()
        slow_dir = os.path.join(HERE, "xlmr_slow_files")
        os.makedirs(slow_dir, exist_ok=True)
        shutil.copy(prefix + ".model", os.path.join(slow_dir, "sentencepiece.bpe.model"))
        with open(os.path.join(slow_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"tokenizer_class": "XLMRobertaTokenizer"}, f)
    os.makedirs(out_dir, exist_ok=True)
    fast.save(os.path.join(out_dir, "tokenizer.json"))


def make_unigram_nmt(out_dir):
    from tokenizers import SentencePieceUnigramTokenizer
    unigram = SentencePieceUnigramTokenizer()
    unigram.train_from_iterator(training_text(), vocab_size=1200, unk_token="<unk>",
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    unigram._tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    os.makedirs(out_dir, exist_ok=True)
    unigram.save(os.path.join(out_dir, "tokenizer.json"))


def make_roberta_slow_files(out_dir):
    """The byte-level BPE as RoBERTa's slow files: vocab.json, merges.txt and a
    tokenizer_config.json, no tokenizer.json (what transformers' fast
    tokenizer converts with its RobertaConverter)."""
    pipeline = json.load(open(os.path.join(HERE, "bpe_byte_level", "tokenizer.json"),
                              encoding="utf-8"))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(pipeline["model"]["vocab"], f, ensure_ascii=False)
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in pipeline["model"]["merges"]))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "RobertaTokenizer", "add_prefix_space": False}, f)


def slow_files_tokenizer(out_dir):
    fast = RobertaTokenizerFast(vocab_file=os.path.join(out_dir, "vocab.json"),
                                merges_file=os.path.join(out_dir, "merges.txt"))
    return fast.backend_tokenizer


def make_wordpiece(out_dir):
    tokenizer = Tokenizer.from_file(os.path.join(ROOT, "tests/data/tokenizer_json/bert_uncased/"
                                                 "tokenizer.json"))
    os.makedirs(out_dir, exist_ok=True)
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"))


def with_added(source, tokens, special, out_dir):
    """`source`'s tokenizer.json with `tokens` and `special` tokens added."""
    tokenizer = Tokenizer.from_file(os.path.join(HERE, source, "tokenizer.json"))
    tokenizer.add_tokens(tokens)
    tokenizer.add_special_tokens(special)
    os.makedirs(out_dir, exist_ok=True)
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"))


def make_wordpiece_added(out_dir):
    # BertNormalizer lowercases and strips accents: "Hello World" and "Café"
    # are matched as "hello world" and "cafe" in the normalised text.
    with_added("wordpiece", [
        AddedToken("Hello World", normalized=True),
        AddedToken("Café", normalized=True),
        AddedToken("zz", normalized=True, single_word=True),
        AddedToken("[NEW]", normalized=False, single_word=True),
        AddedToken("<x>", normalized=False, lstrip=True, rstrip=True),
        AddedToken("ab", normalized=False),
        AddedToken("abc", normalized=True),
    ], [AddedToken("[SPECIAL]", normalized=False, special=True)], out_dir)


def make_unigram_added(out_dir):
    # The Precompiled map is NFKC: "①②" and "ﬁne" are matched as "12" and "fine".
    with_added("unigram_precompiled", [
        AddedToken("①②", normalized=True),
        AddedToken("ﬁne", normalized=True, single_word=True),
        AddedToken("NEW", normalized=False, rstrip=True),
        AddedToken("とう", normalized=False, lstrip=True),
    ], [AddedToken("<special>", normalized=False, special=True, lstrip=True)], out_dir)


def byte_offsets(text, offsets):
    """Python's char offsets as UTF-8 byte offsets into `text`."""
    starts = [0]
    for c in text:
        starts.append(starts[-1] + len(c.encode("utf-8")))
    return [[starts[a], starts[b]] for a, b in offsets]


def encoding_record(enc, text_a, text_b=None):
    """ids, type ids and byte offsets (of the text each token came from)."""
    offsets = []
    for (start, end), seq in zip(enc.offsets, enc.sequence_ids):
        if seq is None:
            offsets.append([0, 0])
        else:
            offsets.append(byte_offsets(text_a if seq == 0 else text_b, [(start, end)])[0])
    return {"ids": enc.ids, "types": enc.type_ids, "offsets": offsets,
            "sequence": [-1 if s is None else s for s in enc.sequence_ids]}


def references(kind, path, lines):
    if path.endswith("vocab.json"):
        tokenizer = slow_files_tokenizer(os.path.dirname(path))
    elif path.endswith(".model"):  # what XLMRobertaTokenizerFast converts the slow file to
        tokenizer = XLMRobertaTokenizerFast(vocab_file=path).backend_tokenizer
    else:
        tokenizer = Tokenizer.from_file(path)
    records = []
    for i, line in enumerate(lines):
        tokenizer.no_truncation()
        bare = tokenizer.encode(line, add_special_tokens=False)
        framed = tokenizer.encode(line)
        record = {"kind": kind, "line": i, "bare": encoding_record(bare, line),
                  "framed": encoding_record(framed, line), "pairs": []}
        partner = lines[(i + 1) % len(lines)]
        for length in PAIR_LENGTHS:
            tokenizer.enable_truncation(max_length=length, strategy="longest_first")
            pair = tokenizer.encode(line, partner)
            record["pairs"].append({"max_length": length,
                                    **encoding_record(pair, line, partner)})
        record["windows"] = []
        for max_length, stride, strategy, direction, pair in WINDOWS if i % 4 == 0 else ():
            try:
                tokenizer.enable_truncation(max_length=max_length, stride=stride,
                                            strategy=strategy, direction=direction)
                enc = tokenizer.encode(line, partner) if pair else tokenizer.encode(line)
            except BaseException as e:  # the library refuses (a Rust panic): polyhal must too
                record["windows"].append({"refused": str(e)[:80]})
                continue
            texts = (line, partner) if pair else (line, None)
            record["windows"].append(
                {"max_length": max_length, "stride": stride, "strategy": strategy,
                 "direction": direction, "pair": pair,
                 "encodings": [encoding_record(e, *texts) for e in [enc] + enc.overflowing]})
        tokenizer.no_truncation()
        record["decoded"] = tokenizer.decode(framed.ids, skip_special_tokens=True)
        records.append(record)
    return records


def added_lines():
    with open(os.path.join(HERE, "added_lines.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main():
    import sys
    kinds = {"bpe_byte_level": make_bpe, "unigram_precompiled": make_unigram,
             "unigram_nmt": make_unigram_nmt,
             "wordpiece": make_wordpiece, "roberta_slow_files": make_roberta_slow_files,
             "xlmr_slow_files": lambda out_dir: None,  # written by make_unigram
             "wordpiece_added": make_wordpiece_added, "unigram_added": make_unigram_added}
    only = sys.argv[1:]
    path = os.path.join(HERE, "reference.jsonl")
    kept = {}
    if only:
        with open(path, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                kept.setdefault(record["kind"], []).append(line)
    with open(path, "w", encoding="utf-8") as out:
        for kind, make in kinds.items():
            if only and kind not in only:
                out.writelines(kept.get(kind, []))
                continue
            make(os.path.join(HERE, kind))
            file = {"roberta_slow_files": "vocab.json",
                    "xlmr_slow_files": "sentencepiece.bpe.model"}.get(kind, "tokenizer.json")
            lines = added_lines() if kind.endswith("_added") else corpus_lines()
            for record in references(kind, os.path.join(HERE, kind, file), lines):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
