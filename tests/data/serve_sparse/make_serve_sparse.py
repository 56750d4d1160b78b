"""Writes the SPLADE model `polyhal serve`'s /embed_sparse test reads
(tests/serve_sparse_test.py) and what transformers computes for it.

A tiny BertForMaskedLM on the test corpus vocabulary
(tests/data/corpus/vocab.txt), seeded, saved as Hugging Face saves one
(save_pretrained), in model/, and reference.json: for each text, SPLADE's
sparse vector as text-embeddings-inference and sentence-transformers'
SpladePooling compute it, max over the tokens (special ones included) of
log(1 + relu(MLM logits)), kept where it is above zero, as {index: value}.

  python3 make_serve_sparse.py   (torch, transformers; the serve bench venv has them)
"""
import json
import os
import shutil

import torch
import transformers
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "corpus", "vocab.txt")
TEXTS = ["the king was at the market .", "the old farmer walked over the bridge",
         "quiet green forest", "the small child is in the school garden with a friend ."]


def main():
    torch.manual_seed(71)
    tokenizer = BertTokenizerFast(VOCAB, do_lower_case=True)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                        initializer_range=0.5)
    model = BertForMaskedLM(config).eval()
    with torch.no_grad():  # a bias that leaves some logits below zero, some above
        model.cls.predictions.bias.uniform_(-1.0, 0.5)
    out = os.path.join(HERE, "model")
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    reference = []
    with torch.no_grad():
        for text in TEXTS:
            encoded = tokenizer(text, return_tensors="pt")
            logits = model(**encoded).logits[0]
            weights = torch.log1p(torch.relu(logits)).max(dim=0).values
            reference.append({"text": text,
                              "sparse": {str(i): float(weights[i])
                                         for i in torch.nonzero(weights > 0).flatten().tolist()}})
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                   "texts": reference}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
