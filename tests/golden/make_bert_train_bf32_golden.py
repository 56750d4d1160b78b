#!/usr/bin/python3
"""Golden values for one BERT pre-training step in bf32 (model.precision
bf32, the Intel seed's training precision: f32 tensors, every dense layer's
products from bf16-rounded operands with f32 accumulation, as oneDNN's
fpmath_mode bf16 computes them), written with PyTorch independently of
polyhal: the golden batch and model of make_bert_train_golden.py, each
nn.Linear and the tied MLM decoder replaced by a bf32 product whose backward
rounds dY, X and W the same way (the bias gradient sums dY as it is);
attention's batched products stay f32, as in polyhal.

Run from the repository root (torch from the Python Package Index or Debian):
  build/peer-venv/bin/python tests/golden/make_bert_train_bf32_golden.py
Writes tests/golden/bert_tiny/train_bf32_golden.safetensors: bf32.loss,
bf32.grad.<name>, and f32.loss (the same step in f32, so the test can show
the two differ by more than its tolerance).
"""
import json
import os
import struct
import types

import numpy as np
import torch

from make_bert_golden import CONFIG, OUT, Bert, write_safetensors
from make_bert_train_golden import golden_batch, losses


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float32)


class Bf32Product(torch.autograd.Function):
    """y = r(x) r(w)^T (+ b): r rounds to bf16 to nearest even."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        y = bf16(x) @ bf16(w).t()
        return y if b is None else y + b

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        rdy = bf16(dy)
        dx = rdy @ bf16(w)
        dw = rdy.reshape(-1, rdy.shape[-1]).t() @ bf16(x).reshape(-1, x.shape[-1])
        db = dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.needs_input_grad[2] else None
        return dx, dw, db


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=np.float32).reshape(h["shape"])
    return out


def golden_model():
    """The golden model (make_bert_train_golden.main's), checked against the
    weights the test loads (bert_tiny/model.safetensors)."""
    torch.manual_seed(1234)
    model = Bert(CONFIG)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    stored = read_safetensors(os.path.join(OUT, "model.safetensors"))
    for name, t in model.hf_state_dict().items():
        if name in stored:
            assert np.array_equal(stored[name], t.detach().numpy()), name
    return model


def use_bf32_products(model):
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.forward = types.MethodType(lambda self, x: Bf32Product.apply(x, self.weight, self.bias), m)
    plain = torch.matmul

    def matmul(a, b):  # the decoder multiplies by the tied word embeddings, transposed
        if getattr(b, "_base", None) is model.word.weight:
            return Bf32Product.apply(a, model.word.weight, None)
        return plain(a, b)
    torch.matmul = matmul


def main():
    f32 = golden_model()
    # Drawn after the weights, as make_bert_train_golden.main draws it.
    ids, types_, mask, mlm_labels, nsp_labels = golden_batch(CONFIG["vocab_size"])
    f32_mlm, f32_nsp = losses(f32, ids, types_, mask, mlm_labels, nsp_labels)
    model = golden_model()
    use_bf32_products(model)
    mlm_loss, nsp_loss = losses(model, ids, types_, mask, mlm_labels, nsp_labels)
    (mlm_loss + nsp_loss).backward()
    golden = {"bf32.loss": torch.tensor([mlm_loss.item(), nsp_loss.item()]),
              "f32.loss": torch.tensor([f32_mlm.item(), f32_nsp.item()])}
    sd = model.hf_state_dict()
    for hf_name, tensor in sd.items():
        for p in model.parameters():
            if p.shape == tensor.shape and torch.equal(p.detach(), tensor):
                golden["bf32.grad." + hf_name] = p.grad.detach().clone()
                break
    assert len(golden) == len(sd) + 2, (len(golden), len(sd))
    write_safetensors(os.path.join(OUT, "train_bf32_golden.safetensors"), golden, torch.float32)
    print("wrote train_bf32_golden.safetensors; bf32 loss", mlm_loss.item(), nsp_loss.item(),
          "f32 loss", f32_mlm.item(), f32_nsp.item())


if __name__ == "__main__":
    main()
