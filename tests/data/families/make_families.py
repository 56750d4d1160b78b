"""Small models of each encoder family polyhal reads, with seeded random
weights made by transformers itself (no model of these families can be
fetched here), saved as the hub's directories are, and what transformers and
sentence-transformers compute for them: the reference of
tests/families_test.cpp.

Each directory is what save_pretrained writes: config.json,
model.safetensors, tokenizer.json (transformers' own rebuild of the
tokenizer_pipeline fixture named in FAMILIES, or for "wordpiece" one of
1,500 pieces trained here on the test corpora) and tokenizer_config.json;
the sentence-transformers directory adds modules.json and 1_Pooling.

  roberta_reranker/        RobertaForSequenceClassification, 1 label (a
                           reranker: the two-layer classifier head), byte-level BPE
  xlm_roberta_embedder/    XLMRobertaModel under sentence-transformers mean
                           pooling (the layout of multilingual-e5), Unigram
  xlm_roberta_qa/          XLMRobertaForQuestionAnswering, Unigram
  camembert_classifier/    CamembertForSequenceClassification, 3 labels, Unigram
  distilbert_embedder/     DistilBertModel under mean pooling (the layout of
                           msmarco-distilbert-base-v4), WordPiece
  distilbert_qa/           DistilBertForQuestionAnswering, WordPiece
  distilbert_classifier/   DistilBertForSequenceClassification (pre_classifier
                           with ReLU), 2 labels, WordPiece
  mpnet_embedder/          MPNetModel under mean pooling (the layout of
                           all-mpnet-base-v2: its relative-position bias), WordPiece
  mpnet_classifier/        MPNetForSequenceClassification, 2 labels, WordPiece
  electra_classifier/      ElectraForSequenceClassification (the discriminator,
                           embedding_size = hidden_size), 2 labels, WordPiece
  electra_small_classifier/  the same with embedding_size 32 < hidden_size 64
                           (ELECTRA-small's layout: embeddings_project)
  modernbert_embedder/     ModernBertModel under mean pooling (gte-modernbert's
                           layout): 3 layers, global every 2nd (layers 0 and 2),
                           a sliding window of 8 tokens on layer 1, no biases
  modernbert_classifier/   ModernBertForSequenceClassification, 3 labels,
                           classifier_pooling "mean" (ModernBERT-base's), every
                           bias present (attention, MLP, norms, head)
  modernbert_cls_classifier/  the same on the first token, without biases, 2 labels
  modernbert_qa/           ModernBertForQuestionAnswering: its prediction head
                           (dense, GELU, norm) on every token, then classifier;
                           attention and norm biases
  mpnet_qa/                MPNetForQuestionAnswering, WordPiece
  electra_embedder/        ElectraModel under mean pooling with ELECTRA-small's
                           projected embeddings, WordPiece
  roberta_embedder/        RobertaModel under mean pooling (all-distilroberta-v1's
                           layout), byte-level BPE
  electra_qa/              ElectraForQuestionAnswering with ELECTRA-small's
                           projected embeddings, WordPiece

ModernBERT's random initialisation leaves biases 0 and norms 1: its
directories get seeded noise on every parameter, so those are tested too.

reference.safetensors: per directory, "<dir>.embeddings" (sentence-
transformers' encode of lines.txt), "<dir>.logits" (the head's logits of
each line of lines.txt, a TAB making a pair, as transformers computes them)
or "<dir>.start_logits"/"<dir>.end_logits" (a row per line, zero past its
tokens).

  python3 -m venv /tmp/st && /tmp/st/bin/pip install "numpy<2.4" safetensors tokenizers \\
      transformers==5.23.0 torch==2.15.0 sentence-transformers==6.2.0
  /tmp/st/bin/python tests/data/families/make_families.py [DIRECTORY ...]
"""
import json
import os
import shutil
import tempfile

import torch
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformer, models
import transformers
from transformers import (BertTokenizerFast, CamembertConfig, CamembertForSequenceClassification,
                          DistilBertConfig, DistilBertForQuestionAnswering,
                          DistilBertForSequenceClassification, DistilBertModel,
                          ElectraConfig, ElectraForQuestionAnswering, ElectraModel,
                          RobertaModel,
                          ElectraForSequenceClassification, MPNetConfig,
                          MPNetForQuestionAnswering,
                          ModernBertConfig, ModernBertForQuestionAnswering,
                          ModernBertForSequenceClassification,
                          ModernBertModel, MPNetForSequenceClassification, MPNetModel,
                          RobertaConfig,
                          RobertaForSequenceClassification, RobertaTokenizerFast,
                          XLMRobertaConfig, XLMRobertaForQuestionAnswering, XLMRobertaModel,
                          XLMRobertaTokenizerFast)

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINE = os.path.join(os.path.dirname(HERE), "tokenizer_pipeline")
SIZE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=130)
# DistilBertConfig's own names for the same sizes.
DISTIL_SIZE = dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=130)
ENCODERS = (XLMRobertaModel, DistilBertModel, MPNetModel, ModernBertModel, ElectraModel,
            RobertaModel)  # sentence-transformers dirs
