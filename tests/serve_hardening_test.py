"""`polyhal serve` under the fourth hostile probe (issue 72): each fault
that let one request end or starve the server, sent to a live server this
test starts on a free loopback port; after each, /health must answer.

- Item 1: a body nested 300,000 deep in a key the 400 message names.
- Item 2: a chunked request with a 70 KB trailer field, and one whose chunk
  extension runs to 64 MB: the connection is refused, the server's memory
  stays bounded, and other clients are served.

A seeded tiny model with a small vocabulary (nothing to download).

  python3 serve_hardening_test.py POLYHAL SOURCE_DIR
"""
import json
import os
import socket
import sys
import tempfile
import time

import serve_harness
from serve_harness import expect, fail, request

POLYHAL, SOURCE = sys.argv[1:3]


def start(work, extra=""):
    path = os.path.join(work, f"serve{len(serve_harness.servers)}.yaml")
    with open(path, "w") as f:
        f.write("backend: cpu\ntask: inference\n"
                "model: {preset: tiny, vocab_size: 85, seq_len: 64, precision: f32}\n"
                f"data: {{vocab: {SOURCE}/tests/data/corpus/vocab.txt}}\n"
                "inference: {pooling: mean, normalize: true}\nbatch: {micro: 4}\n"
                "serve: {port: 0, max_body_bytes: 4000000, timeout_seconds: 20" + extra + "}\n")
    return serve_harness.start(POLYHAL, path)


def healthy(port, what):
    began = time.time()
    try:
        status = request(port, "GET", "/health", timeout=5)[0]
    except OSError as e:
        fail(f"after {what}: /health: {e!r} (the server ended?)")
    if status != 200:
        fail(f"after {what}: /health answered {status}")
    return time.time() - began


def rss_kb(process):
    with open(f"/proc/{process.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def check_deep_bodies(port):
    deep = "[" * 300000 + "]" * 300000
    for path, rest, key in (("/v1/embeddings", '"input": "a"', "encoding_format"),
                            ("/v1/embeddings", '"input": "a"', "dimensions"),
                            ("/embed", '"inputs": "a"', "truncation_direction"),
                            ("/v1/embeddings", '"input": "a"', "input")):
        body = ("{" + rest + ', "' + key + '": ' + deep + "}").encode()
        expect(port, "POST", path, body, 400, "nested deeper than 64 levels")
        healthy(port, f"a body nested 300,000 deep in '{key}'")
    print("ok: bodies nested 300,000 deep answered 400 (item 1); the server lives")


def chunked_head():
    return (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")


def answer_or_close(sock):
    """The status line the server sent, or '' when it closed without one."""
    sock.settimeout(20)
    got = b""
    try:
        while b"\r\n" not in got:
            piece = sock.recv(4096)
            if not piece:
                break
            got += piece
    except (ConnectionResetError, socket.timeout):
        pass
    return got.split(b"\r\n")[0].decode(errors="replace")


def check_long_trailer(port):
    body = b'{"input": "a"}'
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(chunked_head() + b"%x\r\n" % len(body) + body + b"\r\n0\r\n"
                 b"X-Trailer: " + b"t" * 70000 + b"\r\n\r\n")
    line = answer_or_close(sock)
    sock.close()
    if line and not line.startswith("HTTP/1.1 431"):
        fail(f"a 70 KB trailer field: {line!r}, expected 431 or a closed connection")
    healthy(port, "a 70 KB trailer field")
    print(f"ok: a 70 KB trailer field: {line or 'closed'} (item 2); the server lives")


def check_long_extension(process, port):
    before = rss_kb(process)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(chunked_head() + b"e;ext=")
    sent = 0
    piece = b"e" * (1 << 20)
    try:
        while sent < 64 << 20:
            sock.sendall(piece)
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass
    line = answer_or_close(sock)
    sock.close()
    grew = rss_kb(process) - before
    if grew > 16 * 1024:
        fail(f"a chunk extension of {sent >> 20} MB grew the server by {grew} KB")
    healthy(port, "a long chunk extension")
    print(f"ok: a chunk extension: refused after {sent >> 20} MB sent ({line or 'closed'}), the "
          f"server grew {grew} KB (item 2); the server lives")


def main():
    work = tempfile.mkdtemp()
    try:
        process, port = start(work)
        check_deep_bodies(port)
        check_long_trailer(port)
        check_long_extension(process, port)
        status, _, payload = request(port, "POST", "/v1/embeddings", {"input": ["still here"]})
        if status != 200 or len(json.loads(payload)["data"]) != 1:
            fail(f"an ordinary request after the hostile ones: {status} {payload[:200]!r}")
        if process.poll() is not None:
            fail("the server ended")
    finally:
        serve_harness.stop_all()
    print("serve_hardening_test: ok")


if __name__ == "__main__":
    main()
