#!/usr/bin/python3
"""Golden files for one fine-tuning step of each head, written with PyTorch
independently of polyhal, in f64 (f32 PyTorch's own rounding would eat into
the 1e-4 tolerance): the loss, every gradient and the weights after one
AdamW step (lr 1e-3, betas 0.9/0.999, eps 1e-6, weight decay 0.01 except
biases and LayerNorm: make_bert_train_golden.step) of
  - BertForQuestionAnswering: qa_outputs Linear(H, 2) over every token, start
    and end cross-entropy averaged, positions clamped to [0, S] with S ignored;
  - BertForSequenceClassification with 3 labels: classifier on the pooled
    output, cross-entropy;
  - the same with 1 label: regression, mean squared error (STS-B).
Dropout is off (its masks are checked by the pre-training golden).

Run from the repository root:  /usr/bin/python3 tests/golden/make_bert_finetune_golden.py
"""
import os

import torch

from make_bert_golden import CONFIG, OUT, Bert, write_safetensors
from make_bert_train_golden import step

BATCH, SEQ = 2, 11


def hf_parameters(model, prefix_heads):
    """{Hugging Face name: parameter} of the encoder (and pooler), found by value."""
    named = {}
    for name, tensor in model.hf_state_dict().items():
        if name.startswith("cls."):
            continue
        for p in model.parameters():
            if p.shape == tensor.shape and torch.equal(p.detach(), tensor):
                named[name] = p
                break
    named.update(prefix_heads)
    return named


def gradients(loss, named):
    loss.backward()
    return {name: p.grad.detach().clone() for name, p in named.items() if p.grad is not None}


def record(golden, head, named, grads):
    """The head's gradients and its weights after one AdamW step."""
    for name, g in grads.items():
        golden[f"{head}.grad.{name}"] = g.float()
    params = {name: named[name].detach().clone() for name in grads}
    for name, w in step(params, grads, "adamw").items():
        golden[f"{head}.adamw.{name}"] = w.float()


def fresh(seed):
    torch.manual_seed(seed)
    model = Bert(CONFIG).double()
    heads = {"qa": torch.nn.Linear(CONFIG["hidden_size"], 2).double(),
             "cls": torch.nn.Linear(CONFIG["hidden_size"], 3).double(),
             "reg": torch.nn.Linear(CONFIG["hidden_size"], 1).double()}
    with torch.no_grad():
        for p in list(model.parameters()) + [p for h in heads.values() for p in h.parameters()]:
            p.copy_(torch.randn_like(p) * 0.2)
    return model, heads


def main():
    torch.manual_seed(99)
    ids = torch.randint(1, CONFIG["vocab_size"], (BATCH, SEQ))
    types = torch.zeros(BATCH, SEQ, dtype=torch.long)
    types[:, 5:] = 1
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, 9:] = 0
    ids[1, 9:] = 0
    starts, ends = torch.tensor([3, SEQ]), torch.tensor([5, 2])  # the second start: none
    labels = torch.tensor([2, 0])
    targets = torch.tensor([1.5, 3.25], dtype=torch.float64)
    golden = {"input_ids": ids.float(), "token_type_ids": types.float(), "attention_mask": mask.float(),
              "qa.start_positions": starts.float(), "qa.end_positions": ends.float(),
              "cls.labels": labels.float(), "reg.targets": targets.float()}

    model, heads = fresh(1234)
    for name, tensor in model.hf_state_dict().items():
        golden["weights." + name] = tensor.float()
    for head, prefix in (("qa", "qa_outputs"), ("cls", "classifier"), ("reg", "classifier")):
        golden[f"weights.{head}.{prefix}.weight"] = heads[head].weight.detach().float()
        golden[f"weights.{head}.{prefix}.bias"] = heads[head].bias.detach().float()

    # Question answering (no pooler in BertForQuestionAnswering).
    model, heads = fresh(1234)
    hidden, _, _, _ = model(ids, types, mask)
    logits = heads["qa"](hidden)
    start_logits, end_logits = logits[..., 0], logits[..., 1]
    ignored = start_logits.shape[1]
    ce = torch.nn.CrossEntropyLoss(ignore_index=ignored)
    loss = (ce(start_logits, starts.clamp(0, ignored)) + ce(end_logits, ends.clamp(0, ignored))) / 2
    named = hf_parameters(model, {"qa_outputs.weight": heads["qa"].weight, "qa_outputs.bias": heads["qa"].bias})
    named = {n: p for n, p in named.items() if not n.startswith("bert.pooler")}
    golden["qa.loss"] = torch.tensor([loss.item()])
    record(golden, "qa", named, gradients(loss, named))

    # Classification, then regression, on the pooled output.
    for head, kind in (("cls", "classification"), ("reg", "regression")):
        model, heads = fresh(1234)
        _, pooled, _, _ = model(ids, types, mask)
        out = heads[head](pooled)
        if kind == "classification":
            loss = torch.nn.functional.cross_entropy(out, labels)
        else:
            loss = torch.nn.functional.mse_loss(out.squeeze(-1), targets)
        named = hf_parameters(model, {"classifier.weight": heads[head].weight,
                                      "classifier.bias": heads[head].bias})
        golden[head + ".loss"] = torch.tensor([loss.item()])
        record(golden, head, named, gradients(loss, named))

    write_safetensors(os.path.join(OUT, "finetune_golden.safetensors"), golden, torch.float32)
    print("wrote finetune_golden.safetensors; losses", golden["qa.loss"].item(), golden["cls.loss"].item(),
          golden["reg.loss"].item())


if __name__ == "__main__":
    main()