# ModernBERT's sizes: a window of 8 (4 each side) shorter than most lines,
# intermediate 96 (GeGLU's Wi is 2 x 96), theta of its own per layer kind.
MODERNBERT = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=96,
                  max_position_embeddings=130, global_attn_every_n_layers=2, local_attention=8,
                  global_rope_theta=160000.0, local_rope_theta=10000.0, reference_compile=False)
BIASES = dict(attention_bias=True, mlp_bias=True, norm_bias=True, classifier_bias=True)

# name: (config class, model class, tokenizer class, tokenizer fixture, extra config)
FAMILIES = {
    "roberta_reranker": (RobertaConfig, RobertaForSequenceClassification, RobertaTokenizerFast,
                         "bpe_byte_level", dict(num_labels=1)),
    "xlm_roberta_embedder": (XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast,
                             "unigram_precompiled", {}),
    "xlm_roberta_qa": (XLMRobertaConfig, XLMRobertaForQuestionAnswering, XLMRobertaTokenizerFast,
                       "unigram_precompiled", {}),
    "camembert_classifier": (CamembertConfig, CamembertForSequenceClassification,
                             XLMRobertaTokenizerFast, "unigram_precompiled",
                             dict(num_labels=3, id2label={0: "negative", 1: "neutral",
                                                          2: "positive"},
                                  label2id={"negative": 0, "neutral": 1, "positive": 2})),
    "distilbert_embedder": (DistilBertConfig, DistilBertModel, BertTokenizerFast, "wordpiece", {}),
    "distilbert_qa": (DistilBertConfig, DistilBertForQuestionAnswering, BertTokenizerFast,
                      "wordpiece", {}),
    "distilbert_classifier": (DistilBertConfig, DistilBertForSequenceClassification,
                              BertTokenizerFast, "wordpiece", dict(num_labels=2)),
    "mpnet_embedder": (MPNetConfig, MPNetModel, BertTokenizerFast, "wordpiece_pad1", {}),
    "mpnet_classifier": (MPNetConfig, MPNetForSequenceClassification, BertTokenizerFast,
                         "wordpiece_pad1", dict(num_labels=2)),
    "electra_classifier": (ElectraConfig, ElectraForSequenceClassification, BertTokenizerFast,
                           "wordpiece", dict(num_labels=2, embedding_size=64)),
    "electra_small_classifier": (ElectraConfig, ElectraForSequenceClassification,
                                 BertTokenizerFast, "wordpiece",
                                 dict(num_labels=2, embedding_size=32)),
    "modernbert_embedder": (ModernBertConfig, ModernBertModel, BertTokenizerFast, "wordpiece", {}),
    "modernbert_classifier": (ModernBertConfig, ModernBertForSequenceClassification,
                              BertTokenizerFast, "wordpiece",
                              dict(num_labels=3, classifier_pooling="mean", **BIASES)),
    "modernbert_cls_classifier": (ModernBertConfig, ModernBertForSequenceClassification,
                                  BertTokenizerFast, "wordpiece",
                                  dict(num_labels=2, classifier_pooling="cls")),
    "modernbert_qa": (ModernBertConfig, ModernBertForQuestionAnswering, BertTokenizerFast,
                      "wordpiece", dict(attention_bias=True, norm_bias=True)),
    "mpnet_qa": (MPNetConfig, MPNetForQuestionAnswering, BertTokenizerFast, "wordpiece_pad1", {}),
    "electra_qa": (ElectraConfig, ElectraForQuestionAnswering, BertTokenizerFast, "wordpiece",
                   dict(embedding_size=32)),
    "electra_embedder": (ElectraConfig, ElectraModel, BertTokenizerFast, "wordpiece",
                         dict(embedding_size=32)),
    "roberta_embedder": (RobertaConfig, RobertaModel, RobertaTokenizerFast, "bpe_byte_level", {}),
}


