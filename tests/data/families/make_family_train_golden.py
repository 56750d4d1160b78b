"""One fine-tuning step of each family's head against PyTorch: for the
classification and question-answering directories make_families.py writes,
transformers' loss and the gradient of every parameter (f64, dropout off)
on a small padded batch of lines.txt, written to train_golden.json as each
gradient's shape, sum, L2 norm and 16 of its entries (the whole gradients
would be megabytes; an error in any op moves these). The reference of
tests/families_test.cpp's Families.*TrainingStep*.

  /tmp/st/bin/python tests/data/families/make_family_train_golden.py   (as make_families.py)
"""
import json
import os

import torch
import transformers
from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
# Every pair is longer than SEQ tokens: no row is padded (transformers reads
# RoBERTa's padding positions from row padding_idx, polyhal from the row's
# own position: a question-answering loss over padded positions would differ).
SEQ = 16
CASES = {  # directory: (model class, head)
    "roberta_reranker": (AutoModelForSequenceClassification, "regression"),
    "camembert_classifier": (AutoModelForSequenceClassification, "classification"),
    "electra_classifier": (AutoModelForSequenceClassification, "classification"),
    "electra_small_classifier": (AutoModelForSequenceClassification, "classification"),
    "xlm_roberta_qa": (AutoModelForQuestionAnswering, "question_answering"),
    "distilbert_qa": (AutoModelForQuestionAnswering, "question_answering"),
    "distilbert_classifier": (AutoModelForSequenceClassification, "classification"),
    "mpnet_classifier": (AutoModelForSequenceClassification, "classification"),
    "modernbert_classifier": (AutoModelForSequenceClassification, "classification"),
    "modernbert_cls_classifier": (AutoModelForSequenceClassification, "classification"),
    "modernbert_qa": (AutoModelForQuestionAnswering, "question_answering"),
    "mpnet_qa": (AutoModelForQuestionAnswering, "question_answering"),
    "electra_qa": (AutoModelForQuestionAnswering, "question_answering"),
}
# The families whose models take no token types.
NO_TYPES = ("distilbert", "mpnet", "modernbert")


def summary(tensor):
    flat = tensor.detach().reshape(-1)
    picks = sorted({int(i) for i in torch.linspace(0, flat.numel() - 1, 16)})
    return {"shape": list(tensor.shape), "sum": float(flat.sum()), "norm": float(flat.norm()),
            "samples": [[i, float(flat[i])] for i in picks]}


def main():
    lines = [l.rstrip("\n") for l in open(os.path.join(HERE, "lines.txt"), encoding="utf-8")]
    pairs = [l.split("\t") for l in lines if "\t" in l][:4]
    out = {"seq": SEQ, "versions": {"torch": torch.__version__,
                                    "transformers": transformers.__version__}}
    for name, (cls, head) in CASES.items():
        directory = os.path.join(HERE, name)
        tokenizer = AutoTokenizer.from_pretrained(directory)
        # eval: no dropout; ModernBERT on the attention it runs on a CPU (sdpa).
        model = cls.from_pretrained(directory).double().eval()
        batch = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding="max_length",
                          truncation=True, max_length=SEQ, return_tensors="pt")
        assert bool(batch["attention_mask"].all()), (name, "a padded row")
        if "token_type_ids" not in batch:
            batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
        inputs = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")}
        if model.config.model_type not in NO_TYPES:
            inputs["token_type_ids"] = batch["token_type_ids"]
        record = {k: batch[k].tolist() for k in ("input_ids", "token_type_ids", "attention_mask")}
        if head == "question_answering":
            starts, ends = [3, 5, 4, 6], [5, 9, 4, 8]
            result = model(**inputs, start_positions=torch.tensor(starts),
                           end_positions=torch.tensor(ends))
            record.update(start_positions=starts, end_positions=ends)
        elif head == "regression":
            targets = [0.25, -1.0, 0.75, 2.0]
            result = model(**inputs, labels=torch.tensor(targets, dtype=torch.float64))
            record["targets"] = targets
        else:
            labels = [i % model.config.num_labels for i in range(len(pairs))]
            result = model(**inputs, labels=torch.tensor(labels))
            record["labels"] = labels
        result.loss.backward()
        record["loss"] = float(result.loss.detach())
        record["gradients"] = {n: summary(p.grad) for n, p in model.named_parameters()
                               if p.grad is not None}
        out[name] = record
    with open(os.path.join(HERE, "train_golden.json"), "w") as f:
        json.dump(out, f, indent=0)


if __name__ == "__main__":
    main()
