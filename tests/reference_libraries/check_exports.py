#!/usr/bin/env python3
"""Files polyhal writes, opened by the libraries users already have.

  check_exports.py POLYHAL_LAUNCHER REPO_ROOT WORK_DIR

Runs polyhal (pre-training with checkpoints, TensorBoard and metrics; SQuAD
and GLUE fine-tuning with their exports; prepare-data and pack), then checks:
- the exports load with transformers (AutoModelForPreTraining,
  ...ForQuestionAnswering, ...ForSequenceClassification) with no missing or
  unexpected keys, and give polyhal's logits (polyhal's text inference on
  the same text) within f32 tolerance; AutoTokenizer loads the exported
  vocabulary and settings and tokenizes as polyhal did;
- checkpoints and exports open with the safetensors library;
- TensorBoard's events read with tbparse give the metrics file's losses;
- prepare-data's and pack's files read with h5py in the documented layout.
Prints one line per check; exits 1 on the first failure.
"""
import json
import os
import random
import subprocess
import sys

import h5py
import numpy as np
import torch
from safetensors.numpy import load_file
from tbparse import SummaryReader
from transformers import (AutoModelForPreTraining, AutoModelForQuestionAnswering,
                          AutoModelForSequenceClassification, AutoTokenizer, BertTokenizer)

LAUNCHER, ROOT, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
VOCAB = os.path.join(ROOT, "tests/data/corpus/vocab.txt")
V = sum(1 for _ in open(VOCAB, encoding="utf-8"))
TOLERANCE = 1e-4


def ok(what):
    print(f"ok: {what}")


def fail(what):
    print(f"FAIL: {what}")
    sys.exit(1)


