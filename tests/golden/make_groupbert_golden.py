#!/usr/bin/python3
"""Golden files for one GroupBERT pre-training step (MLM + NSP), written with
the PyTorch reference model (groupbert_reference.py: the paper and Graphcore's
code as docs/groupbert.md fixes them), independently of polyhal: the losses
and every gradient, without dropout and with polyhal's dropout masks, in f64
saved as f32.

Run from the repository root:  /usr/bin/python3 tests/golden/make_groupbert_golden.py
Writes tests/golden/groupbert/{config.json, model.safetensors, train_golden.safetensors}.
"""
import json
import os

import torch

from groupbert_reference import GroupBert
from make_bert_golden import write_safetensors
from make_bert_train_golden import (ATTENTION_P, BATCH, DROP_INDEX, DROP_SEED, HIDDEN_P, SEQ, Dropout,
                                    golden_batch)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "groupbert")
CONFIG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=48, max_position_embeddings=64, type_vocab_size=2,
              layer_norm_eps=1e-3, hidden_act="gelu", model_type="groupbert",
              groupbert_ffn_output_groups=4, groupbert_conv_group_size=8,
              groupbert_conv_kernel_size=5, architectures=["BertForPreTraining"])


def losses(model, ids, types, mask, mlm_labels, nsp_labels, drop=None):
    _, _, mlm, nsp = model(ids, types, mask, drop)
    mlm_loss = torch.nn.functional.cross_entropy(mlm.view(-1, CONFIG["vocab_size"]),
                                                 mlm_labels.view(-1), ignore_index=-100)
    return mlm_loss, torch.nn.functional.cross_entropy(nsp, nsp_labels)


def main():
    torch.manual_seed(4321)
    model = GroupBert(CONFIG).initialise(5)
    with torch.no_grad():  # norms and biases away from 1 and 0, so their gradients matter
        for name, p in model.hf_parameters().items():
            if "norm" in name.lower() or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.1)
    ids, types, mask, mlm_labels, nsp_labels = golden_batch(CONFIG["vocab_size"])
    golden = {"input_ids": ids.float(), "token_type_ids": types.float(),
              "attention_mask": mask.float(), "mlm_labels": mlm_labels.float(),
              "nsp_labels": nsp_labels.float()}
    exact = model.double()
    for prefix, drop in (("", None), ("dropout.", Dropout())):
        exact.zero_grad()
        mlm_loss, nsp_loss = losses(exact, ids, types, mask, mlm_labels, nsp_labels, drop)
        (mlm_loss + nsp_loss).backward()
        golden[prefix + "loss"] = torch.tensor([mlm_loss.item(), nsp_loss.item()])
        for name, p in exact.hf_parameters().items():
            golden[prefix + "grad." + name] = p.grad.detach().float()
    golden["dropout.setting"] = torch.tensor([DROP_SEED, DROP_INDEX, HIDDEN_P, ATTENTION_P])
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(OUT, "model.safetensors"),
                      {n: t.float() for n, t in exact.hf_state_dict().items()}, torch.float32)
    write_safetensors(os.path.join(OUT, "train_golden.safetensors"), golden, torch.float32)


if __name__ == "__main__":
    main()
