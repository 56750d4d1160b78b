#!/usr/bin/python3
"""Side-by-side BERT pre-training step benchmark, in one run on this machine:
polyhal (cpu plugin) vs PyTorch 1.13 (Debian python3-torch) at its best, on
the same work, plus polyhal's share of the bf16 GEMM ceiling measured in the
same run.

The same work on both sides: BERT (Hugging Face semantics), seq 128,
generated MLM/NSP data with `--predictions` (20) labelled positions per
sequence, the MLM head (transform, decoder, loss) on those gathered positions
only, dropout `--dropout` (0.1) on the hidden states and the attention
probabilities, LAMB (per-tensor trust ratio, weight decay 0.01 except biases
and LayerNorm; PyTorch has no LAMB, so it is written here with in-place
tensor ops as a PyTorch user would), forward + backward + optimizer step,
the same thread count.

PyTorch at its best: Debian's python3-torch takes fp32 BLAS from the system
libblas.so.3, the netlib reference unless OpenBLAS is selected, so this
script re-executes itself with OpenBLAS (libopenblas0-openmp) preloaded and
prints the BLAS PyTorch actually mapped. Rows:
  autocast  polyhal bf16 mixed precision (f32 master weights) vs PyTorch's
            CPU autocast to bf16 (f32 master weights, GEMMs in bf16). Debian's
            torch 1.13 autocast fails inside LayerNorm ("expected scalar type
            BFloat16 but found Float"), so LayerNorm normalises its input in
            f32 here, which is what later PyTorch autocast does.
  f32       both in f32 (PyTorch's GEMMs on OpenBLAS).
  bf16      PyTorch's whole model in bfloat16 (bf16 weights and optimizer
            state: less work than polyhal's f32 master weights).

The GEMM ceiling: every GEMM of polyhal's bf16 step (forward, data and
weight gradients; shapes from the model dims) at the rate oneDNN's bf16
matmul reaches on that shape alone (polyhal matmul-bench, f32 output),
summed; attention's batched GEMMs at the best measured rate (the fastest
possible, so the ceiling errs high). "% of ceiling" = ceiling time / step time.

  /usr/bin/python3 bench/bert_training_vs_pytorch.py [--preset base] [--batch 8] [--steps 4]
      [--rows autocast,f32,bf16] [--optimizer lamb|adamw]

With a PyTorch 2 environment's Python (bench/peers-venv.sh) it measures that
PyTorch instead (its own BLAS; AdamW on the fused CPU kernel), and with
--ipex through ipex.optimize; bench/peers_bench.py's training row does so.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_bert  # noqa: E402  (re-executes with OpenBLAS preloaded)
import model_flops  # noqa: E402
import polyhal_bench  # noqa: E402
import torch  # noqa: E402

VOCAB = model_flops.VOCAB


class Lamb:
    """LAMB (You et al.) as polyhal's lamb_update: Adam moments with bias
    correction, the update plus decoupled weight decay scaled by the trust
    ratio ||w|| / ||update|| per tensor."""

    def __init__(self, named, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
        self.params = [(p, 0.0 if name.endswith("bias") or "norm" in name else weight_decay)
                       for name, p in named]
        self.state = [(torch.zeros_like(p), torch.zeros_like(p)) for p, _ in self.params]
        self.lr, self.betas, self.eps, self.step_count = lr, betas, eps, 0

    @torch.no_grad()
    def step(self):
        self.step_count += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1 ** self.step_count, 1 - b2 ** self.step_count
        for (p, decay), (m, v) in zip(self.params, self.state):
            g = p.grad
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            update = (m / c1).div_((v / c2).sqrt_().add_(self.eps))
            if decay:
                update.add_(p, alpha=decay)
            w_norm, u_norm = p.norm(), update.norm()
            ratio = (w_norm / u_norm).item() if w_norm > 0 and u_norm > 0 else 1.0
            p.add_(update, alpha=-self.lr * ratio)
            p.grad = None


ORIGINAL_LAYER_NORM = torch.nn.LayerNorm.forward


def layer_norm_in_f32(self, x):
    return torch.nn.functional.layer_norm(x.float(), self.normalized_shape, self.weight, self.bias, self.eps)


def make_optimizer(model, name):
    """LAMB as written above, or PyTorch's own AdamW at its fast path (the
    fused CPU kernel from PyTorch 2.4 on; foreach before that)."""
    if name == "lamb":
        return Lamb(model.named_parameters())
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "norm" in n)]
    rest = [p for n, p in model.named_parameters() if n.endswith("bias") or "norm" in n]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}]
    fast = {"fused": True} if tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 4) else {"foreach": True}
    return torch.optim.AdamW(groups, lr=1e-3, eps=1e-6, **fast)


def torch_step(preset, seq, batch, mode, steps, threads, dropout, predictions, optimizer_name="lamb", ipex=False):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = pytorch_bert.bert_config(preset)
    model = pytorch_bert.Bert(config).train()
    if mode == "bf16":
        model = model.to(torch.bfloat16)
    # PyTorch 1.13's autocast fails inside LayerNorm; later ones run it in f32 themselves.
    old_autocast = tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 0)
    torch.nn.LayerNorm.forward = layer_norm_in_f32 if mode == "autocast" and old_autocast else ORIGINAL_LAYER_NORM
    optimizer = make_optimizer(model, optimizer_name)
    if ipex:  # IPEX's bf16 training path: bf16 weights with split f32 master halves, fused optimizer
        import intel_extension_for_pytorch as intel_extension
        model, optimizer = intel_extension.optimize(model, optimizer=optimizer, dtype=torch.bfloat16)
    ids = torch.randint(0, VOCAB, (batch, seq))
    types = torch.zeros(batch, seq, dtype=torch.long)
    mask = torch.ones(batch, seq, dtype=torch.long)
    # `predictions` labelled positions per sequence, gathered for the head.
    positions = torch.stack([torch.randperm(seq - 1)[:predictions] + 1 + k * seq for k in range(batch)]).view(-1)
    labels = ids.view(-1)[positions]
    nsp_labels = torch.randint(0, 2, (batch,))

    def drop(kind, t):
        return torch.nn.functional.dropout(t, dropout, training=True)

    times = []
    for i in range(steps + 1):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "autocast"):
            _, _, mlm, nsp = model(ids, types, mask, drop=drop, positions=positions)
            loss = torch.nn.functional.cross_entropy(mlm.float(), labels) + \
                torch.nn.functional.cross_entropy(nsp.float(), nsp_labels)
        loss.backward()
        optimizer.step()
        if hasattr(optimizer, "zero_grad"):
            optimizer.zero_grad(set_to_none=True)
        if i > 0:
            times.append(time.perf_counter() - start)
    return batch * len(times) / sum(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    p.add_argument("--preset", default="base")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--predictions", type=int, default=20)
    p.add_argument("--rows", default="autocast,f32")
    p.add_argument("--optimizer", default="lamb", choices=["lamb", "adamw"])
    p.add_argument("--ipex", action="store_true", help="PyTorch through ipex.optimize (run with IPEX's Python)")
    p.add_argument("--torch-only", action="store_true",
                   help="only PyTorch's seq/s per row, as JSON (bench/peers_bench.py runs this per environment)")
    a = p.parse_args()
    if a.torch_only:
        version = f"PyTorch {torch.__version__}"
        if a.ipex:
            import intel_extension_for_pytorch as intel_extension
            version = f"IPEX {intel_extension.__version__} (PyTorch {torch.__version__})"
        print(json.dumps({"version": version, "rows": {
            mode: torch_step(a.preset, a.seq, a.batch, mode, a.steps, a.threads, a.dropout, a.predictions,
                             a.optimizer, a.ipex) for mode in a.rows.split(",")}}))
        return
    gemms, attention_flops = model_flops.model_work(a.preset, a.seq, a.batch, a.predictions, training=True)
    rates = polyhal_bench.gemm_rates(a.build, [(m, n, k) for m, n, k, _ in gemms], a.threads)
    ceiling = polyhal_bench.ceiling_seconds(gemms, rates) + attention_flops / (max(rates.values()) * 1e9)
    flops = sum(2.0 * m * n * k * c for m, n, k, c in gemms) + attention_flops
    print(f"BERT-{a.preset} pre-training step (fwd + bwd + LAMB), seq {a.seq}, micro-batch {a.batch}, "
          f"{a.predictions} predictions/seq, dropout {a.dropout}, {a.threads} threads, torch {torch.__version__}, "
          f"PyTorch BLAS {pytorch_bert.blas_library()}\n")
    print(f"bf16 GEMM ceiling: {flops / 1e9:.0f} GFLOP per step in {ceiling:.3f} s "
          f"({flops / ceiling / 1e9:.0f} GFLOP/s, {a.batch / ceiling:.2f} sequences/s)\n")
    print("| PyTorch mode | polyhal precision | polyhal seq/s | PyTorch seq/s | ratio | polyhal % of bf16 GEMM ceiling |")
    print("|---|---|---|---|---|---|")
    for mode in a.rows.split(","):
        precision = "f32" if mode == "f32" else "bf16"
        ours = polyhal_bench.pretrain_step_rate(a.build, a.preset, a.seq, a.batch, precision, a.steps, a.dropout, a.predictions,
                            a.threads, a.optimizer)
        theirs = torch_step(a.preset, a.seq, a.batch, mode, a.steps, a.threads, a.dropout, a.predictions,
                            a.optimizer, a.ipex)
        share = f"{100 * ceiling * ours / a.batch:.0f}%" if precision == "bf16" else "-"
        print(f"| {mode} | {precision} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x | {share} |", flush=True)


if __name__ == "__main__":
    main()
