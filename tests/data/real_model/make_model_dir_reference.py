#!/usr/bin/env python3
"""Writes model_dir_lines.txt and model_dir_reference.safetensors for
tests/real_model_test.cpp's ModelDir tests: what sentence-transformers'
SentenceTransformer(DIR).encode() gives for three forms of the fetched
all-MiniLM-L6-v2 directory, read as the library reads it (its
max_seq_length of 256 from sentence_bert_config.json, its modules.json):

- "as_shipped": the directory as scripts/fetch-real-model.sh caches it
  (mean pooling, Normalize);
- "no_normalize": modules.json without the Normalize module (as
  paraphrase-MiniLM-L3-v2 ships: no L2 normalisation);
- "no_pooler": model.safetensors without bert.pooler.dense.* / pooler.dense.*
  (a model saved without its pooler); the library loads it and its
  embeddings equal as_shipped's (checked here).

The lines: model_dir_lines.txt, sentences of tests/data/real_model/sentences.txt
joined into lines of about 20, 100, 200 and 400 tokens, so that truncation at
128 (polyhal's old default) and at 256 (the model's) both matter.
"lengths" holds each line's token count after the library's truncation.

Pinned versions: the peers' virtual environment (bench/peers-venv.sh, with
sentence-transformers 6.2.0, transformers 5.23.0, torch 2.15.0):
  build/peer-venv/bin/python tests/data/real_model/make_model_dir_reference.py build/models/all-MiniLM-L6-v2
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from sentence_transformers import SentenceTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = [20, 100, 200, 400, 140, 300, 60, 260]


def make_lines(model):
    with open(os.path.join(HERE, "sentences.txt"), encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f][:1100]  # the English ones
    tokenizer = model.tokenizer
    lines, current, i = [], [], 0
    for target in TARGETS:
        current = []
        while len(tokenizer(" ".join(current))["input_ids"]) < target:
            current.append(sentences[i % len(sentences)])
            i += 1
        lines.append(" ".join(current))
    return lines


def variant(src, out, name):
    dst = os.path.join(out, name)
    shutil.copytree(src, dst)
    if name == "no_normalize":
        with open(os.path.join(dst, "modules.json")) as f:
            modules = json.load(f)
        modules = [m for m in modules if m["type"] != "sentence_transformers.models.Normalize"]
        with open(os.path.join(dst, "modules.json"), "w") as f:
            json.dump(modules, f, indent=2)
    if name == "no_pooler":
        weights = load_file(os.path.join(dst, "model.safetensors"))
        kept = {k: v for k, v in weights.items() if "pooler." not in k}
        assert len(kept) == len(weights) - 2, "expected a pooler weight and bias"
        save_file(kept, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    return dst


def main():
    model_dir = sys.argv[1]
    shipped = SentenceTransformer(model_dir, device="cpu")
    assert shipped.max_seq_length == 256, shipped.max_seq_length
    lines = make_lines(shipped)
    with open(os.path.join(HERE, "model_dir_lines.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    tensors = {}
    lengths = [min(len(shipped.tokenizer(line)["input_ids"]), 256) for line in lines]
    tensors["lengths"] = np.array(lengths, dtype=np.int32)
    with tempfile.TemporaryDirectory() as out:
        for name in ["as_shipped", "no_normalize", "no_pooler"]:
            path = model_dir if name == "as_shipped" else variant(model_dir, out, name)
            model = SentenceTransformer(path, device="cpu")
            with torch.no_grad():
                tensors[f"embeddings.{name}"] = model.encode(
                    lines, batch_size=4, convert_to_numpy=True).astype(np.float32)
    norms = np.linalg.norm(tensors["embeddings.no_normalize"], axis=1)
    assert np.all(np.abs(norms - 1) > 1e-2), f"no_normalize still normalised: {norms}"
    worst = float(np.abs(tensors["embeddings.no_pooler"] - tensors["embeddings.as_shipped"]).max())
    assert worst < 1e-6, f"without the pooler the embeddings differ by {worst}"
    import sentence_transformers, transformers
    save_file(tensors, os.path.join(HERE, "model_dir_reference.safetensors"), metadata={
        "torch": torch.__version__, "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "lines": str(len(lines)), "max_seq_length": "256"})
    print(f"wrote {len(lines)} lines of {lengths} tokens (after truncation at 256)")


if __name__ == "__main__":
    main()
