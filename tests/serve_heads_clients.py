"""requests against `polyhal serve` with a fine-tuned head (run by
serve_heads_test.py with the interpreter of BUILD_DIR/client-venv,
scripts/client-venv.sh): POST /predict, /rerank and /v1/question-answering
as a user's code sends them, each answer checked against transformers'
(tests/data/serve_heads/reference.json). The openai client has no call for
these endpoints; requests is what text-embeddings-inference's own examples
use. The clients made for them too: huggingface_hub's InferenceClient
text_classification on the server's URL (TEI's POST /, with the Inference
API's parameters), and the cohere client's v2 rerank (Cohere's shape).

  client-venv/bin/python serve_heads_clients.py KIND PORT REFERENCE.json
  (KIND: classifier, cross_encoder or question_answering)
"""
import json
import math
import sys

import cohere
import huggingface_hub
import requests

kind, port, reference_file = sys.argv[1], sys.argv[2], sys.argv[3]
reference = json.load(open(reference_file))[kind]
url = f"http://127.0.0.1:{port}"


def post(path, body):
    response = requests.post(url + path, json=body, timeout=30)
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text}"
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    return response.json()


def close(a, b, tolerance=1e-4):
    return len(a) == len(b) and all(abs(x - y) <= tolerance for x, y in zip(a, b))


def softmax(logits):
    top = max(logits)
    e = [math.exp(x - top) for x in logits]
    return [x / sum(e) for x in e]


def check_classifier():
    labels = ["negative", "neutral", "positive"]
    items = reference["texts"] + reference["pairs"]
    answers = post("/predict", {"inputs": [item["input"] if isinstance(item["input"], list)
                                           else [item["input"]] for item in items]})
    assert len(answers) == len(items), answers
    for answer, item in zip(answers, items):
        want = sorted(zip(softmax(item["logits"]), labels), reverse=True)
        assert [p["label"] for p in answer] == [label for _, label in want], (answer, want)
        assert close([p["score"] for p in answer], [score for score, _ in want]), (answer, want)
    response = requests.post(url + "/predict", json={"inputs": 5}, timeout=30)
    assert response.status_code == 400 and "error" in response.json(), response.text
    hub = huggingface_hub.InferenceClient(model=url)
    item = reference["texts"][0]
    want = sorted(zip(softmax(item["logits"]), labels), reverse=True)
    for top_k in (None, 2):
        got = hub.text_classification(item["input"], top_k=top_k)
        got = got if isinstance(got, list) else [got]  # the client keeps the first of the list
        assert got[0].label == want[0][1] and abs(got[0].score - want[0][0]) <= 1e-4, (got, want)
    sigmoid = hub.text_classification(item["input"], function_to_apply="sigmoid")
    sigmoid = sigmoid if isinstance(sigmoid, list) else [sigmoid]
    best = max(item["logits"])
    assert abs(sigmoid[0].score - 1 / (1 + math.exp(-best))) <= 1e-4, sigmoid
    return (f"/predict ({len(items)} texts and pairs in one batch); huggingface_hub "
            f"{huggingface_hub.__version__} text_classification (top_k, function_to_apply)")


def check_cross_encoder():
    answer = post("/rerank", {"query": reference["query"], "texts": reference["texts"]})
    want = sorted(((1 / (1 + math.exp(-x)), i) for i, x in enumerate(reference["logits"])),
                  reverse=True)
    assert [r["index"] for r in answer] == [i for _, i in want], (answer, want)
    assert close([r["score"] for r in answer], [s for s, _ in want]), (answer, want)
    client = cohere.ClientV2(api_key="unused", base_url=url)
    ranked = client.rerank(model="rr", query=reference["query"], documents=reference["texts"],
                           top_n=2)
    assert [r.index for r in ranked.results] == [i for _, i in want[:2]], (ranked, want)
    assert close([r.relevance_score for r in ranked.results], [s for s, _ in want[:2]]), ranked
    return (f"/rerank ({len(reference['texts'])} texts); cohere {cohere.__version__} "
            f"ClientV2.rerank (top_n 2)")


def check_question_answering():
    questions = [a["question"] for a in reference["answers"]]
    answers = post("/v1/question-answering",
                   {"question": questions, "context": reference["context"]})
    for got, want in zip(answers, reference["answers"]):
        assert (got["answer"], got["start"], got["end"]) == (want["answer"], want["start"],
                                                             want["end"]), (got, want)
    return f"/v1/question-answering ({len(questions)} questions)"


checks = {"classifier": check_classifier, "cross_encoder": check_cross_encoder,
          "question_answering": check_question_answering}
what = checks[kind]()
print(f"ok: requests {requests.__version__} on {what}: transformers' answers")
