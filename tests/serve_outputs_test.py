"""`polyhal serve`'s outputs beyond the plain embedding (issue 71), on the
fetched all-MiniLM-L6-v2 (build/models) when it is there, else a seeded tiny
model:

- encoding_format int8, uint8, binary and ubinary: each the documented
  function of the float embedding (serve_api.hpp EmbeddingEncoding; the bit
  rule is sentence-transformers' quantize_embeddings, written here in plain
  Python);
- truncation_direction "Left": a text too long keeps its end, as the text
  of exactly those tokens embeds; "Right" and pairs keep their rule;
- /embed_all: every token's vector, as many as /tokenize counts, whose mean
  is the mean-pooled /embed (normalize false);
- CORS: off by default (no header, OPTIONS 405); with --cors-allow-origin,
  a preflight answered 204 without a token and the origin echoed, another
  origin given no header;
- /openapi.json: every path it lists answers (none 404), and with the client
  venv (scripts/client-venv.sh) tests/serve_openapi.py validates real
  requests and answers against it.

  python3 serve_outputs_test.py POLYHAL REAL_MODEL_DIR SOURCE_DIR
"""
import json
import os
import sys
import tempfile

import serve_harness
from serve_harness import close_to, expect, fail, request

POLYHAL, MODEL_DIR, SOURCE = sys.argv[1:4]
REAL = os.path.isfile(os.path.join(MODEL_DIR, "config.json"))
TEXT = "The quick brown fox jumps over the lazy dog."


def start(work, *options):
    """The real model with no config file, else the tiny preset's config."""
    if REAL:
        return serve_harness.start(POLYHAL, MODEL_DIR, "--port", "0", "--precision", "f32",
                                   *options)
    path = os.path.join(work, "tiny.yaml")
    with open(path, "w") as f:
        f.write("backend: cpu\ntask: inference\n"
                "model: {preset: tiny, vocab_size: 85, seq_len: 64, precision: f32}\n"
                f"data: {{vocab: {SOURCE}/tests/data/corpus/vocab.txt}}\n"
                "inference: {pooling: mean, normalize: true}\nserve: {port: 0}\n")
    return serve_harness.start(POLYHAL, path, *options)


def post(port, path, body, headers=None):
    status, _, payload = request(port, "POST", path, body, headers)
    if status != 200:
        fail(f"{path} {str(body)[:80]}: {status} {payload[:300]!r}")
    return json.loads(payload)


def openai(port, text, encoding):
    return post(port, "/v1/embeddings",
                {"input": text, "encoding_format": encoding})["data"][0]["embedding"]


