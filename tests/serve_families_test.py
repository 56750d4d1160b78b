"""`polyhal serve` with the encoder families beyond BERT (issue 70), on the
small models tests/data/families holds, against what transformers and
sentence-transformers computed for them (make_families.py's
reference.safetensors):

- an XLMRobertaModel and an MPNetModel sentence-transformers directory
  (packed rows: MPNet's relative-position bias per sequence): /v1/embeddings and
  /embed give sentence-transformers' embeddings (cosine within 1e-5;
  /embed normalised as text-embeddings-inference answers);
- a RobertaForSequenceClassification reranker: /rerank scores each
  (query, text) pair by sigmoid(transformers' logit), best first;
- a CamembertForSequenceClassification: /predict gives softmax of
  transformers' logits under config.json's label names;
- a ModernBertModel directory (rotary positions and a sliding window per
  sequence of a packed row) embeds as sentence-transformers, and a
  ModernBertForSequenceClassification (mean pooling, and first-token) predicts
  as transformers, and so do the DistilBERT, ELECTRA and MPNet classifiers
  (the server's head on the host takes each family's activation and norm);
- a DistilBertForQuestionAnswering: /v1/question-answering answers with a
  span of the context.

  python3 serve_families_test.py POLYHAL SOURCE_DIR
"""
import json
import math
import os
import struct
import sys
import tempfile

import serve_harness
from serve_harness import close_to, fail, request

POLYHAL, SOURCE = sys.argv[1:3]
DATA = os.path.join(SOURCE, "tests", "data", "families")


def read_safetensors(path):
    """{name: list of rows} of a file of 2-D F32 tensors."""
    with open(path, "rb") as f:
        header_size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_size))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        rows, width = info["shape"]
        begin, _ = info["data_offsets"]
        values = struct.unpack(f"<{rows * width}f", data[begin:begin + 4 * rows * width])
        out[name] = [list(values[r * width:(r + 1) * width]) for r in range(rows)]
    return out


REFERENCE = read_safetensors(os.path.join(DATA, "reference.safetensors"))
LINES = [line.rstrip("\n") for line in open(os.path.join(DATA, "lines.txt"), encoding="utf-8")]


def serve(work, model):
    path = os.path.join(work, f"{model}.yaml")
    with open(path, "w") as f:
        f.write("backend: cpu\ntask: inference\n"
                f"model: {{dir: {os.path.join(DATA, model)}, seq_len: 128, precision: f32}}\n"
                "batch: {micro: 4}\nserve: {port: 0}\n")
    return serve_harness.start(POLYHAL, path)[1]


def post(port, path, body):
    status, _, payload = request(port, "POST", path, body)
    if status != 200:
        fail(f"{path} {json.dumps(body)[:80]}: {status} {payload[:300]!r}")
    return json.loads(payload)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def check_embedder(work, model):
    port = serve(work, model)
    singles = [line for line in LINES if "\t" not in line]
    want = REFERENCE[model + ".embeddings"]
    openai = post(port, "/v1/embeddings", {"input": singles, "model": "m"})["data"]
    tei = post(port, "/embed", {"inputs": singles})
    for i, line in enumerate(singles):
        for what, got in (("/v1/embeddings", openai[i]["embedding"]), ("/embed", tei[i])):
            if cosine(got, want[i]) < 1 - 1e-5:
                fail(f"{what} {line!r}: cosine {cosine(got, want[i])} to sentence-transformers")
        if not close_to([sum(x * x for x in tei[i])], [1.0], 1e-4):
            fail(f"/embed {line!r} is not normalised")


def check_reranker(work):
    port = serve(work, "roberta_reranker")
    logits = REFERENCE["roberta_reranker.logits"]
    pairs = [(i, line.split("\t")) for i, line in enumerate(LINES) if "\t" in line]
    for i, (query, text) in pairs:
        answer = post(port, "/rerank", {"query": query, "texts": [text, "a"]})
        got = {r["index"]: r["score"] for r in answer}
        want = 1 / (1 + math.exp(-logits[i][0]))
        if not close_to([got[0]], [want], 1e-4):
            fail(f"/rerank ({query!r}, {text!r}): {got[0]}, transformers gives {want}")


def check_classifier(work, model, labels):
    port = serve(work, model)
    for i, line in enumerate(LINES):
        logits = REFERENCE[model + ".logits"][i]
        top = max(logits)
        e = [math.exp(x - top) for x in logits]
        want = {label: x / sum(e) for label, x in zip(labels, e)}
        answer = post(port, "/predict", {"inputs": line.split("\t")})
        got = {p["label"]: p["score"] for p in answer}
        if not close_to([got[l] for l in labels], [want[l] for l in labels], 1e-4):
            fail(f"/predict {line!r}: {got}, transformers gives {want}")


def check_question_answering(work, model):
    """Each pair's answer says what it covers in the context. (The logits
    are transformers' within 1e-4, Families.*QuestionAnswering*; the span
    each server picks is its own rule, so no span is compared here.)"""
    port = serve(work, model)
    for line in LINES:
        if "\t" not in line:
            continue
        question, context = line.split("\t")
        answer = post(port, "/v1/question-answering", {"question": question, "context": context})
        if not answer["answer"] or context[answer["start"]:answer["end"]] != answer["answer"]:
            fail(f"{model} {question!r}: {answer} is not where it says in the context")


def main():
    work = tempfile.mkdtemp()
    try:
        check_embedder(work, "xlm_roberta_embedder")
        check_embedder(work, "mpnet_embedder")
        check_reranker(work)
        check_classifier(work, "camembert_classifier", ["negative", "neutral", "positive"])
        check_embedder(work, "modernbert_embedder")
        check_classifier(work, "modernbert_classifier", ["LABEL_0", "LABEL_1", "LABEL_2"])
        check_classifier(work, "modernbert_cls_classifier", ["LABEL_0", "LABEL_1"])
        # The server's host head follows the family: DistilBERT's ReLU, ELECTRA's GELU.
        check_classifier(work, "distilbert_classifier", ["LABEL_0", "LABEL_1"])
        check_classifier(work, "electra_classifier", ["LABEL_0", "LABEL_1"])
        check_classifier(work, "mpnet_classifier", ["LABEL_0", "LABEL_1"])
        check_question_answering(work, "distilbert_qa")
        check_question_answering(work, "modernbert_qa")
        check_question_answering(work, "mpnet_qa")
        check_question_answering(work, "electra_qa")
        check_question_answering(work, "xlm_roberta_qa")
    finally:
        serve_harness.stop_all()
    print("serve_families_test: ok")


if __name__ == "__main__":
    main()
