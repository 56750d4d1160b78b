"""Writes the fine-tuned model directories `polyhal serve`'s head tests read
(tests/serve_heads_test.py) and what transformers answers for them.

Three tiny BERTs on the test corpus vocabulary (tests/data/corpus/vocab.txt),
seeded, saved as Hugging Face saves a fine-tuned model (save_pretrained:
config.json with architectures and id2label, model.safetensors, the
tokenizer's files):
  classifier/          BertForSequenceClassification, 3 labels (negative, neutral, positive)
  cross_encoder/       BertForSequenceClassification, 1 label (a reranker's score)
  question_answering/  BertForQuestionAnswering
and reference.json: the classifier's logits for texts and pairs, the
cross-encoder's logits for (query, text) pairs, and the question-answering
pipeline's best answer (text and character offsets) for questions over a
context, all from transformers.

  python3 make_serve_heads.py        (torch, transformers 4.38.2; writes beside itself)
"""
import json
import os
import shutil

import torch
import transformers
from transformers import (BertConfig, BertForQuestionAnswering, BertForSequenceClassification,
                          BertTokenizerFast, pipeline)

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "corpus", "vocab.txt")

TEXTS = ["the king was at the market .", "the old farmer walked over the bridge",
         "quiet green forest", "the small child is in the school garden with a friend ."]
PAIRS = [["the king was at the market .", "the queen was at the market ."],
         ["the river", "a large mountain in the north"]]
QUERY = "where was the king ?"
DOCUMENTS = ["the king was at the market .", "the farmer walked over the bridge in the morning .",
             "water", "the king and the queen were in the tower at night ."]
CONTEXT = ("the old king was in the tower . the farmer walked over the bridge in the morning . "
           "the teacher and the child were at the school . the river was quiet at night .")
QUESTIONS = ["where was the king ?", "who walked over the bridge ?", "when was the river quiet ?"]


def config(vocab_size, **extra):
    return BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                      initializer_range=0.5, **extra)


def save(model, tokenizer, name):
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # Only what a user's export needs and polyhal reads: no tokenizer.json
    # (the vocabulary and tokenizer_config.json say the same).
    for extra in ("tokenizer.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(out, extra)):
            os.remove(os.path.join(out, extra))
    return out


def logits(model, tokenizer, a, b=None):
    encoded = tokenizer(a, b, return_tensors="pt")
    with torch.no_grad():
        return model(**encoded).logits[0].tolist()


def main():
    tokenizer = BertTokenizerFast(VOCAB, do_lower_case=True)
    n = tokenizer.vocab_size
    reference = {"transformers": transformers.__version__, "torch": torch.__version__}

    torch.manual_seed(1)
    labels = {0: "negative", 1: "neutral", 2: "positive"}
    classifier = BertForSequenceClassification(
        config(n, num_labels=3, id2label=labels, label2id={v: k for k, v in labels.items()})).eval()
    save(classifier, tokenizer, "classifier")
    reference["classifier"] = {
        "texts": [{"input": t, "logits": logits(classifier, tokenizer, t)} for t in TEXTS],
        "pairs": [{"input": p, "logits": logits(classifier, tokenizer, *p)} for p in PAIRS]}

    torch.manual_seed(2)
    cross = BertForSequenceClassification(config(n, num_labels=1)).eval()
    save(cross, tokenizer, "cross_encoder")
    reference["cross_encoder"] = {
        "query": QUERY,
        "texts": DOCUMENTS,
        "logits": [logits(cross, tokenizer, QUERY, d)[0] for d in DOCUMENTS]}

    torch.manual_seed(3)
    qa = BertForQuestionAnswering(config(n)).eval()
    save(qa, tokenizer, "question_answering")
    answerer = pipeline("question-answering", model=qa, tokenizer=tokenizer, device="cpu")
    answers = []
    for question in QUESTIONS:
        best = answerer(question=question, context=CONTEXT, max_answer_len=30)
        answers.append({"question": question, "answer": best["answer"], "start": best["start"],
                        "end": best["end"]})
    reference["question_answering"] = {"context": CONTEXT, "answers": answers}

    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
