"""Several models in one `polyhal serve` (issue 71): the fetched
all-MiniLM-L6-v2 (build/models; else a seeded tiny embedding model) and the
cross-encoder of tests/data/serve_heads, given as MODEL_DIR --model DIR.

- /v1/models lists both, each with its task; a request's "model" picks one,
  an unknown name is a 404 listing them, a model of the wrong kind a 424;
  without a name each route goes to the first model of its kind.
- Under mixed load (threads embedding and reranking at once, for 3 s) every
  answer is that model's own: the embeddings equal a one-model server's,
  the rerank scores transformers' (serve_heads/reference.json).
- One model's flood cannot take the other's room: with serve.max_queue 8,
  each model holds 4 requests at most; 24 concurrent embedding requests get
  429s, while the cross-encoder's requests meanwhile are all answered.

  python3 serve_models_test.py POLYHAL REAL_MODEL_DIR SOURCE_DIR
"""
import json
import math
import os
import sys
import tempfile
import threading
import time

import serve_harness
from serve_harness import close_to, expect, fail, request

POLYHAL, MODEL_DIR, SOURCE = sys.argv[1:4]
HEADS = os.path.join(SOURCE, "tests", "data", "serve_heads")
REFERENCE = json.load(open(os.path.join(HEADS, "reference.json")))["cross_encoder"]
TEXTS = ["Hello world", "The quick brown fox jumps over the lazy dog.", "short"]


def embedding_dir(work):
    """The real model, else the families' seeded DistilBERT embedder."""
    if os.path.isfile(os.path.join(MODEL_DIR, "config.json")):
        return MODEL_DIR
    return os.path.join(SOURCE, "tests", "data", "families", "distilbert_embedder")


def start(*args):
    return serve_harness.start(POLYHAL, *args, "--set", "model.seq_len=64", "--port", "0",
                               "--precision", "f32")


def post(port, path, body):
    status, _, payload = request(port, "POST", path, body, timeout=60)
    return status, (json.loads(payload) if payload else None)


def rerank_want():
    scores = [1 / (1 + math.exp(-x)) for x in REFERENCE["logits"]]
    return sorted(range(len(scores)), key=lambda i: -scores[i]), scores


def check_rerank(answer):
    order, scores = rerank_want()
    if [r["index"] for r in answer] != order or not close_to(
            [r["score"] for r in answer], [scores[i] for i in order], 1e-4):
        fail(f"/rerank under mixed load: {answer}, transformers gives {order} {scores}")


def check_routing(port, embedder):
    status, _, payload = request(port, "GET", "/v1/models")
    listed = {m["id"]: m["task"] for m in json.loads(payload)["data"]}
    if listed != {embedder: "embeddings", "cross_encoder": "classification"}:
        fail(f"/v1/models: {listed}")
    expect(port, "POST", "/v1/embeddings", {"input": "a", "model": "nope"}, 404,
           f"these are: {embedder}, cross_encoder")
    expect(port, "POST", "/v1/embeddings", {"input": "a", "model": "cross_encoder"}, 424,
           "not /v1/embeddings")
    expect(port, "POST", "/v1/rerank", {"query": "a", "documents": ["b"], "model": embedder},
           424, "not /v1/rerank")
    status, named = post(port, "/v1/rerank", {"query": REFERENCE["query"],
                                              "documents": REFERENCE["texts"],
                                              "model": "cross_encoder"})
    if status != 200 or named["model"] != "cross_encoder":
        fail(f"/v1/rerank with the model named: {status} {named}")
    print("ok: /v1/models lists both; 'model' picks one (404 unknown, 424 the wrong kind)")


def check_mixed_load(port, embedder, want):
    errors, counts = [], {"embed": 0, "rerank": 0}
    deadline = time.time() + 3

    def embed():
        while time.time() < deadline:
            status, answer = post(port, "/v1/embeddings", {"input": TEXTS, "model": embedder})
            got = [d["embedding"] for d in answer["data"]] if status == 200 else []
            if status != 200 or not all(close_to(g, w) for g, w in zip(got, want)):
                errors.append(f"/v1/embeddings: {status}")
            counts["embed"] += 1

    def rerank():
        while time.time() < deadline:
            status, answer = post(port, "/rerank", {"query": REFERENCE["query"],
                                                    "texts": REFERENCE["texts"]})
            if status != 200:
                errors.append(f"/rerank: {status} {answer}")
            else:
                try:
                    check_rerank(answer)
                except SystemExit:
                    errors.append("/rerank: not transformers' order and scores")
            counts["rerank"] += 1

    threads = [threading.Thread(target=f) for f in (embed, embed, embed, rerank, rerank, rerank)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors or min(counts.values()) == 0:
        fail(f"mixed load: {counts}, errors {errors[:3]}")
    print(f"ok: mixed load for 3 s: {counts['embed']} embedding and {counts['rerank']} rerank "
          f"requests, each answered by its own model")


def check_share(work, embedder_dir, embedder):
    """serve.max_queue 8: each model's share is 4."""
    process, port = start(embedder_dir, "--model", os.path.join(HEADS, "cross_encoder"),
                          "--set", "serve.max_queue=8", "--set", "serve.max_wait_ms=50")
    flood = [TEXTS[1] * 6] * 64  # long enough that requests queue
    statuses, rerank_statuses, slowest = [], [], [0.0]
    done = threading.Event()

    def embed():
        statuses.append(post(port, "/v1/embeddings", {"input": flood, "model": embedder})[0])

    def rerank():
        while not done.is_set():
            start_time = time.time()
            rerank_statuses.append(post(port, "/rerank", {"query": REFERENCE["query"],
                                                          "texts": REFERENCE["texts"]})[0])
            slowest[0] = max(slowest[0], time.time() - start_time)

    reranker = threading.Thread(target=rerank)
    reranker.start()
    floods = [threading.Thread(target=embed) for _ in range(24)]
    for t in floods:
        t.start()
    for t in floods:
        t.join()
    done.set()
    reranker.join()
    process.terminate()
    process.wait(timeout=30)
    if 429 not in statuses or set(statuses) - {200, 429}:
        fail(f"a flood of 24 over a share of 4: {sorted(statuses)}, expected 200s and 429s")
    if not rerank_statuses or set(rerank_statuses) != {200}:
        fail(f"the cross-encoder during the flood: {rerank_statuses}")
    print(f"ok: a flood of one model: {statuses.count(429)} of 24 answered 429 beyond its "
          f"share; the other model's {len(rerank_statuses)} requests all answered (slowest "
          f"{slowest[0] * 1000:.0f} ms)")


def main():
    work = tempfile.mkdtemp()
    try:
        embedder_dir = embedding_dir(work)
        embedder = os.path.basename(os.path.normpath(embedder_dir))
        process, port = start(embedder_dir)
        status, answer = post(port, "/v1/embeddings", {"input": TEXTS})
        if status != 200:
            fail(f"one-model server: {status} {answer}")
        want = [d["embedding"] for d in answer["data"]]
        process.terminate()
        process.wait(timeout=30)
        process, port = start(embedder_dir, "--model", os.path.join(HEADS, "cross_encoder"))
        check_routing(port, embedder)
        check_mixed_load(port, embedder, want)
        process.terminate()
        process.wait(timeout=30)
        check_share(work, embedder_dir, embedder)
    finally:
        serve_harness.stop_all()
    print("serve_models_test: ok")


if __name__ == "__main__":
    main()
