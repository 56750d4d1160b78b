"""Writes a base-sized sentence-transformers model of a family for the
serving benchmark, with seeded random weights (as each family's
transformers class initialises them) and the tokenizer and pooling of the
models users deploy in that family:

  bert         bert-base-uncased's shape (12 layers, hidden 768, 12 heads,
               intermediate 3072, 512 positions), the fetched
               all-MiniLM-L6-v2's WordPiece (bert-base-uncased's) and
               layout (mean pooling, normalised);
  xlm-roberta  xlm-roberta-base's shape (the same encoder, 250,002-token
               vocabulary, 514 positions, one token type), multilingual-e5's
               layout (mean pooling, normalised); its tokenizer is a Unigram
               with XLM-R's pipeline (Metaspace, <s> </s> </s> pairs) trained
               offline on the test corpora and the benchmark's sentences
               (XLM-R's own SentencePiece model cannot be fetched here), so
               its ids fill only the first few thousand rows of the table;
  modernbert   ModernBERT-base's shape (22 layers, hidden 768, 12 heads,
               GeGLU intermediate 1152, global attention every 3rd layer, a
               128-token window on the others, rotary bases 160,000 and
               10,000, no biases, 50,368-token vocabulary), gte-modernbert's
               layout ([CLS] pooling, normalised), with MiniLM's WordPiece in
               place of ModernBERT's byte-level BPE (which cannot be fetched;
               on English text the two give about as many tokens).

The weights are not trained: the benchmark measures speed, which depends on
the shapes and the token counts alone, and no base-sized embedding model
can be fetched here (only the Python Package Index is reachable). Their
embeddings mean nothing; bench/serve_bench.py's table says so.

  build/serve-bench-venv/bin/python bench/make_bert_base_model.py \\
      build/models/all-MiniLM-L6-v2 build/models/bert-base-random [--family bert]
"""
import argparse
import json
import os
import shutil

import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json")


def bert_model():
    config = transformers.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                                     num_attention_heads=12, intermediate_size=3072,
                                     max_position_embeddings=512, type_vocab_size=2)
    return transformers.BertModel(config, add_pooling_layer=False)


def xlm_roberta_model():
    config = transformers.XLMRobertaConfig(
        vocab_size=250002, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1,
        layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    return transformers.XLMRobertaModel(config, add_pooling_layer=False)


def modernbert_model():
    # The WordPiece's own special ids ([PAD] 0, [CLS] 101, [SEP] 102, [MASK] 103).
    config = transformers.ModernBertConfig(
        vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
        intermediate_size=1152, max_position_embeddings=8192, global_attn_every_n_layers=3,
        local_attention=128, global_rope_theta=160000.0, local_rope_theta=10000.0,
        pad_token_id=0, cls_token_id=101, sep_token_id=102, bos_token_id=101, eos_token_id=102,
        reference_compile=False)
    return transformers.ModernBertModel(config)


def trained_unigram(out):
    """XLM-R's tokenizer pipeline on a Unigram trained here (see the docstring)."""
    from tokenizers import SentencePieceUnigramTokenizer, processors
    texts = []
    for name in ("tokenizer_pipeline/corpus.txt", "real_model/sentences.txt",
                 "corpus/text/part-0.txt", "corpus/text/part-1.txt"):
        with open(os.path.join(ROOT, "tests", "data", name), encoding="utf-8") as f:
            texts += [line.strip() for line in f if line.strip()]
    unigram = SentencePieceUnigramTokenizer()
    unigram.train_from_iterator(texts, vocab_size=8000, unk_token="<unk>",
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    unigram._tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    path = os.path.join(out, "unigram.json")
    unigram.save(path)
    tokenizer = transformers.XLMRobertaTokenizerFast(tokenizer_file=path)
    os.remove(path)
    tokenizer.save_pretrained(out)


FAMILIES = {
    # name: (model, pooling mode, normalised)
    "bert": (bert_model, "mean", True),
    "xlm-roberta": (xlm_roberta_model, "mean", True),
    "modernbert": (modernbert_model, "cls", True),
}


def write_sentence_transformers_files(source, out, hidden, pooling, normalize):
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(out, "2_Normalize"), exist_ok=True)
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    for name in ("sentence_bert_config.json", "config_sentence_transformers.json"):
        shutil.copy(os.path.join(source, name), out)
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": hidden,
                   "pooling_mode_cls_token": pooling == "cls",
                   "pooling_mode_mean_tokens": pooling == "mean",
                   "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False}, f, indent=2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", help="the fetched all-MiniLM-L6-v2 directory")
    parser.add_argument("out")
    parser.add_argument("--family", choices=FAMILIES, default="bert")
    args = parser.parse_args()
    if os.path.exists(os.path.join(args.out, "model.safetensors")):
        print(f"make_bert_base_model: {args.out} (already there)")
        return
    make, pooling, normalize = FAMILIES[args.family]
    torch.manual_seed(55)
    model = make().eval()
    model.save_pretrained(args.out, safe_serialization=True)
    if args.family == "xlm-roberta":
        trained_unigram(args.out)
    else:
        for name in TOKENIZER_FILES:
            shutil.copy(os.path.join(args.source, name), args.out)
    if args.family == "modernbert":  # as ModernBERT's own: no token types to pass it
        path = os.path.join(args.out, "tokenizer_config.json")
        with open(path) as f:
            tokenizer_config = json.load(f)
        tokenizer_config["model_input_names"] = ["input_ids", "attention_mask"]
        with open(path, "w") as f:
            json.dump(tokenizer_config, f, indent=2)
    write_sentence_transformers_files(args.source, args.out, model.config.hidden_size, pooling,
                                      normalize)
    print(f"make_bert_base_model: {args.out} ({args.family}, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters, random)")


if __name__ == "__main__":
    main()
