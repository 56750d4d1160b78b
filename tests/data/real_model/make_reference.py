#!/usr/bin/env python3
"""Writes reference.safetensors: what the reference libraries compute for the
real model on sentences.txt, for tests/real_model_test.cpp.

The model is sentence-transformers/all-MiniLM-L6-v2 as scripts/fetch-real-model.sh
caches it. For every sentence, at 128 tokens (truncated as BertTokenizerFast
truncates one sentence):
- "ids": the token ids of BertTokenizerFast, all sentences end to end (I32),
  with "lengths" (I32) the count per sentence;
- "embeddings" [N, 384]: transformers' BertModel in f32, mean pooling over
  the attention mask and L2 normalisation, as the model card defines the
  embedding; checked here against sentence-transformers' own encode();
- "hidden.<i>" [tokens, 384]: the last hidden state of sentence i for the
  first HIDDEN sentences (the whole of every sentence would be megabytes).

Pinned versions (a virtual environment over Debian's python3-torch 1.13):
  python3 -m venv --system-site-packages build/ref-venv
  build/ref-venv/bin/pip install transformers==4.38.2 tokenizers==0.15.2 numpy==1.24.4 \\
      scipy==1.10.1 scikit-learn==1.2.2 sentence-transformers==2.6.1 safetensors==0.4.2
  build/ref-venv/bin/python tests/data/real_model/make_reference.py build/models/all-MiniLM-L6-v2
"""
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, BertTokenizer, BertTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ, HIDDEN = 128, 16


def main():
    model_dir = sys.argv[1]
    with open(os.path.join(HERE, "sentences.txt"), encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f]
    fast = BertTokenizerFast.from_pretrained(model_dir)
    slow = BertTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    tensors, ids, lengths, embeddings = {}, [], [], []
    with torch.no_grad():
        for i, sentence in enumerate(sentences):
            encoded = fast(sentence, truncation=True, max_length=SEQ, return_tensors="pt")
            assert encoded["input_ids"][0].tolist() == slow(
                sentence, truncation=True, max_length=SEQ)["input_ids"], sentence
            hidden = model(**encoded).last_hidden_state[0]
            mask = encoded["attention_mask"][0].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(0) / mask.sum().clamp(min=1e-9)
            embeddings.append(torch.nn.functional.normalize(pooled, dim=0).numpy())
            ids.extend(encoded["input_ids"][0].tolist())
            lengths.append(encoded["input_ids"].shape[1])
            if i < HIDDEN:
                tensors[f"hidden.{i}"] = hidden.numpy().astype(np.float32)
    embeddings = np.stack(embeddings).astype(np.float32)
    st = SentenceTransformer(model_dir, device="cpu")
    st.max_seq_length = SEQ
    theirs = st.encode(sentences, batch_size=32, convert_to_numpy=True)
    worst = float(np.abs(theirs - embeddings).max())
    assert worst < 1e-5, f"sentence-transformers differs from the model card's pooling by {worst}"
    tensors["embeddings"] = embeddings
    tensors["ids"] = np.array(ids, dtype=np.int32)
    tensors["lengths"] = np.array(lengths, dtype=np.int32)
    import transformers, tokenizers, sentence_transformers, safetensors
    save_file(tensors, os.path.join(HERE, "reference.safetensors"), metadata={
        "torch": torch.__version__, "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "sentences": str(len(sentences)), "seq": str(SEQ),
        "sentence_transformers_max_abs_difference": f"{worst:.3g}"})
    print(f"wrote {len(sentences)} sentences; sentence-transformers agrees to {worst:.3g}")


if __name__ == "__main__":
    main()
