#!/usr/bin/python3
"""Golden values of GroupBERT's ops (docs/groupbert.md), computed with
PyTorch's own operators independently of polyhal: the grouped dense as
torch's grouped Conv1d with kernel 1, the sequence convolution as torch's
grouped Conv1d run on each sequence alone (zero padding at its ends, padding
tokens giving 0), GLU as torch.nn.functional.glu and swish as silu; every
gradient by autograd from a fixed dY.

Run from the repository root:  /usr/bin/python3 tests/golden/make_groupbert_ops_golden.py
Writes tests/golden/groupbert/ops.safetensors.
"""
import os

import torch

from make_bert_golden import write_safetensors

F = torch.nn.functional
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "groupbert")


def grouped_dense(x, w, b, groups):
    return F.conv1d(x.t()[None], w[..., None], b, groups=groups)[0].t()


def sequence_conv(x, w, mask, batch, seq):
    """Each sequence (equal mask numbers > 0) alone through a padded Conv1d."""
    n, kernel = x.shape[1], w.shape[2]
    left = (kernel - 1) // 2
    y = torch.zeros_like(x)
    rows = x.view(batch, seq, n)
    out = y.view(batch, seq, n)
    for b in range(batch):
        for number in sorted(set(mask[b].tolist()) - {0}):
            where = (mask[b] == number).nonzero().flatten()
            part = rows[b, where].t()[None]
            conv = F.conv1d(F.pad(part, (left, kernel - 1 - left)), w, groups=n // w.shape[1])
            out[b, where] = conv[0].t()
    return y


def main():
    torch.manual_seed(11)
    values = {}

    def record(prefix, inputs, outputs, grads):
        for name, t in {**inputs, **outputs, **grads}.items():
            values[f"{prefix}.{name}"] = t.detach().clone()

    # Grouped dense: X[6, 12] in 4 groups to 8 outputs.
    x = torch.randn(6, 12, requires_grad=True)
    w = torch.randn(8, 3, requires_grad=True)
    b = torch.randn(8, requires_grad=True)
    y = grouped_dense(x, w, b, 4)
    dy = torch.randn_like(y)
    y.backward(dy)
    record("grouped_dense", dict(x=x, w=w, b=b, dy=dy), dict(y=y),
           dict(dx=x.grad, dw=w.grad, db=b.grad))

    # Sequence convolution: batch 2, seq 9, 8 channels in groups of 4, kernel 5
    # (left padding 2). Row 0: one sequence and 2 padding tokens; row 1 packed:
    # a 4-token and a 3-token sequence, then padding.
    batch, seq = 2, 9
    mask = torch.tensor([[1] * 7 + [0] * 2, [1] * 4 + [2] * 3 + [0] * 2])
    x = torch.randn(batch * seq, 8, requires_grad=True)
    w = torch.randn(8, 4, 5, requires_grad=True)
    y = sequence_conv(x, w, mask, batch, seq)
    dy = torch.randn_like(y)
    y.backward(dy)
    record("sequence_conv", dict(x=x, w=w, mask=mask.float(), dy=dy), dict(y=y),
           dict(dx=x.grad, dw=w.grad))

    a = torch.randn(6, 10, requires_grad=True) * 2
    a.retain_grad()
    y = F.glu(a, dim=-1)
    dy = torch.randn_like(y)
    y.backward(dy)
    record("glu", dict(a=a, dy=dy), dict(y=y), dict(da=a.grad))

    x = torch.randn(6, 7, requires_grad=True) * 3
    x.retain_grad()
    y = F.silu(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    record("swish", dict(x=x, dy=dy), dict(y=y), dict(dx=x.grad))

    os.makedirs(OUT, exist_ok=True)
    write_safetensors(os.path.join(OUT, "ops.safetensors"), values, torch.float32)


if __name__ == "__main__":
    main()
