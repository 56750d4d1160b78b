#!/usr/bin/python3
"""Golden files for one BERT pre-training step (MLM + NSP), written with
PyTorch independently of polyhal: loss, every gradient, and the weights after
one AdamW step and after one LAMB step (LAMB written out here as in NVIDIA's
and the seeds' implementations: bias-corrected Adam moments, weight decay and
the trust ratio skipped for biases and LayerNorm parameters).

Run from the repository root:  /usr/bin/python3 tests/golden/make_bert_train_golden.py
"""
import copy
import os


import numpy as np
import torch


from make_bert_golden import CONFIG, OUT, Bert, write_safetensors

BATCH, SEQ = 2, 11
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-3, 0.9, 0.999, 1e-6, 0.01
# The dropout run: polyhal's seed and micro-batch index, and the two rates.
DROP_SEED, DROP_INDEX, HIDDEN_P, ATTENTION_P = 7, 3, 0.125, 0.25  # exact in the f32 file

U64 = np.uint64


def dropout_mask(seed, index, stream, p, shape):
    """polyhal's mask (core/include/polyhal/dropout_mask.hpp), written out
    again here: splitmix64 of (seed, index, stream, element)."""
    with np.errstate(over="ignore"):
        key = (U64(seed & 0x7FFFFFFF) << U64(32) | U64(index & 0x7FFFFFFF)) ^ (
            np.array([stream], dtype=U64) * U64(0xD1B54A32D192ED03))
        z = key + U64(0x9E3779B97F4A7C15) * np.arange(1, int(np.prod(shape)) + 1, dtype=U64)
        z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
        z ^= z >> U64(31)
    threshold = U64(int(p * 18446744073709551616.0))
    keep = np.float32(1.0 / (1.0 - p))
    return torch.from_numpy(np.where(z < threshold, np.float32(0), keep).astype(np.float32)).view(shape)


class Dropout:
    """Applies polyhal's masks in forward order, numbering the streams."""

    def __init__(self):
        self.stream = 0

    def __call__(self, kind, t):
        p = HIDDEN_P if kind == "hidden" else ATTENTION_P
        m = dropout_mask(DROP_SEED, DROP_INDEX, self.stream, p, t.shape)
        self.stream += 1
        return t * m.to(t.dtype)


def golden_batch(vocab_size):
    """The golden step's batch of 2 x 11 tokens, drawn from torch's generator:
    two segments, the second row padded after 8 tokens, 5 labelled positions."""
    ids = torch.randint(1, vocab_size, (BATCH, SEQ))
    types = torch.zeros(BATCH, SEQ, dtype=torch.long)
    types[:, 6:] = 1
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, 8:] = 0
    ids[1, 8:] = 0
    mlm_labels = torch.full((BATCH, SEQ), -100, dtype=torch.long)
    for b, s in ((0, 2), (0, 5), (0, 9), (1, 1), (1, 4)):
        mlm_labels[b, s] = int(torch.randint(0, vocab_size, ()))
    return ids, types, mask, mlm_labels, torch.tensor([0, 1])


def losses(model, ids, types, mask, mlm_labels, nsp_labels, drop=None):
    hidden, pooled, mlm, nsp = model(ids, types, mask, drop)
    mlm_loss = torch.nn.functional.cross_entropy(mlm.view(-1, CONFIG["vocab_size"]), mlm_labels.view(-1),
                                                 ignore_index=-100)
    nsp_loss = torch.nn.functional.cross_entropy(nsp, nsp_labels)
    return mlm_loss, nsp_loss



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
    ids, types, mask, mlm_labels, nsp_labels = golden_batch(CONFIG["vocab_size"])
    # With polyhal's dropout masks (hidden and attention-probability dropout),
    # in f64: f32 PyTorch's own rounding noise on the dropped step is close to
    # the 1e-4 tolerance, so the reference is computed more exactly than that.
    exact = copy.deepcopy(model).double()
    drop_mlm, drop_nsp = losses(exact, ids, types, mask, mlm_labels, nsp_labels, Dropout())
    (drop_mlm + drop_nsp).backward()
    drop_grads = {id(p): q.grad.detach().float() for p, q in zip(model.parameters(), exact.parameters())}
    # Without dropout.
    mlm_loss, nsp_loss = losses(model, ids, types, mask, mlm_labels, nsp_labels)
    (mlm_loss + nsp_loss).backward()
    sd = model.hf_state_dict()
    names = {id(p): n for n, p in model.named_parameters()}
    # Map the module's parameters onto Hugging Face names through their values.
    params, grads, dropped_grads = {}, {}, {}
    for hf_name, tensor in sd.items():
        for p in model.parameters():
            if p.shape == tensor.shape and torch.equal(p.detach(), tensor):
                params[hf_name] = p.detach().clone()
                grads[hf_name] = p.grad.detach().clone()
                dropped_grads[hf_name] = drop_grads[id(p)]
                break
    assert len(params) == len(sd), (len(params), len(sd))
    golden = {"input_ids": ids.float(), "token_type_ids": types.float(), "attention_mask": mask.float(),
              "mlm_labels": mlm_labels.float(), "nsp_labels": nsp_labels.float(),
              "loss": torch.tensor([mlm_loss.item(), nsp_loss.item()])}
    for name, g in grads.items():
        golden["grad." + name] = g
    golden["dropout.loss"] = torch.tensor([drop_mlm.item(), drop_nsp.item()])
    golden["dropout.setting"] = torch.tensor([DROP_SEED, DROP_INDEX, HIDDEN_P, ATTENTION_P])
    for name, g in dropped_grads.items():
        golden["dropout.grad." + name] = g
    for kind in ("adamw", "lamb"):
        for name, w in step(params, grads, kind).items():
            golden[kind + "." + name] = w
    write_safetensors(os.path.join(OUT, "train_golden.safetensors"), golden, torch.float32)
    print("wrote train_golden.safetensors; loss", mlm_loss.item(), nsp_loss.item(), "unused", len(names))


if __name__ == "__main__":
    main()
