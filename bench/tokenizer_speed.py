#!/usr/bin/python3
"""Tokenization speed, polyhal against Hugging Face's tokenizers, side by
side in one run: the same tokenizer.json files (tests/data/tokenizer_pipeline:
WordPiece, byte-level BPE, Unigram with SentencePiece's Precompiled map),
the same lines (its varied corpus, repeated), each line encoded with special
tokens and offsets, no truncation. The peer at its fastest: encode_batch
(Rust, no Python per line), on one thread (RAYON_NUM_THREADS=1) and on all
CPUs (its Rayon pool); polyhal encodes line by line on one thread, then
with one shared tokenizer on as many threads.

  python3 -m venv build/ref-venv && build/ref-venv/bin/pip install tokenizers==0.22.1
  python3 bench/tokenizer_speed.py [--build build] [--repeats 200] [--python build/ref-venv/bin/python]
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer_pipeline")
KINDS = ("wordpiece", "bpe_byte_level", "unigram_precompiled")

PEER = r'''
import json, sys, time
from tokenizers import Tokenizer
path, corpus, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [l.rstrip("\n") for l in open(corpus, encoding="utf-8")] * reps
t = Tokenizer.from_file(path)
t.no_truncation(); t.no_padding()
start = time.perf_counter(); encodings = t.encode_batch(lines); took = time.perf_counter() - start
print(json.dumps({"tokens": sum(len(e.ids) for e in encodings), "seconds": took}))
'''


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--python", default=os.path.join(ROOT, "build", "ref-venv", "bin", "python"))
    a = p.parse_args()
    corpus = os.path.join(DATA, "corpus.txt")
    threads = str(len(os.sched_getaffinity(0)))
    print(f"{'tokenizer':22} {'tokens':>9} {'polyhal 1 thr':>14} {'tokenizers 1 thr':>17} "
          f"{'polyhal batch':>14} {'tokenizers batch':>17}   (tokens/s, {threads} CPUs)")
    for kind in KINDS:
        path = os.path.join(DATA, kind, "tokenizer.json")
        ours = json.loads(subprocess.check_output(
            [os.path.join(a.build, "bench", "polyhal_tokenizer_bench"), path, corpus,
             str(a.repeats), threads]))
        peer = lambda n: json.loads(subprocess.check_output(  # noqa: E731
            [a.python, "-c", PEER, path, corpus, str(a.repeats)],
            env={**os.environ, "RAYON_NUM_THREADS": n}))
        one, every = peer("1"), peer(threads)
        if ours["tokens"] != one["tokens"]:
            raise SystemExit(f"{kind}: {ours['tokens']} tokens against {one['tokens']}")
        print(f"{kind:22} {ours['tokens']:>9} {ours['tokens'] / ours['one_thread_s']:>14,.0f} "
              f"{one['tokens'] / one['seconds']:>17,.0f} {ours['tokens'] / ours['batch_s']:>14,.0f} "
              f"{every['tokens'] / every['seconds']:>17,.0f}")


if __name__ == "__main__":
    main()
