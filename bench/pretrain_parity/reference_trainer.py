#!/usr/bin/env python3
"""The reference side of the pre-training parity run: Hugging Face
`transformers` BertForPreTraining trained as polyhal trains it, on the same
MLPerf HDF5 files, from the same initial weights, with the same batches,
masks, schedule and optimizer, writing metrics in polyhal's format.

- Data: the HDF5 files in sorted order, read in order (polyhal with
  data.shuffle false): micro-batch i is rows [i*B, (i+1)*B), wrapping at the
  end; masked_lm_positions 0 is padding (position 0 is [CLS]).
- Loss: mean masked-LM cross-entropy over the masked tokens plus mean NSP
  cross-entropy (BertForPreTraining's loss, as polyhal's).
- LAMB as NVIDIA's and polyhal's: bias-corrected Adam moments, decoupled
  weight decay and the trust ratio ||w|| / ||update|| except for biases and
  LayerNorm parameters (no clipping); schedule: linear warm-up, then
  polynomial decay to end_lr (power 1), polyhal's learning_rate_at.
- Evaluation every --eval-every steps and at the end: masked-LM accuracy as
  MLPerf defines it, NSP accuracy and the losses, dropout off.
- bf16: torch.autocast("cpu", torch.bfloat16) around the forward pass, f32
  master weights and optimizer (PyTorch's recommended CPU mixed precision).

  reference_trainer.py --init DIR --train DIR --eval DIR --steps N --batch B
      --lr LR --warmup W [--precision f32|bf16] --metrics OUT.jsonl
  reference_trainer.py --write-init DIR --preset mini --seed S   (the initial weights)
"""
import argparse
import glob
import json
import math
import os
import time

import h5py
import numpy as np
import torch
import transformers

PRESETS = {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8),
           "medium": (8, 512, 8), "base": (12, 768, 12)}


def bert_config(preset, vocab, dropout):
    layers, hidden, heads = PRESETS[preset]
    return transformers.BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                                   num_attention_heads=heads, intermediate_size=4 * hidden,
                                   max_position_embeddings=512, type_vocab_size=2,
                                   hidden_dropout_prob=dropout,
                                   attention_probs_dropout_prob=dropout, layer_norm_eps=1e-12,
                                   hidden_act="gelu", architectures=["BertForPreTraining"])


class Rows:
    """Every row of the HDF5 files, in order, as tensors per micro-batch."""

    def __init__(self, directory):
        parts = sorted(glob.glob(os.path.join(directory, "*.hdf5")))
        fields = {}
        for part in parts:
            with h5py.File(part, "r") as f:
                for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                             "masked_lm_ids", "next_sentence_labels"):
                    fields.setdefault(name, []).append(np.asarray(f[name]))
        self.f = {k: np.concatenate(v) for k, v in fields.items()}
        self.size = len(self.f["input_ids"])

    def batch(self, first, count):
        rows = [(first + j) % self.size for j in range(count)]
        ids = torch.from_numpy(self.f["input_ids"][rows].astype(np.int64))
        labels = torch.full_like(ids, -100)
        positions = self.f["masked_lm_positions"][rows]
        masked = self.f["masked_lm_ids"][rows]
        for r in range(count):
            for k in range(positions.shape[1]):
                if positions[r, k] != 0:
                    labels[r, positions[r, k]] = int(masked[r, k])
        return dict(input_ids=ids,
                    attention_mask=torch.from_numpy(self.f["input_mask"][rows].astype(np.int64)),
                    token_type_ids=torch.from_numpy(self.f["segment_ids"][rows].astype(np.int64)),
                    labels=labels,
                    next_sentence_label=torch.from_numpy(
                        self.f["next_sentence_labels"][rows].astype(np.int64).reshape(-1)))


def learning_rate_at(step, lr, warmup, total, end_lr=0.0, power=1.0):
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    span = max(1, total - warmup)
    done = min(1.0, (step - warmup) / span)
    return (lr - end_lr) * (1.0 - done) ** power + end_lr


def metrics_writer(path):
    """write(record): one JSON line with the time, flushed (as polyhal's --metrics-out)."""
    out = open(path, "w")

    def write(record):
        record["time"] = time.time()
        out.write(json.dumps(record) + "\n")
        out.flush()
    return write


def no_decay(name):
    return name.endswith(".bias") or "LayerNorm" in name


class Lamb:
    def __init__(self, named, weight_decay, beta1=0.9, beta2=0.999, eps=1e-6):
        self.named = [(n, p) for n, p in named if p.requires_grad]
        self.wd, self.b1, self.b2, self.eps = weight_decay, beta1, beta2, eps
        self.m = {n: torch.zeros_like(p) for n, p in self.named}
        self.v = {n: torch.zeros_like(p) for n, p in self.named}
        self.t = 0

    @torch.no_grad()
    def step(self, lr):
        self.t += 1
        norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for _, p in self.named))
        for n, p in self.named:
            g = p.grad
            m, v = self.m[n], self.v[n]
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            update = (m / (1 - self.b1 ** self.t)) / ((v / (1 - self.b2 ** self.t)).sqrt() + self.eps)
            trust = 1.0
            if not no_decay(n):
                update = update + self.wd * p
                w_norm, u_norm = p.norm(), update.norm()
                trust = float(w_norm / u_norm) if w_norm > 0 and u_norm > 0 else 1.0
            p.sub_(lr * trust * update)
        return norm