def polyhal(name, config, *arguments):
    path = os.path.join(WORK, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(config)
    result = subprocess.run([LAUNCHER, "run", "--config", path, *arguments], cwd=WORK,
                            capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"polyhal {name}: exit {result.returncode}\n{result.stdout}{result.stderr}")
    return result.stdout


def infer(name, model_dir, head, text):
    """polyhal's text inference with `head` on one line; its JSON record."""
    with open(os.path.join(WORK, name + ".txt"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    polyhal(name + ".yaml", f"""backend: cpu
task: inference
model: {{hf_config: {model_dir}/config.json, weights: {model_dir}/model.safetensors, seq_len: 64,
        head: {head}}}
data: {{source: text, text_file: {name}.txt, vocab: {VOCAB}}}
inference: {{output: {name}.jsonl}}
""")
    with open(os.path.join(WORK, name + ".jsonl"), encoding="utf-8") as f:
        return json.loads(f.readline())


def loads_cleanly(auto, model_dir, what):
    model, info = auto.from_pretrained(model_dir, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        fail(f"{what}: transformers reports {problems}")
    ok(f"{what} loads with transformers {auto.__name__}: no missing or unexpected keys")
    return model.eval()


def close(mine, theirs, what):
    mine, theirs = np.asarray(mine, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    worst = float(np.abs(mine - theirs).max())
    if not worst <= TOLERANCE:
        fail(f"{what}: max abs difference {worst:.3g} > {TOLERANCE}")
    ok(f"{what}: max abs difference {worst:.3g}")


def encode(tokenizer, record, text):
    """The ids AutoTokenizer gives, checked against polyhal's tokens."""
    a, _, b = text.partition("\t")
    encoded = tokenizer(a, b or None, max_length=64, padding="max_length", truncation=True,
                        return_tensors="pt")
    theirs = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    if theirs != record["tokens"]:
        fail(f"AutoTokenizer tokens {theirs[:12]} differ from polyhal's {record['tokens'][:12]}")
    return encoded


def pretraining():
    out = polyhal("pretrain.yaml", f"""backend: cpu
task: pretrain
model: {{preset: tiny, seq_len: 64, vocab_size: {V}}}
batch: {{micro: 4}}
data: {{source: pattern, seed: 3, max_predictions: 3}}
optimizer: {{name: lamb, learning_rate: 0.005}}
steps: 3
log: {{every: 1}}
checkpoint: {{dir: ck}}
""", "--tensorboard", "tb", "--metrics-out", "m.jsonl")
    hf = os.path.join(WORK, "ck/hf")
    for file in ["ck/checkpoint-00000003.safetensors", "ck/hf/model.safetensors"]:
        tensors = load_file(os.path.join(WORK, file))
        ok(f"{file} opens with the safetensors library ({len(tensors)} tensors)")
    model = loads_cleanly(AutoModelForPreTraining, hf, "pre-training export ck/hf")
    text = "the [MASK] was in the house\tshe said that it was"
    record = infer("mlm", hf, "pretraining", text)
    tokenizer = BertTokenizer(VOCAB, do_lower_case=True)  # the export has no vocabulary
    encoded = encode(tokenizer, record, text)
    with torch.no_grad():
        result = model(**encoded)
    close(record["nsp_logits"], result.seq_relationship_logits[0].numpy(), "NSP logits")
    for masked in record["masked_predictions"]:
        row = result.prediction_logits[0, masked["position"]].numpy()
        close([t["logit"] for t in masked["top"]],
              [row[tokenizer.convert_tokens_to_ids(t["token"])] for t in masked["top"]],
              f"MLM logits at position {masked['position']} (top 5)")
    # TensorBoard's events against the metrics file.
    losses = [r["loss"] for r in map(json.loads, open(os.path.join(WORK, "m.jsonl")))
              if r.get("event") == "step"]
    scalars = SummaryReader(os.path.join(WORK, "tb")).scalars
    tb = scalars[scalars.tag == "step/loss"].sort_values("step")["value"].tolist()
    close(tb, losses, f"TensorBoard step/loss read by tbparse vs metrics ({len(tb)} steps)")


def finetune(task, section):
    """Fine-tunes a tiny BERT for `task` from the pre-training export."""
    polyhal(f"{task}.yaml", f"""backend: cpu
task: {task}
model: {{preset: tiny, seq_len: 64, vocab_size: {V}}}
batch: {{micro: 4}}
data: {{vocab: {VOCAB}}}
optimizer: {{name: adamw, learning_rate: 0.001}}
checkpoint: {{init: ck/hf}}
finetune: {section}
""")


def squad():
    random.seed(1)
    words = [w for w in open(VOCAB, encoding="utf-8").read().split() if w.isalpha()]
    data = []
    for q in range(16):
        context_words = [random.choice(words) for _ in range(10)]
        at = random.randrange(9)
        context_words.insert(at, "key")
        context = " ".join(context_words)
        answer = context_words[at + 1]
        start = len(" ".join(context_words[:at + 1])) + 1
        data.append({"title": "t", "paragraphs": [{"context": context, "qas": [
            {"id": f"q{q}", "question": "what is after the key ?",
             "answers": [{"text": answer, "answer_start": start}]}]}]})
    with open(os.path.join(WORK, "train.json"), "w") as f:
        json.dump({"version": "1.1", "data": data}, f)
    finetune("squad", "{train_file: train.json, output_dir: squad, epochs: 1}")
    export = os.path.join(WORK, "squad/model")
    model = loads_cleanly(AutoModelForQuestionAnswering, export, "SQuAD export squad/model")
    tokenizer = AutoTokenizer.from_pretrained(export)
    ok(f"AutoTokenizer loads squad/model ({type(tokenizer).__name__}, lower case "
       f"{getattr(tokenizer, 'do_lower_case', None)})")
    text = "what is after the key ?\t" + data[0]["paragraphs"][0]["context"]
    record = infer("qa", export, "question_answering", text)
    encoded = encode(tokenizer, record, text)
    with torch.no_grad():
        result = model(**encoded)
    real = int(encoded["attention_mask"][0].sum())
    close(record["start_logits"][:real], result.start_logits[0, :real].numpy(), "QA start logits")
    close(record["end_logits"][:real], result.end_logits[0, :real].numpy(), "QA end logits")


def glue():
    random.seed(2)
    words = [w for w in open(VOCAB, encoding="utf-8").read().split() if w.isalpha()]
    rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for r in range(32):
        a, b = [" ".join(random.choice(words) for _ in range(6)) for _ in range(2)]
        rows.append(f"{r % 2}\t{2 * r}\t{2 * r + 1}\t{a}\t{b}")
    with open(os.path.join(WORK, "train.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    finetune("glue", "{glue_task: mrpc, train_file: train.tsv, output_dir: glue, epochs: 1}")
    export = os.path.join(WORK, "glue/model")
    model = loads_cleanly(AutoModelForSequenceClassification, export, "GLUE export glue/model")
    tokenizer = AutoTokenizer.from_pretrained(export)
    text = rows[1].split("\t")[3] + "\t" + rows[1].split("\t")[4]
    record = infer("cls", export, "classification", text)
    encoded = encode(tokenizer, record, text)
    with torch.no_grad():
        result = model(**encoded)
    close(record["logits"], result.logits[0].numpy(), "classification logits")


def hdf5():
    subprocess.run([LAUNCHER, "prepare-data", "--input", os.path.join(ROOT, "tests/data/corpus/text"),
                    "--vocab", VOCAB, "--output", os.path.join(WORK, "hdf5"), "--max-seq-len", "64",
                    "--max-predictions", "10", "--dupe-factor", "1", "--pack", "spfhp"],
                   check=True, capture_output=True)
    names = {"input_ids": 64, "input_mask": 64, "segment_ids": 64, "masked_lm_positions": 10,
             "masked_lm_ids": 10, "next_sentence_labels": None}
    files = sorted(f for f in os.listdir(os.path.join(WORK, "hdf5")) if f.endswith(".hdf5"))
    for name in files:
        with h5py.File(os.path.join(WORK, "hdf5", name), "r") as f:
            rows = f["input_ids"].shape[0]
            for dataset, width in names.items():
                shape = f[dataset].shape
                if shape != ((rows,) if width is None else (rows, width)):
                    fail(f"{name}: {dataset} has shape {shape}")
    ok(f"prepare-data's {len(files)} files read with h5py in MLPerf's layout")
    packed = sorted(f for f in os.listdir(os.path.join(WORK, "hdf5/packed")) if f.endswith(".hdf5"))
    for name in packed:
        with h5py.File(os.path.join(WORK, "hdf5/packed", name), "r") as f:
            missing = {"packed_input_ids", "packed_segment_ids", "packed_input_mask",
                       "packed_position_ids", "packed_masked_lm_positions", "packed_masked_lm_ids",
                       "packed_masked_lm_weights", "packed_next_sentence_positions",
                       "packed_next_sentence_labels", "packed_next_sentence_weights"} - set(f.keys())
            if missing:
                fail(f"packed {name}: missing {sorted(missing)}")
    ok(f"pack's {len(packed)} files read with h5py in the documented packed layout")


def main():
    os.makedirs(WORK, exist_ok=True)
    pretraining()
    squad()
    glue()
    hdf5()
    print("every check passed")


if __name__ == "__main__":
    main()
