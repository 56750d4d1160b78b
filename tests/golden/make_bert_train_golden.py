#!/usr/bin/python3
"""Golden files for one BERT pre-training step (MLM + NSP), written with
PyTorch independently of polyhal: loss, every gradient, and the weights after
one AdamW step and after one LAMB step (LAMB written out here as in NVIDIA's
and the seeds' implementations: bias-corrected Adam moments, weight decay and
the trust ratio skipped for biases and LayerNorm parameters).

Run from the repository root:  /usr/bin/python3 tests/golden/make_bert_train_golden.py
"""
import os

import torch

from make_bert_golden import CONFIG, OUT, Bert, write_safetensors

BATCH, SEQ = 2, 11
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-3, 0.9, 0.999, 1e-6, 0.01


def no_decay(name):
    return name.endswith(".bias") or "LayerNorm" in name


def step(params, grads, kind):
    out = {}
    for name, w in params.items():
        g = grads[name]
        m = (1 - BETA1) * g  # first step from zero moments
        v = (1 - BETA2) * g * g
        m_hat, v_hat = m / (1 - BETA1), v / (1 - BETA2)
        update = m_hat / (v_hat.sqrt() + EPS)
        decay = 0.0 if no_decay(name) else WEIGHT_DECAY
        if kind == "adamw":
            out[name] = w - LR * (update + decay * w)
        else:
            update = update + decay * w
            trust = 1.0
            if not no_decay(name):
                w_norm, u_norm = w.norm(), update.norm()
                trust = float(w_norm / u_norm) if w_norm > 0 and u_norm > 0 else 1.0
            out[name] = w - LR * trust * update
    return out


def main():
    torch.manual_seed(1234)
    model = Bert(CONFIG)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    ids = torch.randint(1, CONFIG["vocab_size"], (BATCH, SEQ))
    types = torch.zeros(BATCH, SEQ, dtype=torch.long)
    types[:, 6:] = 1
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, 8:] = 0
    ids[1, 8:] = 0
    mlm_labels = torch.full((BATCH, SEQ), -100, dtype=torch.long)
    for b, s in ((0, 2), (0, 5), (0, 9), (1, 1), (1, 4)):
        mlm_labels[b, s] = int(torch.randint(0, CONFIG["vocab_size"], ()))
    nsp_labels = torch.tensor([0, 1])
    model.train()  # dropout is absent in this model: the step is deterministic
    hidden, pooled, mlm, nsp = model(ids, types, mask)
    mlm_loss = torch.nn.functional.cross_entropy(mlm.view(-1, CONFIG["vocab_size"]), mlm_labels.view(-1),
                                                 ignore_index=-100)
    nsp_loss = torch.nn.functional.cross_entropy(nsp, nsp_labels)
    (mlm_loss + nsp_loss).backward()
    sd = model.hf_state_dict()
    names = {id(p): n for n, p in model.named_parameters()}
    # Map the module's parameters onto Hugging Face names through their values.
    params, grads = {}, {}
    for hf_name, tensor in sd.items():
        for p in model.parameters():
            if p.shape == tensor.shape and torch.equal(p.detach(), tensor):
                params[hf_name] = p.detach().clone()
                grads[hf_name] = p.grad.detach().clone()
                break
    assert len(params) == len(sd), (len(params), len(sd))
    golden = {"input_ids": ids.float(), "token_type_ids": types.float(), "attention_mask": mask.float(),
              "mlm_labels": mlm_labels.float(), "nsp_labels": nsp_labels.float(),
              "loss": torch.tensor([mlm_loss.item(), nsp_loss.item()])}
    for name, g in grads.items():
        golden["grad." + name] = g
    for kind in ("adamw", "lamb"):
        for name, w in step(params, grads, kind).items():
            golden[kind + "." + name] = w
    write_safetensors(os.path.join(OUT, "train_golden.safetensors"), golden, torch.float32)
    print("wrote train_golden.safetensors; loss", mlm_loss.item(), nsp_loss.item(), "unused", len(names))


if __name__ == "__main__":
    main()
