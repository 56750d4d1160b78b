#!/usr/bin/python3
"""A GLUE-format classification task from real prose, for fine-tuning the
parity run's pre-trained models: which part of the Linux kernel's
documentation (linux-doc-6.1) a sentence comes from, networking (label 1) or
filesystems (label 0). Written as SST-2's TSV files (a `sentence<TAB>label`
header, one sentence a line), so `task: glue`, `glue_task: sst-2` and
transformers' sequence classification read them as they are.

Train and dev come from different documents (every 5th file goes to dev), so
no dev sentence's paragraph is seen in training; both are balanced (the same
count per label, drawn with a fixed seed) and shuffled.

  make_glue_task.py OUT_DIR [--train-per-label 3000] [--dev-per-label 800]
      -> OUT_DIR/train.tsv, OUT_DIR/dev.tsv
"""
import argparse
import gzip
import os
import random

import make_corpus

LABELS = {"filesystems": 0, "networking": 1}


def sentences_by_split(docs, part, min_words, max_words):
    files = []
    for root, _, names in os.walk(os.path.join(docs, part)):
        files += [os.path.join(root, n) for n in names
                  if n.endswith((".rst", ".rst.gz", ".txt", ".txt.gz"))]
    out = {"train": [], "dev": []}
    for n, path in enumerate(sorted(files)):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            text = f.read()
        for s in make_corpus.sentences(make_corpus.prose_lines(text)):
            if min_words <= len(s.split()) <= max_words:
                out["dev" if n % 5 == 4 else "train"].append(" ".join(s.split()))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--docs", default=make_corpus.DOCS)
    parser.add_argument("--train-per-label", type=int, default=3000)
    parser.add_argument("--dev-per-label", type=int, default=800)
    parser.add_argument("--min-words", type=int, default=6)
    parser.add_argument("--max-words", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = {"train": [], "dev": []}
    for part, label in LABELS.items():
        found = sentences_by_split(args.docs, part, args.min_words, args.max_words)
        for split, want in (("train", args.train_per_label), ("dev", args.dev_per_label)):
            unique = sorted(set(found[split]))
            if len(unique) < want:
                raise SystemExit(f"{part}: {len(unique)} {split} sentences, {want} wanted")
            rows[split] += [(s, label) for s in rng.sample(unique, want)]
    os.makedirs(args.out, exist_ok=True)
    for split, items in rows.items():
        rng.shuffle(items)
        with open(os.path.join(args.out, f"{split}.tsv"), "w") as f:
            f.write("sentence\tlabel\n")
            f.writelines(f"{s}\t{label}\n" for s, label in items)
        print(f"{split}: {len(items)} sentences")


if __name__ == "__main__":
    main()
