#!/usr/bin/python3
"""Side-by-side BERT pre-training step benchmark, in one run on this machine:
polyhal (cpu plugin) vs PyTorch 1.13 (Debian python3-torch), same model dims,
seq 128, generated MLM/NSP data, forward + backward + optimizer step.
Rows: f32; bf16 with PyTorch's CPU autocast (f32 master weights, GEMMs in
bf16: the comparison the training issue sets; Debian's torch 1.13 autocast
fails inside LayerNorm with "expected scalar type BFloat16 but found Float",
so LayerNorm is patched to normalise its input in f32, which is what later
PyTorch autocast does); and bf16 with the whole PyTorch model in bfloat16
(model.to(torch.bfloat16): bf16 weights and optimizer state, less work than
polyhal's f32 master weights). polyhal: bf16 mixed precision over f32 master
weights, MLM head on the max_predictions (20) labelled positions; PyTorch
(Hugging Face style) computes the MLM logits for every position.
Prints a Markdown table.

  /usr/bin/python3 bench/bert_training_vs_pytorch.py [--preset base] [--batch 8] [--steps 3]
      [--rows f32,autocast,bf16]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_bert  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def polyhal_step(build, preset, seq, batch, precision, steps):
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "train.yaml")
        with open(config, "w") as f:
            f.write(f"backend: cpu\ntask: pretrain\nmodel: {{preset: {preset}, seq_len: {seq}, precision: {precision}, "
                    f"dropout: 0}}\nbatch: {{micro: {batch}}}\ndata: {{source: generated}}\n"
                    f"optimizer: {{name: lamb, learning_rate: 0.001}}\nsteps: {steps + 1}\n")
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([os.path.join(build, "launcher", "polyhal"), "run", "--config", config, "--metrics-out",
                        metrics], check=True, stdout=subprocess.DEVNULL)
        times = [json.loads(l)["seconds"] for l in open(metrics) if '"event":"step"' in l]
        times = times[1:]  # the first step pays for first-touch allocation
        return batch * len(times) / sum(times)


ORIGINAL_LAYER_NORM = torch.nn.LayerNorm.forward


def layer_norm_in_f32(self, x):
    return torch.nn.functional.layer_norm(x.float(), self.normalized_shape, self.weight, self.bias,
                                          self.eps)


def torch_step(preset, seq, batch, mode, steps, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = pytorch_bert.bert_config(preset)
    model = pytorch_bert.Bert(config).train()
    if mode == "bf16":
        model = model.to(torch.bfloat16)
    torch.nn.LayerNorm.forward = layer_norm_in_f32 if mode == "autocast" else ORIGINAL_LAYER_NORM
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # torch has no LAMB; AdamW does the same work
    ids = torch.randint(0, config["vocab_size"], (batch, seq))
    types = torch.zeros(batch, seq, dtype=torch.long)
    mask = torch.ones(batch, seq, dtype=torch.long)
    labels = torch.full((batch, seq), -100, dtype=torch.long)
    labels[:, 1:21] = ids[:, 1:21]
    nsp_labels = torch.zeros(batch, dtype=torch.long)
    times = []
    for i in range(steps + 1):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "autocast"):
            _, _, mlm, nsp = model(ids, types, mask)
            loss = torch.nn.functional.cross_entropy(mlm.float().view(-1, config["vocab_size"]), labels.view(-1)) + \
                torch.nn.functional.cross_entropy(nsp.float(), nsp_labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if i > 0:
            times.append(time.perf_counter() - start)
    return batch * len(times) / sum(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--preset", default="base")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--rows", default="f32,autocast,bf16")
    a = p.parse_args()
    print(f"BERT-{a.preset} pre-training step (fwd + bwd + optimizer), seq {a.seq}, batch {a.batch}, "
          f"{a.threads} threads, torch {torch.__version__}\n")
    print("| PyTorch mode | polyhal precision | polyhal seq/s | PyTorch seq/s | ratio |")
    print("|---|---|---|---|---|")
    for mode in a.rows.split(","):
        precision = "f32" if mode == "f32" else "bf16"
        ours = polyhal_step(a.build, a.preset, a.seq, a.batch, precision, a.steps)
        theirs = torch_step(a.preset, a.seq, a.batch, mode, a.steps, a.threads)
        print(f"| {mode} | {precision} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
