"""`polyhal serve` with real clients (issue 55): Python's own HTTP client
and raw sockets against a server this test starts on a free loopback port.

- /v1/embeddings (as the openai client sends it) and /embed answer the
  embeddings `polyhal run` writes for the same texts (1e-5), in float and
  base64; /health, /ready, /v1/models, /metrics answer.
- Hostile requests each get their status and a JSON error, never a crash:
  malformed JSON, wrong types, invalid UTF-8, empty input, too many texts,
  an oversized body (413), a text over model.seq_len with truncate false
  (413), unknown path (404), wrong method (405), wrong Content-Type (415),
  no bearer token (401), a client that stops mid-headers (closed after
  serve.timeout_seconds), a client that vanishes before its answer.
- A full queue answers 429 with Retry-After; a bounded load (32 connections,
  4 s) has no error; SIGTERM answers what is in flight and exits 0.
- Nothing is left running, even when a check fails.

The fetched all-MiniLM-L6-v2 (build/models) when it is there, else a seeded
tiny model with a small vocabulary.

  python3 serve_test.py POLYHAL REAL_MODEL_DIR SOURCE_DIR
"""
import base64
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import serve_harness
from serve_harness import close_to, expect, fail, request, servers

POLYHAL, MODEL_DIR, SOURCE = sys.argv[1:4]
TEXTS = ["Hello world", "The quick brown fox jumps over the lazy dog.",
         "polyhal serves sentence embeddings from packed rows, " * 3, "short"]


def config(work, extra=""):
    if os.path.isfile(os.path.join(MODEL_DIR, "config.json")):
        model = f"model: {{dir: {MODEL_DIR}, seq_len: 256, precision: f32}}\n"
    else:
        model = ("model: {preset: tiny, vocab_size: 85, seq_len: 64, precision: f32}\n"
                 f"data: {{vocab: {SOURCE}/tests/data/corpus/vocab.txt}}\n"
                 "inference: {pooling: mean, normalize: true}\n")
    path = os.path.join(work, f"serve{len(servers)}.yaml")
    with open(path, "w") as f:
        f.write("backend: cpu\ntask: inference\n" + model + "batch: {micro: 4}\n"
                "serve: {port: 0" + extra + "}\n")
    return path


def start(work, extra=""):
    return serve_harness.start(POLYHAL, config(work, extra))


