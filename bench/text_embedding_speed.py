#!/usr/bin/env python3
"""Sentence embeddings of real text, side by side in one run, same CPU,
threads, model and lines: polyhal's text inference on packed rows (the
default) and one line per row (inference.packed: false), against
sentence-transformers' encode() (PyTorch; it sorts the lines by length and
pads each batch to its longest, its own fast path) and ONNX Runtime on the
transformer optimizer's fused graph, fed as sentence-transformers feeds it
(length-sorted batches padded to their longest). Every figure is lines per
second over the whole pass, tokenizing included, model loading not; the
table also shows the share of computed tokens that were padding and the
worst cosine against sentence-transformers.

  build/peer-venv/bin/python bench/text_embedding_speed.py [--build build] [--threads N]
      [--lines tests/data/real_model/sentences.txt] [--batch 32] [--rows 8]

Needs scripts/build.sh, scripts/fetch-real-model.sh and the peers
(bench/peers-venv.sh, which installs sentence-transformers 6.2.0 too).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def polyhal(build, model, lines_file, threads, rows, packed, work):
    out = os.path.join(work, f"polyhal-{packed}.jsonl")
    config = os.path.join(work, f"embed-{packed}.yaml")
    with open(config, "w") as f:
        f.write(f"backend: cpu\ntask: inference\ndevice: {{threads: {threads}}}\nmodel: {{dir: {model}}}\n"
                f"batch: {{micro: {rows}}}\ndata: {{source: text, text_file: {lines_file}}}\n"
                f"inference: {{output: {out}, packed: {'true' if packed else 'false'}}}\n")
    r = subprocess.run([os.path.join(build, "launcher", "polyhal"), "run", "--config", config],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"polyhal failed: {r.stderr or r.stdout}")
    rate = float(re.search(r"measured: \d+ batches in [0-9.]+ s: ([0-9.]+) sequences/s", r.stdout).group(1))
    real, computed = map(int, re.search(r"tokens: (\d+) in the lines, (\d+) computed", r.stdout).groups())
    with open(out) as f:
        embeddings = np.array([json.loads(line)["embedding"] for line in f], dtype=np.float32)
    return rate, 1 - real / computed, embeddings


def sorted_batches(tokenizer, lines, batch, max_length):
    """sentence-transformers' order: longest first, batches padded to their longest."""
    order = np.argsort([-len(line) for line in lines], kind="stable")
    for first in range(0, len(lines), batch):
        chosen = order[first:first + batch]
        encoded = tokenizer([lines[i] for i in chosen], padding=True, truncation=True,
                            max_length=max_length, return_tensors="np")
        yield chosen, encoded


def mean_pool_normalise(hidden, mask):
    mask = mask[..., None].astype(np.float32)
    pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
    return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--lines", default=os.path.join(ROOT, "tests", "data", "real_model", "sentences.txt"))
    p.add_argument("--batch", type=int, default=32, help="the peers' lines per batch")
    p.add_argument("--rows", type=int, default=8, help="polyhal's rows of 256 tokens per batch")
    a = p.parse_args()
    model = os.path.join(a.build, "models", "all-MiniLM-L6-v2")
    with open(a.lines, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    import torch
    torch.set_num_threads(a.threads)
    from sentence_transformers import SentenceTransformer
    import sentence_transformers, onnxruntime as ort
    st = SentenceTransformer(model, device="cpu")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        st.encode(lines[:64], batch_size=a.batch)  # warm-up
        start = time.perf_counter()
        reference = st.encode(lines, batch_size=a.batch, convert_to_numpy=True)
        rows.append((f"sentence-transformers {sentence_transformers.__version__} (PyTorch {torch.__version__})",
                     len(lines) / (time.perf_counter() - start), None, reference))
        # ONNX Runtime: the fused encoder, fed as sentence-transformers feeds it.
        from peers_bench import export_onnx
        from onnxruntime.transformers.optimizer import optimize_model
        raw, fused = os.path.join(work, "minilm.onnx"), os.path.join(work, "minilm-fused.onnx")
        export_onnx(model, 16, raw)
        optimize_model(raw, model_type="bert", num_heads=12, hidden_size=384).save_model_to_file(fused)
        options = ort.SessionOptions()
        options.intra_op_num_threads = a.threads
        session = ort.InferenceSession(fused, options, providers=["CPUExecutionProvider"])
        tokenizer = st.tokenizer

        def onnx_pass(subset):
            out = np.zeros((len(subset), 384), dtype=np.float32)
            for chosen, enc in sorted_batches(tokenizer, subset, a.batch, st.max_seq_length):
                feed = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
                hidden = session.run(None, feed)[0]
                out[chosen] = mean_pool_normalise(hidden, enc["attention_mask"])
            return out
        onnx_pass(lines[:64])
        start = time.perf_counter()
        theirs = onnx_pass(lines)
        rows.append((f"ONNX Runtime {ort.__version__} f32 (fused), length-sorted batches",
                     len(lines) / (time.perf_counter() - start), None, theirs))
        for packed in (True, False):
            rate, padding, mine = polyhal(a.build, model, a.lines, a.threads, a.rows, packed, work)
            rows.append((f"polyhal f32, {'packed rows' if packed else 'one line per row'}", rate, padding, mine))
    print(f"Sentence embeddings (all-MiniLM-L6-v2, max_seq_length 256) of {len(lines)} lines of "
          f"{os.path.relpath(a.lines, ROOT)}, {a.threads} threads, on {cpu}\n")
    print("| engine | lines/s | padding computed | worst cosine vs sentence-transformers |")
    print("|---|---|---|---|")
    for name, rate, padding, emb in rows:
        cos = float(np.min(np.sum(emb * reference, axis=1) /
                           (np.linalg.norm(emb, axis=1) * np.linalg.norm(reference, axis=1))))
        print(f"| {name} | {rate:.1f} | {'' if padding is None else f'{padding:.0%}'} | {cos:.6f} |")


if __name__ == "__main__":
    main()
