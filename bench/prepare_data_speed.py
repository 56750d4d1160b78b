#!/usr/bin/python3
"""Throughput of `polyhal prepare-data` (text -> MLPerf HDF5) with 1 thread
and with every core, side by side in one run, in MB of text per second and
per second per core; 4 shards in both (the same files), so instances are
built in parallel too.

Corpus: generated English-like text (a Zipf-distributed vocabulary of
syllable words, sentences of 5-45 words, documents of 5-40 sentences, one
sentence a line, blank lines between documents), and a WordPiece vocabulary
of the 20,000 most frequent words plus every syllable as a "##" piece, so
rarer words split into several pieces as Wikipedia's do with BERT's
vocabulary. BERT's reference script (TensorFlow) is not available on Debian,
so no peer runs beside it.

  /usr/bin/python3 bench/prepare_data_speed.py [--build build] [--megabytes 20]
                                               [--dupe-factor 5] [--max-seq-len 128]
"""
import argparse
import os
import random
import re
import subprocess
import tempfile
import time

SYLLABLES = [c + v for c in "bcdfghklmnprstvwz" for v in ["a", "e", "i", "o", "u", "ai", "ou"]]


def make_corpus(path, megabytes, seed=3):
    rng = random.Random(seed)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.choice([1, 1, 2, 2, 2, 3, 3, 4])))
             for _ in range(60000)]
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf
    target = megabytes * 1_000_000
    written = 0
    with open(path, "w") as f:
        while written < target:
            for _ in range(rng.randint(5, 40)):
                n = rng.randint(5, 45)
                line = " ".join(rng.choices(words, weights, k=n)).capitalize() + rng.choice(".!?")
                f.write(line + "\n")
                written += len(line) + 1
            f.write("\n")
            written += 1
    return words


def make_vocab(path, words):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "!", "?", ","]
    vocab += words[:20000] + SYLLABLES + ["##" + s for s in SYLLABLES]
    with open(path, "w") as f:
        f.write("\n".join(dict.fromkeys(vocab)) + "\n")


def run(build, corpus, vocab, out, threads, dupe, seq):
    start = time.perf_counter()
    result = subprocess.run(
        [os.path.join(build, "launcher", "polyhal"), "prepare-data", "--input", corpus, "--vocab", vocab,
         "--output", out, "--threads", str(threads), "--dupe-factor", str(dupe), "--max-seq-len", str(seq),
         "--max-predictions", str(max(1, round(seq * 0.15))), "--shards", "4"],
        check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    instances = int(re.search(r"made (\d+) instances", result.stdout).group(1))
    return seconds, instances


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    parser.add_argument("--megabytes", type=int, default=20)
    parser.add_argument("--corpus", help="a text file to use instead of generating one (needs --vocab)")
    parser.add_argument("--vocab")
    parser.add_argument("--dupe-factor", type=int, default=5)
    parser.add_argument("--max-seq-len", type=int, default=128)
    args = parser.parse_args()
    cores = os.cpu_count()
    with tempfile.TemporaryDirectory() as tmp:
        corpus, vocab = os.path.join(tmp, "corpus.txt"), os.path.join(tmp, "vocab.txt")
        if args.corpus:
            corpus, vocab = args.corpus, args.vocab
        else:
            make_vocab(vocab, make_corpus(corpus, args.megabytes))
        megabytes = os.path.getsize(corpus) / 1e6
        print(f"corpus: {megabytes:.1f} MB {'given' if args.corpus else 'generated'}; dupe factor {args.dupe_factor}, "
              f"seq {args.max_seq_len}, {cores} cores\n")
        print("| threads | instances | seconds | MB/s | MB/s per core |")
        print("|---|---|---|---|---|")
        for threads in (1, cores):
            seconds, instances = run(args.build, corpus, vocab, os.path.join(tmp, f"out{threads}"), threads,
                                     args.dupe_factor, args.max_seq_len)
            rate = megabytes / seconds
            print(f"| {threads} | {instances} | {seconds:.1f} | {rate:.2f} | {rate / threads:.2f} |")


if __name__ == "__main__":
    main()
