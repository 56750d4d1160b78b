#!/usr/bin/env python3
"""Writes run_squad/model.ckpt: the checkpoint Google's run_squad.py saves
after SQuAD fine-tuning, for the tiny BERT of tests/golden/bert_tiny: the
encoder under bert/..., the pre-trained pooler (bert/pooler/dense/*, which
run_squad.py keeps though SQuAD never reads it), the span head as
cls/squad/output_weights [2, hidden] and cls/squad/output_bias [2], and
global_step; kernels stored [in, out] as TensorFlow's dense layers store
them. Beside it run_squad/bert_config.json with dropouts that are not
BERT's defaults (hidden 0.2, attention 0.15), which a convert must carry.

TensorFlow's own file formats (a LevelDB table of BundleEntryProto records,
one data shard), written with the standard library and numpy by the writer
of tests/data/hostile_tf/make_hostile_checkpoints.py; polyhal's TfCheckpoint
tests read TensorFlow-written files of the same formats. The head's values
are a seeded pattern; the rest are tests/golden/bert_tiny/model.safetensors'.
Checked by hand against transformers: polyhal's convert of this checkpoint
loads with BertForQuestionAnswering.from_pretrained(..., output_loading_info=True)
with no missing and no unexpected keys.

  build/peer-venv/bin/python tests/data/tf_checkpoint/make_run_squad_checkpoint.py
"""
import json
import os
import struct
import sys

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "data", "hostile_tf"))
from make_hostile_checkpoints import crc32c, field, header, masked, table  # noqa: E402


def entry(shape, offset, size, crc, dtype=1):
    """A BundleEntryProto of any rank: DT_FLOAT (1) or DT_INT64 (9), shard 0."""
    dims = b"".join(field(2, 2, field(1, 0, d)) for d in shape)
    return (field(1, 0, dtype) + field(2, 2, dims) + field(4, 0, offset) + field(5, 0, size) +
            field(6, 5, crc))


def tf_name(hf):
    """Google's variable name and whether its kernel is stored transposed."""
    name = hf.replace("bert.encoder.layer.", "bert/encoder/layer_").replace(".", "/")
    name = name.replace("LayerNorm/weight", "LayerNorm/gamma").replace("LayerNorm/bias",
                                                                        "LayerNorm/beta")
    if name.endswith("_embeddings/weight"):
        return name[:-len("/weight")], False
    if name.endswith("/weight"):
        return name[:-len("/weight")] + "/kernel", True
    return name, False


def main():
    golden = load_file(os.path.join(ROOT, "tests", "golden", "bert_tiny", "model.safetensors"))
    variables = {}
    for hf, value in golden.items():
        if not hf.startswith("bert."):
            continue  # the pre-training heads: run_squad.py's checkpoint has none
        name, transposed = tf_name(hf)
        variables[name] = value.T.copy() if transposed else value
    hidden = golden["bert.embeddings.word_embeddings.weight"].shape[1]
    rng = np.random.default_rng(54)
    variables["cls/squad/output_weights"] = rng.normal(0, 0.02, (2, hidden)).astype(np.float32)
    variables["cls/squad/output_bias"] = np.array([0.25, -0.5], dtype=np.float32)
    shard, records = bytearray(), []
    for name in sorted(variables):
        data = np.ascontiguousarray(variables[name], dtype="<f4").tobytes()
        records.append((name.encode(), entry(variables[name].shape, len(shard), len(data),
                                             masked(crc32c(data)))))
        shard += data
    step = struct.pack("<q", 1000)
    records.append((b"global_step", entry((), len(shard), 8, masked(crc32c(step)), 9)))
    shard += step
    records.sort()
    out = os.path.join(HERE, "run_squad")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.ckpt.index"), "wb") as f:
        f.write(table([(b"", header())] + records))
    with open(os.path.join(out, "model.ckpt.data-00000-of-00001"), "wb") as f:
        f.write(bytes(shard))
    with open(os.path.join(ROOT, "tests", "golden", "bert_tiny", "config.json")) as f:
        hf_config = json.load(f)
    config = {key: hf_config[key] for key in hf_config if key in (
        "hidden_act", "hidden_size", "initializer_range", "intermediate_size",
        "max_position_embeddings", "num_attention_heads", "num_hidden_layers", "type_vocab_size",
        "vocab_size")}
    config.update(attention_probs_dropout_prob=0.15, hidden_dropout_prob=0.2)
    with open(os.path.join(out, "bert_config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(variables)} variables and global_step to {out}")


if __name__ == "__main__":
    main()