def reference_embeddings(work):
    """`polyhal run` text inference on the same texts and model."""
    text_file = os.path.join(work, "texts.txt")
    with open(text_file, "w") as f:
        f.write("\n".join(TEXTS) + "\n")
    out = os.path.join(work, "run.jsonl")
    result = subprocess.run([POLYHAL, "run", config(work), "--set", "data.source=text",
                             "--set", f"data.text_file={text_file}", "--set",
                             f"inference.output={out}", "--log-level", "warn"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"polyhal run: {result.stdout}{result.stderr}")
    return [json.loads(line)["embedding"] for line in open(out)]


def check_answers(port, want):
    status, _, payload = request(port, "POST", "/v1/embeddings",
                                 {"input": TEXTS, "model": "any", "encoding_format": "float"})
    answer = json.loads(payload)
    if status != 200 or answer["object"] != "list" or len(answer["data"]) != len(TEXTS):
        fail(f"/v1/embeddings: {status} {payload[:300]!r}")
    for item, reference in zip(answer["data"], want):
        if not close_to(item["embedding"], reference):
            fail(f"/v1/embeddings text {item['index']} differs from polyhal run's")
    if answer["usage"]["prompt_tokens"] <= len(TEXTS) * 2:
        fail(f"usage: {answer['usage']}")
    status, _, payload = request(port, "POST", "/v1/embeddings",
                                 {"input": TEXTS[1], "encoding_format": "base64"})
    raw = base64.b64decode(json.loads(payload)["data"][0]["embedding"])
    if not close_to(list(struct.unpack(f"<{len(raw) // 4}f", raw)), want[1]):
        fail("/v1/embeddings base64 differs from float")
    status, _, payload = request(port, "POST", "/embed", {"inputs": TEXTS})
    if status != 200 or not all(close_to(a, b) for a, b in zip(json.loads(payload), want)):
        fail(f"/embed: {status} {payload[:200]!r}")
    status, _, payload = request(port, "POST", "/embed", {"inputs": TEXTS[0], "normalize": False})
    raw_norm = sum(x * x for x in json.loads(payload)[0]) ** 0.5
    if status != 200 or abs(raw_norm - 1.0) < 1e-3:
        fail(f"/embed normalize false: norm {raw_norm}")
    for path, needle in (("/health", "ok"), ("/ready", "ready"), ("/v1/models", '"object": "list"'),
                         ("/metrics", "polyhal_requests_total")):
        status, _, payload = request(port, "GET", path)
        text = payload.decode()
        if status != 200 or needle.replace(" ", "") not in text.replace(" ", ""):
            fail(f"GET {path}: {status} {text[:200]}")
    print(f"ok: /v1/embeddings (float, base64) and /embed equal polyhal run's embeddings for "
          f"{len(TEXTS)} texts; /health /ready /v1/models /metrics answer")


def check_long_row(port, want):
    """One batch of more tokens than the model has positions (the real
    model has 512): packed into one row whose positions restart per text,
    each text answered as when alone."""
    many = TEXTS * 12
    status, _, payload = request(port, "POST", "/v1/embeddings", {"input": many})
    answer = json.loads(payload)
    if status != 200 or len(answer["data"]) != len(many):
        fail(f"/v1/embeddings of {len(many)} texts: {status} {payload[:300]!r}")
    for item in answer["data"]:
        if not close_to(item["embedding"], want[item["index"] % len(TEXTS)]):
            fail(f"/v1/embeddings text {item['index']} of {len(many)} differs from polyhal run's")
    print(f"ok: {len(many)} texts ({answer['usage']['prompt_tokens']} tokens) in one request "
          "equal polyhal run's embeddings")


def check_hostile(port):
    for body, status, needle in (
            (b"{not json", 400, "not JSON"), (b"[1, 2]", 400, "JSON object"),
            (b'{"input": "x", "n": 4444e444}', 400, "not JSON"),
            ({"input": 5}, 400, "expected a string"), ({"input": []}, 400, "empty list"),
            ({"input": ""}, 400, "empty string"), ({"input": [[1, 2]]}, 400, "token id"),
            ({"input": ["a", {"b": 1}]}, 400, "expected a string"), ({}, 400, "missing"),
            ({"input": ["x"] * 5}, 400, "at most 4"),
            (b'{"input": "\xff\xfe bad"}', 400, "not JSON"),
            ({"input": "x", "encoding_format": "hex"}, 400, "base64"),
            ({"input": "x", "dimensions": 4096}, 400, "dimensions"),
            ({"input": "word " * 600}, 413, "truncate: true"),
            (b"x" * 5000, 413, "max_body_bytes")):
        expect(port, "POST", "/v1/embeddings", body, status, needle)
    expect(port, "GET", "/nowhere", None, 404, "no endpoint")
    headers = expect(port, "GET", "/v1/embeddings", None, 405, "POST only")
    if headers.get("Allow") != "POST":
        fail(f"405 without Allow: {headers}")
    expect(port, "POST", "/v1/embeddings", b'{"input": "x"}', 415, "application/json",
           {"Content-Type": "text/plain"})
    expect(port, "POST", "/embed", {"inputs": "x", "normalize": "yes"}, 400, "true or false")
    # A client that stops inside its headers is closed after timeout_seconds.
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    slow.settimeout(10)
    began = time.time()
    if slow.recv(100) != b"" or time.time() - began > 5:
        fail("a client stopping mid-headers was not closed within serve.timeout_seconds")
    slow.close()
    # Clients that vanish before their answer.
    for _ in range(8):
        gone = socket.create_connection(("127.0.0.1", port))
        body = json.dumps({"input": TEXTS}).encode()
        gone.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                     b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        gone.close()
    if request(port, "GET", "/health")[0] != 200:
        fail("the server did not survive vanishing clients")
    print("ok: 20 hostile requests answered with their status and a JSON error; a stalled "
          "client closed after the timeout; vanished clients left the server well")


def check_real_clients(work, want):
    """openai and requests, from BUILD_DIR/client-venv when it is there."""
    python = serve_harness.client_python(POLYHAL)
    if python is None:
        print("skipped: the openai and requests clients (run scripts/client-venv.sh)")
        return
    key_file = os.path.join(work, "client-token")
    with open(key_file, "w") as f:
        f.write("client-token\n")
    process, port = start(work, f", api_key_file: {key_file}")
    reference = os.path.join(work, "reference.json")
    with open(reference, "w") as f:
        json.dump([TEXTS, want], f)
    print(serve_harness.run_client(python, os.path.join(SOURCE, "tests", "serve_clients.py"), port,
                                   "client-token", reference))
    stop(process)


def check_auth(work):
    key_file = os.path.join(work, "token")
    with open(key_file, "w") as f:
        f.write("s3cret-token\n")
    process, port = start(work, f", api_key_file: {key_file}")
    expect(port, "POST", "/v1/embeddings", {"input": "x"}, 401, "Bearer")
    expect(port, "POST", "/v1/embeddings", {"input": "x"}, 401, "Bearer",
           {"Authorization": "Bearer wrong"})
    if request(port, "POST", "/v1/embeddings", {"input": "x"},
               {"Authorization": "Bearer s3cret-token"})[0] != 200:
        fail("the right bearer token was refused")
    if request(port, "GET", "/health")[0] != 200:
        fail("/health needs no token")
    stop(process)
    print("ok: serve.api_key_file: no or a wrong token 401, the token 200, /health open")


def concurrently(port, count, body, seconds=None):
    """`count` clients each posting `body` (once, or for `seconds`); their statuses."""
    statuses, lock = [], threading.Lock()

    def client():
        until = time.time() + (seconds or 0)
        while True:
            try:
                status, headers, _ = request(port, "POST", "/v1/embeddings", body, timeout=60)
                if status == 429 and headers.get("Retry-After") != "1":
                    status = -429
            except OSError as e:
                status = f"{type(e).__name__}"
            with lock:
                statuses.append(status)
            if seconds is None or time.time() > until:
                return
    threads = [threading.Thread(target=client) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def check_load(work, port):
    # CI's run: 32 connections for 4 s; SERVE_LOAD=64x20 (docs/serving.md,
    # "Tests") is the longer load, about 20 s more.
    connections, seconds = map(int, os.environ.get("SERVE_LOAD", "32x4").split("x"))
    statuses = concurrently(port, connections, {"input": TEXTS}, seconds=seconds)
    bad = [s for s in statuses if s != 200]
    if bad:
        fail(f"load: {len(bad)} of {len(statuses)} requests failed: {sorted(set(map(str, bad)))}")
    print(f"ok: {connections} connections for {seconds} s: {len(statuses)} requests, none failed")
    process, small = start(work, ", max_queue: 1, max_wait_ms: 300")
    statuses = concurrently(small, 16, {"input": TEXTS})
    if 429 not in statuses or 200 not in statuses or set(statuses) - {200, 429}:
        fail(f"a full queue: {statuses}")
    stop(process)
    print(f"ok: serve.max_queue 1: {statuses.count(429)} of 16 answered 429 with Retry-After, "
          f"the rest 200")


def stop(process):
    process.send_signal(signal.SIGTERM)
    try:
        out, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        fail("serve did not stop within 30 s of SIGTERM")
    if process.returncode != 0 or "every request in flight was answered" not in out:
        fail(f"SIGTERM: exit {process.returncode}: {out[-500:]}")


def check_drain(work):
    process, port = start(work)
    results = []
    thread = threading.Thread(target=lambda: results.extend(
        concurrently(port, 8, {"input": TEXTS * 8})))
    thread.start()
    time.sleep(0.3)
    stop(process)
    thread.join()
    if set(results) - {200, 503, "ConnectionRefusedError", "ConnectionResetError",
                       "RemoteDisconnected"} or 200 not in results:
        fail(f"drain: {results}")
    print(f"ok: SIGTERM during 8 requests: {results.count(200)} answered, exit 0")


def embedding(port, path, body):
    status, _, payload = request(port, "POST", path, body)
    if status != 200:
        fail(f"{path} {body}: {status} {payload[:300]!r}")
    answer = json.loads(payload)
    return answer[0] if path == "/embed" else answer["data"][0]["embedding"]


def check_prompts_and_dimensions(work, plain_port):
    """config_sentence_transformers.json's prompts put before each input as
    sentence-transformers does (prompt_name, or the default one); the first
    N dimensions normalised again (Matryoshka); a field no route reads is a
    400 naming it. `plain_port`: the same model served without prompts."""
    if not os.path.isfile(os.path.join(MODEL_DIR, "config.json")):
        return
    model = os.path.join(work, "with-prompts")
    os.makedirs(model, exist_ok=True)
    for name in os.listdir(MODEL_DIR):
        if name != "config_sentence_transformers.json" and not os.path.exists(
                os.path.join(model, name)):
            os.symlink(os.path.join(MODEL_DIR, name), os.path.join(model, name))
    with open(os.path.join(model, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": {"query": "query: ", "passage": "passage: "},
                   "default_prompt_name": "query"}, f)
    process, port = serve_harness.start(POLYHAL, model, "--port", "0", "--precision", "f32")
    text = TEXTS[1]
    for got, want, what in (
            (embedding(port, "/embed", {"inputs": text, "prompt_name": "passage"}),
             embedding(plain_port, "/embed", {"inputs": "passage: " + text}), "prompt_name"),
            (embedding(port, "/embed", {"inputs": text}),
             embedding(plain_port, "/embed", {"inputs": "query: " + text}), "the default prompt"),
            (embedding(port, "/v1/embeddings", {"input": text}),
             embedding(plain_port, "/v1/embeddings", {"input": "query: " + text}),
             "the default prompt on /v1/embeddings")):
        if not close_to(got, want):
            fail(f"{what}: not the embedding of the prompt and the text")
    stop(process)
    full = embedding(plain_port, "/v1/embeddings", {"input": text})
    if not close_to(embedding(plain_port, "/embeddings", {"input": text}), full):
        fail("/embeddings (infinity's path) differs from /v1/embeddings")
    for path, key in (("/v1/embeddings", "input"), ("/embed", "inputs")):
        short = embedding(plain_port, path, {key: text, "dimensions": 64})
        norm = sum(x * x for x in full[:64]) ** 0.5
        if len(short) != 64 or not close_to(short, [x / norm for x in full[:64]]):
            fail(f"{path} dimensions 64: not the first 64 normalised again")
    expect(plain_port, "POST", "/embed", {"inputs": "a", "prompt_name": "query"}, 400,
           "this model has no prompts")
    expect(plain_port, "POST", "/v1/embeddings", {"input": "a", "dimensions": 0}, 400,
           "'dimensions' is 0: expected 1 to")
    for path, body in (("/embed", {"inputs": "a", "prompt": "x"}),
                       ("/v1/embeddings", {"input": "a", "encodingformat": "float"})):
        field = next(k for k in body if k not in ("inputs", "input"))
        expect(plain_port, "POST", path, body, 400, f'{field}\\" is not a field {path} reads')
    print("ok: prompts (named and default), dimensions 64 on both routes, unknown fields named")


def check_info_tokenize_decode(port):
    """TEI's /info, /tokenize (byte offsets into the text) and /decode, on the
    real model (its tokenizer.json tracks offsets)."""
    if not os.path.isfile(os.path.join(MODEL_DIR, "config.json")):
        return
    status, _, payload = request(port, "GET", "/info")
    info = json.loads(payload)
    if (status != 200 or "embedding" not in info["model_type"]
            or info["max_input_length"] <= 0 or info["max_batch_tokens"] <= 0):
        fail(f"/info: {status} {payload[:300]!r}")
    text = "Héllo wörld, polyhal tokenizes"
    status, _, payload = request(port, "POST", "/tokenize", {"inputs": [text, "a"]})
    tokens = json.loads(payload)
    if status != 200 or len(tokens) != 2:
        fail(f"/tokenize: {status} {payload[:300]!r}")
    raw = text.encode()
    for token in tokens[0]:
        if token["special"]:
            if token["start"] is not None:
                fail(f"/tokenize: a special token with offsets {token}")
        elif raw[token["start"]:token["stop"]].decode() != token["text"]:
            fail(f"/tokenize: {token} is not the text's bytes {token['start']}..{token['stop']}")
    if not tokens[0][0]["special"] or not tokens[0][-1]["special"]:
        fail(f"/tokenize: no framing special tokens: {tokens[0]}")
    status, _, payload = request(port, "POST", "/tokenize",
                                 {"inputs": text, "add_special_tokens": False})
    bare = json.loads(payload)[0]
    if [t["id"] for t in bare] != [t["id"] for t in tokens[0] if not t["special"]]:
        fail(f"/tokenize add_special_tokens false: {bare}")
    ids = [t["id"] for t in tokens[0]]
    status, _, payload = request(port, "POST", "/decode", {"ids": ids})
    decoded = json.loads(payload)
    if status != 200 or len(decoded) != 1 or "polyhal" not in decoded[0]:
        fail(f"/decode: {status} {payload[:300]!r}")
    status, _, payload = request(port, "POST", "/decode", {"ids": [ids, ids[:2]]})
    if status != 200 or len(json.loads(payload)) != 2:
        fail(f"/decode of two lists: {status} {payload[:300]!r}")
    expect(port, "POST", "/decode", {"ids": [1, 10 ** 9]}, 400, "'ids'[1] is 1000000000")
    source, others = TEXTS[0], TEXTS[1:]
    status, _, payload = request(port, "POST", "/similarity",
                                 {"inputs": {"source_sentence": source, "sentences": others}})
    scores = json.loads(payload)
    a = embedding(port, "/embed", {"inputs": source})
    for text, score in zip(others, scores if status == 200 else []):
        b = embedding(port, "/embed", {"inputs": text})
        cosine = sum(x * y for x, y in zip(a, b))  # /embed normalises
        if abs(cosine - score) > 1e-5:
            fail(f"/similarity {text!r}: {score}, the embeddings' cosine is {cosine}")
    if status != 200 or len(scores) != len(others):
        fail(f"/similarity: {status} {payload[:300]!r}")
    expect(port, "POST", "/similarity", {"inputs": {"source_sentence": "a"}}, 400, "sentences")
    expect(port, "POST", "/tokenize", {"inputs": "a", "pair": "b"}, 400, "is not a field")
    print("ok: /info, /tokenize (byte offsets, with and without special tokens), /decode, "
          "/similarity as the embeddings' cosines")


def check_one_command(want):
    """`polyhal serve MODEL_DIR --port 0`, no config file: the model's own
    length and pooling, the same embeddings as the config's server."""
    if not os.path.isfile(os.path.join(MODEL_DIR, "config.json")):
        return
    process, port = serve_harness.start(POLYHAL, MODEL_DIR, "--port", "0", "--precision", "f32")
    status, _, payload = serve_harness.request(port, "POST", "/v1/embeddings", {"input": TEXTS})
    if status != 200:
        fail(f"serve MODEL_DIR: /v1/embeddings answered {status}: {payload[:200]!r}")
    got = [row["embedding"] for row in json.loads(payload)["data"]]
    for text, a, b in zip(TEXTS, got, want):
        if not close_to(a, b):
            fail(f"serve MODEL_DIR: {text!r} differs from polyhal run's embedding")
    stop(process)
    print("ok: polyhal serve MODEL_DIR --port 0 serves the model with no config file")


def main():
    work = tempfile.mkdtemp()
    try:
        want = reference_embeddings(work)
        process, port = start(work, ", max_inputs: 4, max_body_bytes: 4096, truncate: false, "
                                    "timeout_seconds: 1")
        check_answers(port, [want[i] for i in range(len(TEXTS))])
        check_hostile(port)
        stop(process)
        process, port = start(work)
        check_prompts_and_dimensions(work, port)
        check_info_tokenize_decode(port)
        check_long_row(port, want)
        check_load(work, port)
        stop(process)
        check_auth(work)
        check_real_clients(work, want)
        check_drain(work)
        check_one_command(want)
    finally:
        serve_harness.stop_all()
    print("serve_test: ok")


if __name__ == "__main__":
    main()
