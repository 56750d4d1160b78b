#!/usr/bin/python3
"""Golden files for evaluation during pre-training, written with PyTorch
independently of polyhal: the tiny BERT of make_bert_golden.py trained here
(Adam, full batch) on the MLPerf test files (tests/data/mlperf) until it
predicts part of the masked tokens, its weights, and its evaluation of those
files as MLPerf scores it: masked-LM accuracy = correctly predicted masked
tokens / masked tokens (masked_lm_weights 1), the mean masked-LM
cross-entropy per masked token, NSP accuracy and mean NSP cross-entropy.

Run from the repository root (needs python3-h5py):
  /usr/bin/python3 tests/golden/make_pretrain_eval_golden.py
"""
import glob
import json
import os

import h5py
import numpy as np
import torch

from make_bert_golden import CONFIG, OUT, Bert, write_safetensors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 6  # chosen so that part of the masked tokens (and NSP labels) are right


def read_mlperf(directory):
    parts = sorted(glob.glob(os.path.join(directory, "part-*.hdf5")))
    fields = {}
    for part in parts:
        with h5py.File(part, "r") as f:
            for name in f.keys():
                fields.setdefault(name, []).append(np.asarray(f[name]))
    return {name: torch.from_numpy(np.concatenate(v)).long() for name, v in fields.items()}


def evaluate(model, d):
    with torch.no_grad():
        _, _, mlm, nsp = model(d["input_ids"], d["segment_ids"], d["input_mask"])
    positions, ids = d["masked_lm_positions"], d["masked_lm_ids"]
    weights = (positions != 0)  # padding: position 0 is [CLS], never masked
    rows = torch.arange(positions.shape[0])[:, None].expand_as(positions)
    logits = mlm[rows[weights], positions[weights]]
    labels = ids[weights]
    mlm_loss = torch.nn.functional.cross_entropy(logits.double(), labels, reduction="sum")
    top2 = torch.topk(logits, 2, dim=-1).values
    nsp_labels = d["next_sentence_labels"].reshape(-1)
    nsp_loss = torch.nn.functional.cross_entropy(nsp.double(), nsp_labels, reduction="sum")
    return {
        "masked_tokens": int(labels.numel()),
        "sequences": int(nsp_labels.numel()),
        "mlm_accuracy": float((logits.argmax(-1) == labels).double().mean()),
        "mlm_loss": float(mlm_loss) / labels.numel(),
        "nsp_accuracy": float((nsp.argmax(-1) == nsp_labels).double().mean()),
        "nsp_loss": float(nsp_loss) / nsp_labels.numel(),
        # How far each prediction is from a tie: a test tolerance must stay below it.
        "smallest_top2_margin": float((top2[:, 0] - top2[:, 1]).min()),
        "smallest_nsp_margin": float((nsp[:, 0] - nsp[:, 1]).abs().min()),
    }


def main():
    torch.manual_seed(11)
    model = Bert(CONFIG)
    d = read_mlperf(os.path.join(ROOT, "tests", "data", "mlperf"))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    positions, ids = d["masked_lm_positions"], d["masked_lm_ids"]
    weights = (positions != 0)
    rows = torch.arange(positions.shape[0])[:, None].expand_as(positions)
    for _ in range(STEPS):
        _, _, mlm, nsp = model(d["input_ids"], d["segment_ids"], d["input_mask"])
        loss = torch.nn.functional.cross_entropy(mlm[rows[weights], positions[weights]],
                                                 ids[weights])
        loss = loss + torch.nn.functional.cross_entropy(nsp, d["next_sentence_labels"].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    write_safetensors(os.path.join(OUT, "eval_trained.safetensors"), model.hf_state_dict(),
                      torch.float32)
    result = evaluate(model, d)
    with open(os.path.join(OUT, "eval_golden.json"), "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
