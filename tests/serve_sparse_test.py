"""`polyhal serve DIR --pooling splade`: TEI's POST /embed_sparse (issue 71)
on the tiny seeded BertForMaskedLM of tests/data/serve_sparse, against what
transformers computes for it (make_serve_sparse.py: max over the tokens of
log(1 + relu(MLM logits)), the entries above zero):

- each text's entries are transformers' (the same indices, values within
  1e-4), in TEI's [{"index", "value"}] shape; /info says splade and the
  vocabulary's size; /embed is a 424; the requests and answers are valid
  under /openapi.json (with the client venv);
- `polyhal run` with pooling splade, and a model without an MLM head served
  with it, are config errors (exit 2) that say why.

  python3 serve_sparse_test.py POLYHAL SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

import serve_harness
from serve_harness import expect, fail, request

POLYHAL, SOURCE = sys.argv[1:3]
DATA = os.path.join(SOURCE, "tests", "data", "serve_sparse")
REFERENCE = json.load(open(os.path.join(DATA, "reference.json")))["texts"]
OPTIONS = ("--pooling", "splade", "--precision", "f32", "--set", "model.seq_len=64")


def check_against_transformers(port):
    texts = [item["text"] for item in REFERENCE]
    status, _, payload = request(port, "POST", "/embed_sparse", {"inputs": texts})
    if status != 200:
        fail(f"/embed_sparse: {status} {payload[:300]!r}")
    answers = json.loads(payload)
    for item, got in zip(REFERENCE, answers):
        want = {int(i): v for i, v in item["sparse"].items()}
        have = {entry["index"]: entry["value"] for entry in got}
        if set(have) != set(want) or max(abs(have[i] - want[i]) for i in want) > 1e-4:
            fail(f"/embed_sparse {item['text']!r}: {sorted(have.items())[:6]}..., transformers "
                 f"gives {sorted(want.items())[:6]}...")
        if [entry["index"] for entry in got] != sorted(have):
            fail(f"/embed_sparse {item['text']!r}: entries not in index order")
    info = json.loads(request(port, "GET", "/info")[2])
    if info["model_type"] != {"embedding": {"pooling": "splade", "dimensions": 85}}:
        fail(f"/info of a SPLADE model: {info['model_type']}")
    expect(port, "POST", "/embed", {"inputs": "a"}, 424, "/embed_sparse")
    expect(port, "POST", "/embed_sparse", {"inputs": "a", "normalize": True}, 400,
           "is not a field /embed_sparse reads")
    print(f"ok: /embed_sparse of {len(texts)} texts equals transformers' SPLADE weights "
          f"(1e-4); /info, /embed 424")


def check_refusals(work):
    text_file = os.path.join(work, "texts.txt")
    with open(text_file, "w") as f:
        f.write("the king\n")
    config = os.path.join(work, "splade.yaml")
    with open(config, "w") as f:
        f.write("backend: cpu\ntask: inference\n"
                f"model: {{dir: {os.path.join(DATA, 'model')}, seq_len: 64}}\n"
                f"data: {{source: text, text_file: {text_file}}}\n"
                f"inference: {{pooling: splade, output: {os.path.join(work, 'out.jsonl')}}}\n")
    run = subprocess.run([POLYHAL, "run", config], capture_output=True, text=True)
    if run.returncode != 2 or "/embed_sparse" not in run.stderr:
        fail(f"polyhal run with pooling splade: {run.returncode} {run.stderr[-400:]}")
    no_head = os.path.join(SOURCE, "tests", "data", "families", "distilbert_embedder")
    serve = subprocess.run([POLYHAL, "serve", no_head, "--port", "0", "--check", *OPTIONS],
                           capture_output=True, text=True)
    if serve.returncode != 2 or "cls.predictions" not in serve.stderr:
        fail(f"serve a model without an MLM head with splade: {serve.returncode} "
             f"{serve.stderr[-400:]}")
    print("ok: polyhal run with pooling splade and a model without an MLM head: exit 2, said")


def main():
    work = tempfile.mkdtemp()
    try:
        process, port = serve_harness.start(POLYHAL, os.path.join(DATA, "model"), "--port", "0",
                                            *OPTIONS)
        check_against_transformers(port)
        python = serve_harness.client_python(POLYHAL)
        if python:
            print(serve_harness.run_client(python, os.path.join(SOURCE, "tests",
                                                                 "serve_openapi.py"),
                                           port, "sparse"))
        process.terminate()
        process.wait(timeout=30)
        check_refusals(work)
    finally:
        serve_harness.stop_all()
    print("serve_sparse_test: ok")


if __name__ == "__main__":
    main()