def read_lines():
    with open(os.path.join(HERE, "lines.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def trained_wordpiece(path, special):
    """An uncased BERT WordPiece of 1,500 pieces trained on the test corpora
    (the tokenizer_pipeline fixture's is 85 pieces: too few for a golden)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers
    texts = []
    for name in ("tokenizer_pipeline/corpus.txt", "real_model/sentences.txt",
                 "corpus/text/part-0.txt", "corpus/text/part-1.txt"):
        with open(os.path.join(os.path.dirname(HERE), name), encoding="utf-8") as f:
            texts += [line.rstrip("\n") for line in f if line.strip()]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=1500,
                                                                   special_tokens=special))
    tokenizer.post_processor = processors.BertProcessing(
        ("[SEP]", tokenizer.token_to_id("[SEP]")), ("[CLS]", tokenizer.token_to_id("[CLS]")))
    tokenizer.save(path)


# BERT's special tokens first; MPNet's order puts its padding at id 1, the
# position MPNetEmbeddings treats as padding whatever the config says.
SPECIAL = {"wordpiece": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
           "wordpiece_pad1": ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"]}


def tokenizer_of(cls, fixture):
    if fixture in SPECIAL:
        path = os.path.join(tempfile.gettempdir(), f"polyhal_families_{fixture}.json")
        if not os.path.exists(path):
            trained_wordpiece(path, SPECIAL[fixture])
        return cls(tokenizer_file=path)
    return cls(tokenizer_file=os.path.join(PIPELINE, fixture, "tokenizer.json"))


def encoded(tokenizer, line):
    """One line of lines.txt as transformers encodes it: a TAB makes a pair."""
    first, tab, second = line.partition("\t")
    if tab:
        return tokenizer(first, second, truncation=True, max_length=128, return_tensors="pt")
    return tokenizer(first, truncation=True, max_length=128, return_tensors="pt")


def head_outputs(model, tokenizer, lines):
    """The head's logits for each line, one line a batch (a padded batch of
    singles and pairs would pair the singles with an empty text)."""
    out = {}
    with torch.no_grad():
        results = [model(**encoded(tokenizer, line)) for line in lines]
    if hasattr(results[0], "start_logits"):
        width = max(r.start_logits.shape[1] for r in results)
        for key in ("start_logits", "end_logits"):
            rows = torch.zeros(len(results), width)
            for i, r in enumerate(results):
                logits = getattr(r, key)[0]
                rows[i, :logits.shape[0]] = logits
            out[key] = rows.contiguous()
    else:
        out["logits"] = torch.cat([r.logits for r in results]).float().contiguous()
    return out


def make(name, lines, reference):
    config_cls, model_cls, tokenizer_cls, fixture, extra = FAMILIES[name]
    tokenizer = tokenizer_of(tokenizer_cls, fixture)
    size = {DistilBertConfig: DISTIL_SIZE, ModernBertConfig: MODERNBERT}.get(config_cls, SIZE)
    ids = dict(pad_token_id=tokenizer.pad_token_id)
    if tokenizer.bos_token_id is not None:
        ids.update(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    if config_cls is ModernBertConfig:
        ids.update(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                   cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id)
    config = config_cls(vocab_size=len(tokenizer), **ids, **size, **extra)
    torch.manual_seed(sum(map(ord, name)))
    model = model_cls(config).eval()
    if config_cls is ModernBertConfig:  # biases 0 and norms 1 would test nothing
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
    out = os.path.join(HERE, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    if model_cls in ENCODERS:  # a sentence-transformers directory
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            word = models.Transformer(tmp, max_seq_length=128)
            pooling = models.Pooling(word.get_word_embedding_dimension(), pooling_mode="mean")
            SentenceTransformer(modules=[word, pooling], device="cpu").save(out)
        st = SentenceTransformer(out, device="cpu")
        singles = [line for line in lines if "\t" not in line]
        with torch.no_grad():
            reference[name + ".embeddings"] = st.encode(singles, convert_to_tensor=True,
                                                        batch_size=8).float().contiguous()
    else:
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        for key, value in head_outputs(model, tokenizer, lines).items():
            reference[f"{name}.{key}"] = value
    readme = os.path.join(out, "README.md")
    if os.path.exists(readme):
        os.remove(readme)


def main():
    import sys
    lines = read_lines()
    path = os.path.join(HERE, "reference.safetensors")
    # With directory names, only those are remade (the others keep their
    # reference as it is).
    only = sys.argv[1:]
    reference = {}
    if only:
        from safetensors.torch import load_file
        reference = {k: v for k, v in load_file(path).items() if k.split(".")[0] not in only}
    for name in FAMILIES:
        if not only or name in only:
            make(name, lines, reference)
    save_file(reference, path,
              metadata={"torch": torch.__version__, "transformers": transformers.__version__,
                        "sentence_transformers":
                            __import__("sentence_transformers").__version__})


if __name__ == "__main__":
    main()