def heads(model, b):
    """BertForPreTraining's forward with the MLM head on the masked positions
    only (as NVIDIA's reference and polyhal gather them): the same logits
    there, without the vocabulary GEMM of every position."""
    encoded, pooled = model.bert(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                                 token_type_ids=b["token_type_ids"], return_dict=False)[:2]
    keep = b["labels"] != -100
    return model.cls.predictions(encoded[keep]), model.cls.seq_relationship(pooled), keep


def pretraining_loss(model, b):
    """BertForPreTraining's loss: mean masked-LM plus mean NSP cross-entropy."""
    mlm, nsp, keep = heads(model, b)
    return (torch.nn.functional.cross_entropy(mlm.float(), b["labels"][keep])
            + torch.nn.functional.cross_entropy(nsp.float(), b["next_sentence_label"]))


def evaluate(model, rows, batch, autocast):
    model.eval()
    sums = np.zeros(6)
    with torch.no_grad():
        for first in range(0, rows.size, batch):
            b = rows.batch(first, min(batch, rows.size - first))
            with autocast():
                mlm, nsp, keep = heads(model, b)
            logits, labels, nsp = mlm.float(), b["labels"][keep], nsp.float()
            sums[0] += float((logits.argmax(-1) == labels).sum())
            sums[1] += labels.numel()
            sums[2] += float(torch.nn.functional.cross_entropy(logits.double(), labels,
                                                               reduction="sum"))
            nl = b["next_sentence_label"]
            sums[3] += float((nsp.argmax(-1) == nl).sum())
            sums[4] += nl.numel()
            sums[5] += float(torch.nn.functional.cross_entropy(nsp.double(), nl, reduction="sum"))
    model.train()
    return dict(mlm_accuracy=sums[0] / sums[1], mlm_loss=sums[2] / sums[1],
                nsp_accuracy=sums[3] / sums[4], nsp_loss=sums[5] / sums[4],
                masked_tokens=int(sums[1]), sequences=int(sums[4]))


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--write-init")
    a.add_argument("--preset", default="mini")
    a.add_argument("--vocab-size", type=int, default=30522)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--init")
    a.add_argument("--train")
    a.add_argument("--eval")
    a.add_argument("--steps", type=int, default=2000)
    a.add_argument("--batch", type=int, default=32)
    a.add_argument("--lr", type=float, default=2e-3)
    a.add_argument("--warmup", type=int, default=200)
    a.add_argument("--weight-decay", type=float, default=0.01)
    a.add_argument("--dropout", type=float, default=0.1)
    a.add_argument("--eval-every", type=int, default=200)
    a.add_argument("--precision", default="f32", choices=["f32", "bf16"])
    a.add_argument("--threads", type=int, default=0)
    a.add_argument("--metrics")
    a.add_argument("--save", help="write the trained weights here (save_pretrained)")
    args = a.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.write_init:
        torch.manual_seed(args.seed)
        model = transformers.BertForPreTraining(bert_config(args.preset, args.vocab_size,
                                                            args.dropout))
        model.save_pretrained(args.write_init, safe_serialization=True)
        return
    torch.manual_seed(args.seed)
    model = transformers.BertForPreTraining.from_pretrained(args.init)
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = args.dropout
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = args.dropout
    model.train()
    train, held_out = Rows(args.train), Rows(args.eval)
    autocast = ((lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.precision == "bf16"
                else (lambda: torch.autocast("cpu", enabled=False)))
    optimizer = Lamb(model.named_parameters(), args.weight_decay)
    write = metrics_writer(args.metrics)

    begin = time.time()
    for step in range(1, args.steps + 1):
        start = time.time()
        b = train.batch((step - 1) * args.batch, args.batch)
        with autocast():
            loss = pretraining_loss(model, b).float()
        model.zero_grad(set_to_none=False)
        loss.backward()
        lr = learning_rate_at(step, args.lr, args.warmup, args.steps)
        norm = optimizer.step(lr)
        write(dict(event="step", step=step, loss=float(loss.detach()), learning_rate=lr, grad_norm=norm,
                   seconds=time.time() - start))
        if step % args.eval_every == 0 or step == args.steps:
            e = evaluate(model, held_out, 64, autocast)
            write(dict(event="eval", step=step, **e))
            print(f"step {step}: loss {float(loss.detach()):.4f}, eval masked-LM accuracy "
                  f"{e['mlm_accuracy']:.4f} ({time.time() - begin:.0f} s)", flush=True)
    write(dict(event="summary", engine=f"transformers {transformers.__version__}, torch "
               f"{torch.__version__}", precision=args.precision, steps=args.steps,
               seconds=time.time() - begin))
    if args.save:
        model.save_pretrained(args.save, safe_serialization=True)


if __name__ == "__main__":
    main()
