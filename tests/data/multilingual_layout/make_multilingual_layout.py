"""A sentence-transformers directory in the layout of
paraphrase-multilingual-MiniLM-L12-v2 (a BERT encoder with XLM-R's
SentencePiece Unigram tokenizer.json, Precompiled normaliser, mean pooling),
small and with seeded random weights (no such model can be fetched here),
and the embeddings sentence-transformers computes for the corpus lines of
../tokenizer_pipeline/corpus.txt: the reference of
RealModel-free test TokenizerPipeline.AnXlmrTokenizedBertEmbedsAsSentenceTransformers.

  python3 -m venv /tmp/st && /tmp/st/bin/pip install "numpy<2.4" safetensors tokenizers \\
      transformers==5.23.0 torch==2.15.0 sentence-transformers==6.2.0
  /tmp/st/bin/python tests/data/multilingual_layout/make_multilingual_layout.py
"""
import json
import os
import shutil
import tempfile

import torch
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformer, models
from transformers import BertConfig, BertModel, XLMRobertaTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINE = os.path.join(os.path.dirname(HERE), "tokenizer_pipeline")
MODEL = os.path.join(HERE, "model")


def main():
    torch.manual_seed(1234)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(PIPELINE, "unigram_precompiled", "tokenizer.json"), tmp)
        tokenizer = XLMRobertaTokenizerFast(tokenizer_file=os.path.join(tmp, "tokenizer.json"))
        config = BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=128,
                            max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id)
        encoder = BertModel(config, add_pooling_layer=True)
        encoder.eval()
        base = os.path.join(tmp, "base")
        encoder.save_pretrained(base)
        tokenizer.save_pretrained(base)
        word = models.Transformer(base, max_seq_length=128)
        pooling = models.Pooling(word.get_word_embedding_dimension(), pooling_mode="mean")
        st = SentenceTransformer(modules=[word, pooling], device="cpu")
        if os.path.exists(MODEL):
            shutil.rmtree(MODEL)
        st.save(MODEL)
    for extra in ("README.md",):
        if os.path.exists(os.path.join(MODEL, extra)):
            os.remove(os.path.join(MODEL, extra))
    st = SentenceTransformer(MODEL, device="cpu")
    with open(os.path.join(PIPELINE, "corpus.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    # polyhal reads a tab in a text line as a pair's separator: single texts only.
    lines = [line for line in lines if line.strip() and "\t" not in line]
    with torch.no_grad():
        embeddings = st.encode(lines, convert_to_tensor=True, batch_size=8)
    with open(os.path.join(HERE, "lines.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    save_file({"embeddings": embeddings.float().contiguous()},
              os.path.join(HERE, "reference.safetensors"),
              metadata={"torch": torch.__version__,
                        "sentence_transformers": __import__("sentence_transformers").__version__})


if __name__ == "__main__":
    main()