def check_encodings(port):
    e = openai(port, TEXT, "float")
    peak = max(abs(x) for x in e)
    int8 = [max(-127, min(127, round(127 * x / peak))) for x in e]
    bits = [0] * ((len(e) + 7) // 8)
    for i, x in enumerate(e):
        if x > 0:
            bits[i // 8] |= 0x80 >> (i % 8)
    want = {"int8": int8, "uint8": [v + 128 for v in int8], "ubinary": bits,
            "binary": [b - 128 for b in bits]}
    for encoding, values in want.items():
        got = openai(port, TEXT, encoding)
        # round() of a value at .5 may go either way: allow one level there.
        if len(got) != len(values) or any(abs(g - w) > (1 if "int" in encoding else 0)
                                           for g, w in zip(got, values)):
            fail(f"encoding_format {encoding}: {got[:8]}..., expected {values[:8]}...")
        if not all(isinstance(v, int) for v in got):
            fail(f"encoding_format {encoding}: not integers")
    short = post(port, "/embeddings", {"input": TEXT, "encoding_format": "ubinary",
                                       "dimensions": 12})["data"][0]["embedding"]
    if len(short) != 2:
        fail(f"ubinary of 12 dimensions: {short}, expected 2 bytes")
    expect(port, "POST", "/v1/embeddings", {"input": "a", "encoding_format": "int4"}, 400,
           "ubinary")
    print("ok: encoding_format int8, uint8, binary, ubinary as documented (and with dimensions)")


def tokens_of(port, text):
    return [t["id"] for t in post(port, "/tokenize", {"inputs": text,
                                                      "add_special_tokens": False})[0]]


def check_left_truncation(port):
    info = json.loads(request(port, "GET", "/info")[2])
    room = info["max_input_length"] - 2  # [CLS] ... [SEP]
    filler = "hello " if REAL else "the "
    tail = TEXT if REAL else "the cat sat"
    filler_ids, tail_ids = tokens_of(port, filler), tokens_of(port, tail)
    if len(filler_ids) != 1:
        fail(f"{filler!r} is {filler_ids}, expected one token")
    long_text = filler * (room + 20) + tail
    kept = filler * (room - len(tail_ids)) + tail
    if tokens_of(port, kept) != (filler_ids * room + tail_ids)[-room:]:
        fail("the kept text does not tokenize as the long text's last tokens")
    left = post(port, "/embed", {"inputs": long_text, "truncation_direction": "Left"})[0]
    if not close_to(left, post(port, "/embed", {"inputs": kept})[0]):
        fail("truncation_direction Left: not the embedding of the text's last tokens")
    right = post(port, "/embed", {"inputs": long_text, "truncation_direction": "Right"})[0]
    if not close_to(right, post(port, "/embed", {"inputs": filler * room})[0]):
        fail("truncation_direction Right: not the embedding of the text's first tokens")
    scores = post(port, "/similarity", {"inputs": {"source_sentence": long_text,
                                                   "sentences": [kept]},
                                        "truncation_direction": "Left"})
    if abs(scores[0] - 1.0) > 1e-5:
        fail(f"/similarity Left: {scores}, expected 1 (the same tokens)")
    expect(port, "POST", "/embed", {"inputs": "a", "truncation_direction": "Middle"}, 400,
           "truncation_direction")
    print(f"ok: truncation_direction Left keeps a text's last {room} tokens (/embed, /similarity)")


def check_embed_all(port):
    texts = [TEXT, "short"]
    states = post(port, "/embed_all", {"inputs": texts})
    tokens = post(port, "/tokenize", {"inputs": texts})
    pooled = post(port, "/embed", {"inputs": texts, "normalize": False})
    for i, text in enumerate(texts):
        if len(states[i]) != len(tokens[i]):
            fail(f"/embed_all {text!r}: {len(states[i])} vectors for {len(tokens[i])} tokens")
        width = len(pooled[i])
        if any(len(v) != width for v in states[i]):
            fail(f"/embed_all {text!r}: vectors not of the model's {width} dimensions")
        mean = [sum(v[d] for v in states[i]) / len(states[i]) for d in range(width)]
        if not close_to(mean, pooled[i], 1e-4):
            fail(f"/embed_all {text!r}: the tokens' mean is not the mean-pooled embedding")
    expect(port, "POST", "/embed_all", {"inputs": "a", "normalize": True}, 400,
           "is not a field /embed_all reads")
    print("ok: /embed_all: one vector per token, their mean the mean-pooled embedding")


def check_cors(work, plain_port):
    origin = {"Origin": "https://app.example.com"}
    status, headers, _ = request(plain_port, "POST", "/embed", {"inputs": "a"}, origin)
    if status != 200 or "Access-Control-Allow-Origin" in headers:
        fail(f"CORS off by default: {status} {headers}")
    status, _, _ = request(plain_port, "OPTIONS", "/embed", None, origin)
    if status != 405:
        fail(f"OPTIONS without CORS configured: {status}, expected 405")
    key_file = os.path.join(work, "token")
    with open(key_file, "w") as f:
        f.write("cors-token\n")
    process, port = start(work, "--cors-allow-origin", "https://app.example.com,http://localhost:3000",
                          "--api-key-file", key_file)
    preflight = dict(origin, **{"Access-Control-Request-Method": "POST"})
    status, headers, _ = request(port, "OPTIONS", "/embed", None, preflight)
    if (status != 204 or headers.get("Access-Control-Allow-Origin") != "https://app.example.com"
            or "POST" not in headers.get("Access-Control-Allow-Methods", "")
            or "Authorization" not in headers.get("Access-Control-Allow-Headers", "")):
        fail(f"CORS preflight: {status} {headers}")
    status, headers, _ = request(port, "POST", "/embed", {"inputs": "a"},
                                 dict(origin, Authorization="Bearer cors-token"))
    if status != 200 or headers.get("Access-Control-Allow-Origin") != "https://app.example.com":
        fail(f"CORS on an answer: {status} {headers}")
    status, headers, _ = request(port, "POST", "/embed", {"inputs": "a"},
                                 {"Origin": "https://evil.example",
                                  "Authorization": "Bearer cors-token"})
    if "Access-Control-Allow-Origin" in headers:
        fail(f"CORS for an origin not listed: {headers}")
    process.terminate()
    process.wait(timeout=30)
    print("ok: CORS off by default; --cors-allow-origin: preflight 204 without a token, the "
          "origin echoed, another origin given no header")


def check_openapi(port):
    status, _, payload = request(port, "GET", "/openapi.json")
    if status != 200:
        fail(f"/openapi.json: {status} {payload[:200]!r}")
    doc = json.loads(payload)
    for path, methods in doc["paths"].items():
        for method in methods:
            got = request(port, method.upper(), path, {} if method == "post" else None)[0]
            if got in (404, 405):
                fail(f"/openapi.json lists {method.upper()} {path}, which answers {got}")
    if request(port, "POST", "/embed_sparse_unlisted", {})[0] != 404:
        fail("a path /openapi.json does not list answered")
    python = serve_harness.client_python(POLYHAL)
    if python is None:
        print("skipped: requests validated against /openapi.json (run scripts/client-venv.sh)")
        return
    print(serve_harness.run_client(python, os.path.join(SOURCE, "tests", "serve_openapi.py"),
                                   port, "embeddings"))


def main():
    work = tempfile.mkdtemp()
    try:
        process, port = start(work)
        check_encodings(port)
        check_left_truncation(port)
        check_embed_all(port)
        check_openapi(port)
        check_cors(work, port)
        process.terminate()
        process.wait(timeout=30)
    finally:
        serve_harness.stop_all()
    print("serve_outputs_test: ok")


if __name__ == "__main__":
    main()
