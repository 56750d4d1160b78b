"""Writes a BERT-base-sized sentence-transformers model for the serving
benchmark: bert-base-uncased's shape (12 layers, hidden 768, 12 heads,
intermediate 3072, 512 positions) with seeded random weights (normal,
std 0.02, as BertModel initialises them), and the fetched
all-MiniLM-L6-v2's vocabulary (bert-base-uncased's), tokenizer and
pooling files, so every server reads it as it reads a real model.

The weights are not trained: the benchmark measures speed, which depends on
the shapes alone, and no BERT-base-sized embedding model can be fetched
here (only the Python Package Index is reachable). Its embeddings mean
nothing; bench/serve_bench.py's table says so.

  build/serve-bench-venv/bin/python bench/make_bert_base_model.py \
      build/models/all-MiniLM-L6-v2 build/models/bert-base-random
"""
import json
import os
import shutil
import sys

import torch
from transformers import BertConfig, BertModel


def main():
    source, out = sys.argv[1], sys.argv[2]
    if os.path.exists(os.path.join(out, "model.safetensors")):
        print(f"make_bert_base_model: {out} (already there)")
        return
    torch.manual_seed(55)
    config = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                        num_attention_heads=12, intermediate_size=3072,
                        max_position_embeddings=512, type_vocab_size=2)
    model = BertModel(config, add_pooling_layer=False).eval()
    model.save_pretrained(out, safe_serialization=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        shutil.copy(os.path.join(source, name), out)
    pooling = os.path.join(out, "1_Pooling")
    os.makedirs(pooling, exist_ok=True)
    with open(os.path.join(source, "1_Pooling", "config.json")) as f:
        pooling_config = json.load(f)
    pooling_config["word_embedding_dimension"] = config.hidden_size
    with open(os.path.join(pooling, "config.json"), "w") as f:
        json.dump(pooling_config, f, indent=2)
    print(f"make_bert_base_model: {out} ({sum(p.numel() for p in model.parameters()):,} "
          "parameters, random)")


if __name__ == "__main__":
    main()
