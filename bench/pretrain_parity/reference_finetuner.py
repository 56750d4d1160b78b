#!/usr/bin/env python3
"""The fine-tuning half of the parity run, in PyTorch + Hugging Face
transformers: sequence classification on a GLUE-format TSV (SST-2 layout,
make_glue_task.py) as polyhal's `task: glue` trains it with `data.shuffle:
false`: the training rows in file order every epoch, the remainder that does
not fill a batch left out, AdamW (eps 1e-6, decoupled weight decay 0.01 not on
biases and LayerNorm), the global gradient norm clipped to 1, linear warm-up
then linear decay to 0 over the run's steps, dev accuracy after every epoch.

  # the starting point both trainers use: the pre-trained encoder and pooler
  # of a BertForPreTraining directory plus a classifier drawn with --seed
  reference_finetuner.py --write-init OUT --init PRETRAINED --seed 1
  # fine-tune it
  reference_finetuner.py --init OUT --train train.tsv --dev dev.tsv --vocab vocab.txt \\
      --metrics reference.jsonl [--seq 64 --epochs 2 --batch 32 --lr 1e-4 --precision f32]
"""
import argparse
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_trainer import learning_rate_at, metrics_writer, no_decay  # noqa: E402


def read_tsv(path):
    sentences, labels = [], []
    with open(path) as f:
        next(f)  # the header
        for line in f:
            sentence, label = line.rstrip("\n").split("\t")
            sentences.append(sentence)
            labels.append(int(label))
    return sentences, torch.tensor(labels)


def encode(tokenizer, sentences, seq):
    return tokenizer(sentences, max_length=seq, truncation=True, padding="max_length",
                     return_tensors="pt")


@torch.no_grad()
def accuracy(model, inputs, labels, batch, autocast):
    model.eval()
    correct = 0
    for first in range(0, len(labels), batch):
        part = {k: v[first:first + batch] for k, v in inputs.items()}
        with autocast():
            logits = model(**part).logits.float()
        correct += int((logits.argmax(-1) == labels[first:first + batch]).sum())
    model.train()
    return correct / len(labels)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--init", required=True)
    a.add_argument("--write-init")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--train")
    a.add_argument("--dev")
    a.add_argument("--vocab")
    a.add_argument("--seq", type=int, default=64)
    a.add_argument("--epochs", type=int, default=2)
    a.add_argument("--batch", type=int, default=32)
    a.add_argument("--lr", type=float, default=1e-4)
    a.add_argument("--warmup", type=int, default=-1, help="steps (default: 10%% of the run)")
    a.add_argument("--weight-decay", type=float, default=0.01)
    a.add_argument("--dropout", type=float, default=0.1)
    a.add_argument("--max-grad-norm", type=float, default=1.0)
    a.add_argument("--precision", default="f32", choices=["f32", "bf16"])
    a.add_argument("--metrics")
    args = a.parse_args()
    torch.manual_seed(args.seed)
    if args.write_init:
        model = transformers.BertForSequenceClassification.from_pretrained(args.init, num_labels=2)
        model.save_pretrained(args.write_init, safe_serialization=True)
        return
    model = transformers.BertForSequenceClassification.from_pretrained(
        args.init, hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
    model.train()
    tokenizer = transformers.BertTokenizer(args.vocab, do_lower_case=True)
    train_text, train_labels = read_tsv(args.train)
    dev_text, dev_labels = read_tsv(args.dev)
    train, dev = encode(tokenizer, train_text, args.seq), encode(tokenizer, dev_text, args.seq)
    per_epoch = len(train_labels) // args.batch
    total = per_epoch * args.epochs
    warmup = args.warmup if args.warmup >= 0 else int(0.1 * total)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": args.weight_decay},
         {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.999), eps=1e-6)
    autocast = ((lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.precision == "bf16"
                else (lambda: torch.autocast("cpu", enabled=False)))
    write = metrics_writer(args.metrics)

    begin = time.time()
    for step in range(1, total + 1):
        first = ((step - 1) % per_epoch) * args.batch
        part = {k: v[first:first + args.batch] for k, v in train.items()}
        with autocast():
            logits = model(**part).logits.float()
        loss = torch.nn.functional.cross_entropy(logits, train_labels[first:first + args.batch])
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm))
        lr = learning_rate_at(step, args.lr, warmup, total)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        write(dict(event="step", step=step, loss=float(loss.detach()), learning_rate=lr,
                   grad_norm=norm))
        if step % per_epoch == 0:
            acc = accuracy(model, dev, dev_labels, 128, autocast)
            write(dict(event="eval", step=step, epoch=step // per_epoch, accuracy=acc))
            print(f"epoch {step // per_epoch}: dev accuracy {acc:.4f} ({time.time() - begin:.0f} s)",
                  flush=True)
    write(dict(event="summary", engine=f"transformers {transformers.__version__}, torch "
               f"{torch.__version__}", precision=args.precision, steps=total,
               seconds=time.time() - begin))


if __name__ == "__main__":
    main()
