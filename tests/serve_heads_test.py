"""`polyhal serve` with fine-tuned heads (issue 55), against transformers
and `polyhal run`, on the tiny exports tests/data/serve_heads holds
(make_serve_heads.py writes them and reference.json):

- a BertForSequenceClassification directory is served as a classifier with
  no key but model.dir: POST /predict answers each text's and pair's label
  scores (softmax of transformers' logits, 1e-4), best first, with
  config.json's id2label names, single, pair and batch shaped as
  text-embeddings-inference answers them; raw_scores gives the logits
  `polyhal run` writes for the same texts; /embed and /rerank answer 424.
- a one-label cross-encoder: POST /rerank orders the texts by
  sigmoid(transformers' logit) for (query, text), with return_text.
- a BertForQuestionAnswering directory: POST /v1/question-answering answers
  what transformers' question-answering pipeline answers (text and
  character offsets), for one question and a list, top_k 3.
- malformed bodies of each endpoint get 400 with a JSON error.
- requests, huggingface_hub and cohere, from BUILD_DIR/client-venv when it
  is there, send each endpoint's request as a user's code would
  (serve_heads_clients.py); the cross-encoder's /predict and /rerank
  requests and answers are valid under its /openapi.json (serve_openapi.py).

  python3 serve_heads_test.py POLYHAL SOURCE_DIR
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import serve_harness
from serve_harness import close_to, expect, fail, request

POLYHAL, SOURCE = sys.argv[1:3]
DATA = os.path.join(SOURCE, "tests", "data", "serve_heads")
REFERENCE = json.load(open(os.path.join(DATA, "reference.json")))


def config(work, model):
    path = os.path.join(work, f"{model}.yaml")
    with open(path, "w") as f:
        f.write("backend: cpu\ntask: inference\n"
                f"model: {{dir: {os.path.join(DATA, model)}, seq_len: 64, precision: f32}}\n"
                "batch: {micro: 4}\nserve: {port: 0}\n")
    return path


def post(port, path, body):
    status, _, payload = request(port, "POST", path, body)
    if status != 200:
        fail(f"{path} {json.dumps(body)[:80]}: {status} {payload[:300]!r}")
    return json.loads(payload)


def softmax(logits):
    top = max(logits)
    e = [math.exp(x - top) for x in logits]
    return [x / sum(e) for x in e]


def check_prediction(answer, logits, what):
    labels = ["negative", "neutral", "positive"]
    want = sorted(zip(softmax(logits), labels), reverse=True)
    got = [(p["score"], p["label"]) for p in answer]
    if [l for _, l in got] != [l for _, l in want] or not close_to(
            [s for s, _ in got], [s for s, _ in want], 1e-4):
        fail(f"/predict {what}: {got}, transformers gives {want}")


def run_logits(work, texts):
    """`polyhal run`'s logits for `texts` with the classifier."""
    text_file = os.path.join(work, "texts.txt")
    with open(text_file, "w") as f:
        f.write("\n".join(texts) + "\n")
    out = os.path.join(work, "run.jsonl")
    result = subprocess.run([POLYHAL, "run", config(work, "classifier"), "--set",
                             "data.source=text", "--set", f"data.text_file={text_file}", "--set",
                             f"inference.output={out}", "--log-level", "warn"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"polyhal run: {result.stdout}{result.stderr}")
    return [json.loads(line)["logits"] for line in open(out)]


def check_with_requests(kind, port):
    python = serve_harness.client_python(POLYHAL)
    if python is None:
        print(f"skipped: requests on the {kind} (run scripts/client-venv.sh)")
        return
    print(serve_harness.run_client(python, os.path.join(SOURCE, "tests", "serve_heads_clients.py"),
                                   kind, port, os.path.join(DATA, "reference.json")))


def check_classifier(work):
    _, port = serve_harness.start(POLYHAL, config(work, "classifier"))
    check_with_requests("classifier", port)
    reference = REFERENCE["classifier"]
    for item in reference["texts"]:
        check_prediction(post(port, "/predict", {"inputs": item["input"]}), item["logits"],
                         item["input"])
    for item in reference["pairs"]:
        check_prediction(post(port, "/predict", {"inputs": item["input"]}), item["logits"],
                         item["input"])
    # A batch: each input a list of one text or of a pair.
    batch = [[reference["texts"][0]["input"]], reference["pairs"][1]["input"]]
    answer = post(port, "/predict", {"inputs": batch})
    if len(answer) != 2:
        fail(f"/predict batch: {answer}")
    check_prediction(answer[0], reference["texts"][0]["logits"], "batch 0")
    check_prediction(answer[1], reference["pairs"][1]["logits"], "batch 1")
    texts = [item["input"] for item in reference["texts"]]
    raw = post(port, "/predict", {"inputs": [[t] for t in texts], "raw_scores": True})
    from_run = run_logits(work, texts)
    for i, (answer, logits) in enumerate(zip(raw, from_run)):
        by_label = {p["label"]: p["score"] for p in answer}
        got = [by_label["negative"], by_label["neutral"], by_label["positive"]]
        if not close_to(got, logits, 1e-4) or not close_to(got, reference["texts"][i]["logits"],
                                                           1e-4):
            fail(f"/predict raw_scores {i}: {got}; polyhal run {logits}; transformers "
                 f"{reference['texts'][i]['logits']}")
    expect(port, "POST", "/embed", {"inputs": "x"}, 424, "/predict")
    expect(port, "POST", "/rerank", {"query": "a", "texts": ["b"]}, 424, "3 labels")
    expect(port, "POST", "/predict", {"inputs": [["a", "b", "c"]]}, 400, "pair")
    expect(port, "POST", "/predict", {"inputs": [["a"], "b"]}, 400, "in a batch")
    expect(port, "POST", "/predict", {"inputs": 5}, 400, "expected a text")
    expect(port, "POST", "/predict", {"inputs": ["", "b"]}, 400, "empty")
    expect(port, "POST", "/predict", {"inputs": "a", "raw_scores": "yes"}, 400, "raw_scores")


def check_cross_encoder(work):
    _, port = serve_harness.start(POLYHAL, config(work, "cross_encoder"))
    check_with_requests("cross_encoder", port)
    reference = REFERENCE["cross_encoder"]
    body = {"query": reference["query"], "texts": reference["texts"], "return_text": True}
    answer = post(port, "/rerank", body)
    want = sorted(((1 / (1 + math.exp(-x)), i) for i, x in enumerate(reference["logits"])),
                  reverse=True)
    if [r["index"] for r in answer] != [i for _, i in want] or not close_to(
            [r["score"] for r in answer], [s for s, _ in want], 1e-4):
        fail(f"/rerank: {answer}, transformers gives {want}")
    if any(r["text"] != reference["texts"][r["index"]] for r in answer):
        fail(f"/rerank return_text: {answer}")
    raw = post(port, "/rerank", dict(body, raw_scores=True, return_text=False))
    if "text" in raw[0] or not close_to([r["score"] for r in sorted(raw, key=lambda r: r["index"])],
                                        reference["logits"], 1e-4):
        fail(f"/rerank raw_scores: {raw}")
    expect(port, "POST", "/rerank", {"query": "a"}, 400, "texts")
    expect(port, "POST", "/rerank", {"query": "", "texts": ["b"]}, 400, "query")
    expect(port, "POST", "/v1/embeddings", {"input": "a"}, 424, "/rerank")
    check_cohere_rerank(port, reference, want)
    python = serve_harness.client_python(POLYHAL)
    if python:  # /predict and /rerank against /openapi.json
        print(serve_harness.run_client(python, os.path.join(SOURCE, "tests", "serve_openapi.py"),
                                       port, "classifier"))


def check_cohere_rerank(port, reference, want):
    """Cohere's and Jina's rerank shape (infinity serves it): documents as
    strings or {"text"}, top_n, return_documents, on /rerank, /v1/rerank and
    /v2/rerank."""
    documents = [text if i % 2 else {"text": text} for i, text in enumerate(reference["texts"])]
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        answer = post(port, path, {"query": reference["query"], "documents": documents,
                                   "top_n": 2, "return_documents": True, "model": "rr"})
        results = answer["results"]
        if (answer["object"] != "rerank" or answer["model"] != "rr" or len(results) != 2
                or [r["index"] for r in results] != [i for _, i in want[:2]]
                or not close_to([r["relevance_score"] for r in results], [s for s, _ in want[:2]],
                                1e-4)
                or any(r["document"]["text"] != reference["texts"][r["index"]] for r in results)
                or answer["usage"]["total_tokens"] <= len(documents)):
            fail(f"{path} (Cohere's shape): {answer}, transformers gives {want[:2]}")
    whole = post(port, "/v1/rerank", {"query": reference["query"], "documents": documents})
    if len(whole["results"]) != len(documents) or "document" in whole["results"][0]:
        fail(f"/v1/rerank without top_n or return_documents: {whole}")
    expect(port, "POST", "/v1/rerank", {"query": "a", "documents": ["b"], "rank_fields": ["t"]},
           400, "rank_fields")
    expect(port, "POST", "/v1/rerank", {"query": "a", "documents": [{"txt": "b"}]}, 400,
           "'documents'[0]")


def check_question_answering(work):
    _, port = serve_harness.start(POLYHAL, config(work, "question_answering"))
    check_with_requests("question_answering", port)
    reference = REFERENCE["question_answering"]
    context = reference["context"]
    questions = [a["question"] for a in reference["answers"]]
    answers = post(port, "/v1/question-answering", {"question": questions, "context": context})
    for got, want in zip(answers, reference["answers"]):
        if (got["answer"], got["start"], got["end"]) != (want["answer"], want["start"],
                                                         want["end"]):
            fail(f"{want['question']!r}: {got}, transformers' pipeline gives {want}")
        if context[got["start"]:got["end"]] != got["answer"] or not 0 < got["score"] <= 1:
            fail(f"{want['question']!r}: {got} is not where it says in the context")
    one = post(port, "/v1/question-answering", {"question": questions[0], "context": context,
                                                 "top_k": 3})
    if len(one) != 3 or one[0]["answer"] != reference["answers"][0]["answer"] or not (
            one[0]["score"] >= one[1]["score"] >= one[2]["score"]):
        fail(f"top_k 3: {one}")
    expect(port, "POST", "/v1/question-answering", {"question": "a"}, 400, "context")
    expect(port, "POST", "/v1/question-answering", {"context": "a", "question": "b", "top_k": 0},
           400, "top_k")
    expect(port, "POST", "/predict", {"inputs": "a"}, 424, "question-answering")


def main():
    work = tempfile.mkdtemp()
    try:
        check_classifier(work)
        check_cross_encoder(work)
        check_question_answering(work)
    finally:
        serve_harness.stop_all()
    print("serve_heads_test: ok")


if __name__ == "__main__":
    main()
