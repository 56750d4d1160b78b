"""`polyhal serve` under the fourth hostile probe (issue 72): each fault
that let one request end or starve the server, sent to a live server this
test starts on a free loopback port; after each, /health must answer.

- Item 1: a body nested 300,000 deep in a key the 400 message names.
- Item 2: a chunked request with a 70 KB trailer field, and one whose chunk
  extension runs to 64 MB: the connection is refused, the server's memory
  stays bounded, and other clients are served.
- Item 3: a question-answering request whose context makes more windows
  than serve.max_inputs is refused (413) from the token count, in
  a fraction of the 19 s that building every window took.
- Item 4: /rerank tokenizes the query once, not once per text.
- Issue 68: while a 1 MiB /rerank or question-answering body is parsed and
  tokenized, /health answers within 100 ms (the work is off the I/O threads).
- Item 8: out of descriptors (EMFILE, under a low RLIMIT_NOFILE), the
  acceptor backs off: little CPU, a few log lines, the failures counted,
  and the server serves again once connections close.
- Item 10: a second SIGTERM during the drain ends the process at once.
- Item 14: a Host that is not the loopback server's own (DNS rebinding) is
  refused (403) unless serve.allowed_hosts names it.
- Item 17: the listen line brackets an IPv6 address.
- Item 18: with a token configured, an unknown path answers 401, not 404.
- Item 16: header names, the bearer scheme and the media type are
  compared case-insensitively.
- Item 19: an api_key_file others can read is warned about.

A seeded tiny model with a small vocabulary and the tiny exports of
tests/data/serve_heads (nothing to download).

  python3 serve_hardening_test.py POLYHAL SOURCE_DIR
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import serve_harness
from serve_harness import expect, fail, request

POLYHAL, SOURCE = sys.argv[1:3]


WORDS = ("the river mountain city village road bridge forest market school garden house tower "
         "king queen farmer teacher doctor child friend people water bread stone light").split()


def config(work, serve, head=None):
    """A config of the seeded tiny model (or a serve_heads export) with `serve` keys."""
    path = os.path.join(work, f"serve{len(serve_harness.servers)}-{time.monotonic_ns()}.yaml")
    if head:
        model = (f"model: {{dir: {SOURCE}/tests/data/serve_heads/{head}, seq_len: 64, "
                 "precision: f32}\n")
    else:
        model = ("model: {preset: tiny, vocab_size: 85, seq_len: 64, precision: f32}\n"
                 f"data: {{vocab: {SOURCE}/tests/data/corpus/vocab.txt}}\n"
                 "inference: {pooling: mean, normalize: true}\n")
    with open(path, "w") as f:
        f.write("backend: cpu\ntask: inference\n" + model + "batch: {micro: 4}\n"
                "serve: {port: 0, " + serve + "}\n")
    return path


def start(work, extra="", head=None):
    return serve_harness.start(
        POLYHAL, config(work, "max_body_bytes: 4000000, timeout_seconds: 60" + extra, head))


def start_saying(path, until="listening on", **popen):
    """Starts serve on `path`: the process and what it said up to `until` (its last line)."""
    process = subprocess.Popen([POLYHAL, "serve", path, "--log-level", "warn"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               **popen)
    serve_harness.servers.append(process)
    said = []
    while not said or not any(word in said[-1] for word in until.split("|")):
        said.append(process.stdout.readline())
        if not said[-1]:
            fail(f"serve {path} did not start: " + "".join(said))
    return process, said


def port_of(line):
    return int(line.split("127.0.0.1:")[1].split("/")[0])


def text_of(n_bytes, seed=0):
    out, i, size = [], seed, 0
    while size < n_bytes:
        out.append(WORDS[i % len(WORDS)] + ("ing" if i % 7 == 0 else ""))
        size += len(out[-1]) + 1
        i += 3
    return " ".join(out)


def timed_post(port, path, body, results):
    began = time.time()
    try:
        status = request(port, "POST", path, body, timeout=120)[0]
    except OSError as e:
        status = repr(e)
    results.append((status, time.time() - began))


def health_during(port, path, body):
    """/health's worst latency while two copies of `body` are worked on (as
    many as the server has I/O threads); the first one's result."""
    results = []
    workers = [threading.Thread(target=timed_post, args=(port, path, body, results))
               for _ in range(2)]
    for worker in workers:
        worker.start()
    time.sleep(0.05)
    worst, probes = 0.0, 0
    while any(w.is_alive() for w in workers) and probes < 500:
        worst = max(worst, healthy(port, f"{path} in flight"))
        probes += 1
        time.sleep(0.02)
    for worker in workers:
        worker.join()
    return worst, probes, results[0]


def heavy(port, path, body, want, what):
    """Posts `body`, expecting `want`, while /health must answer within 100 ms."""
    worst, probes, (status, seconds) = health_during(port, path, body)
    if status != want:
        fail(f"{what}: {status}, expected {want}")
    if probes and worst > 0.1:
        fail(f"/health took {worst * 1000:.0f} ms while {what} was worked on")
    return worst, probes, seconds


def check_heavy_requests_leave_health_answering(work):
    process, port = start(work, head="cross_encoder")
    query = text_of(1 << 20)
    body = json.dumps({"query": query, "texts": [text_of(2000, k) for k in range(8)],
                       "truncate": True}).encode()
    worst, probes, seconds = heavy(port, "/rerank", body, 200, "a 1 MiB /rerank")
    print(f"ok: a 1 MiB /rerank of 8 texts took {seconds:.2f} s (the query tokenized once, item "
          f"4); /health answered {probes} times meanwhile, the slowest in {worst * 1000:.0f} ms")
    process.kill()
    process, port = start(work, ", max_inputs: 32", head="question_answering")
    for size in (400 * 1024, 1 << 20):
        body = json.dumps({"question": "who built the tower?", "context": text_of(size)}).encode()
        worst, probes, seconds = heavy(port, "/v1/question-answering", body, 413,
                                       f"a {size >> 10} KB question-answering context")
        print(f"ok: a {size >> 10} KB question-answering context refused (413, item 3) in "
              f"{seconds:.2f} s; /health answered {probes} times meanwhile, the slowest in "
              f"{worst * 1000:.0f} ms")
    # Twelve questions of three windows each: more windows than serve.max_inputs.
    expect(port, "POST", "/v1/question-answering",
           {"question": ["who?"] * 12, "context": text_of(900)}, 413, "more than 32 windows")
    process.kill()


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
    return (b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
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


def raw_status(port, head):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head)
    line = answer_or_close(sock)
    sock.close()
    return line


def check_hosts_and_tokens(work):
    process, port = start(work)
    for host, status in (("evil.example", "403"), ("evil.example:%d" % port, "403"),
                         ("localhost:%d" % port, "200"), ("127.0.0.1", "200"),
                         ("[::1]:%d" % port, "200"), ("app.localhost", "200")):
        line = raw_status(port, f"GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        if f" {status} " not in line + " ":
            fail(f"Host {host}: {line!r}, expected {status} (item 14)")
    process.kill()
    process, port = start(work, ", allowed_hosts: [embed.internal]")
    for host, status in (("embed.internal:%d" % port, "200"), ("evil.example", "403")):
        line = raw_status(port, f"GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        if f" {status} " not in line + " ":
            fail(f"allowed_hosts, Host {host}: {line!r}, expected {status}")
    process.kill()
    print("ok: a foreign Host is refused (403) on loopback, localhost and loopback addresses are "
          "answered, serve.allowed_hosts adds names (item 14)")
    key_file = os.path.join(work, "key.txt")
    with open(key_file, "w") as f:
        f.write("s3cret\n")
    os.chmod(key_file, 0o644)
    path = config(work, f"api_key_file: {key_file}")
    process, said = start_saying(path)
    if not any("readable by others" in line and "chmod 600" in line for line in said):
        fail(f"no warning for an api_key_file of mode 644 (item 19): {''.join(said)}")
    port = port_of(said[-1])
    for route in ("/nowhere", "/v1/embeddings"):
        status = request(port, "GET", route)[0]
        if status != 401:
            fail(f"GET {route} without the token: {status}, expected 401 (item 18)")
    if request(port, "GET", "/nowhere", headers={"Authorization": "Bearer s3cret"})[0] != 404:
        fail("GET /nowhere with the token: expected 404")
    # Item 16: the scheme and the media type are case-insensitive; header names too.
    for headers in ({"authorization": "bearer s3cret", "content-type": "Application/JSON"},
                    {"AUTHORIZATION": "BEARER s3cret",
                     "Content-Type": "application/json; charset=utf-8"}):
        status, _, payload = request(port, "POST", "/v1/embeddings", b'{"input": "a"}',
                                     headers=headers)
        if status != 200:
            fail(f"{headers}: {status} {payload[:200]!r} (item 16)")
    status = request(port, "POST", "/v1/embeddings", b'{"input": "a"}',
                     headers={"Authorization": "Bearer s3cret", "Content-Type": "application/jsonx"})[0]
    if status != 415:
        fail(f"Content-Type application/jsonx: {status}, expected 415")
    process.kill()
    print("ok: an unknown path without the token is 401, with it 404 (item 18); a key file of "
          "mode 644 is warned about (item 19)")
    process, said = start_saying(config(work, "host: '::1'"), until="listening on|cannot listen")
    line = said[-1]
    process.kill()
    if "cannot listen" in line:
        print("skipped: no IPv6 loopback here (item 17)")
    elif "listening on http://[::1]:" not in line:
        fail(f"the listen line of ::1: {line!r} (item 17)")
    else:
        print("ok: the listen line brackets ::1 (item 17)")


def cpu_seconds(process):
    with open(f"/proc/{process.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_out_of_descriptors(work):
    import resource
    limit = 96

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    process, said = start_saying(config(work, "timeout_seconds: 30"), preexec_fn=low_limit)
    port = port_of(said[-1])
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    held = []
    for _ in range(limit + 40):  # more than the server can hold
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    began_cpu, began = cpu_seconds(process), time.time()
    time.sleep(2.0)
    spent = cpu_seconds(process) - began_cpu
    elapsed = time.time() - began
    for sock in held:
        sock.close()
    time.sleep(0.3)
    status, _, page = request(port, "GET", "/metrics")
    failures = [l for l in page.decode().splitlines()
                if l.startswith("polyhal_accept_failures_total")]
    warned = [l for l in lines if "accept failed" in l]
    process.kill()
    if status != 200 or not failures or failures[0].split()[-1] == "0":
        fail(f"out of descriptors: /metrics {status} {failures} (item 8)")
    if spent > 0.5 * elapsed:
        fail(f"out of descriptors the server spent {spent:.2f} s of CPU in {elapsed:.1f} s (item 8)")
    if len(warned) > 5:
        fail(f"out of descriptors: {len(warned)} 'accept failed' lines in {elapsed:.1f} s (item 8)")
    print(f"ok: out of descriptors ({len(held)} connections against a limit of {limit}): "
          f"{failures[0].split()[-1]} failed accepts counted, {spent:.2f} s of CPU in "
          f"{elapsed:.1f} s, {len(warned)} log line(s); served again after (item 8)")


def check_second_signal(work):
    process, port = start(work)
    body = json.dumps({"input": [text_of(200, k) for k in range(64)]}).encode()
    threads = [threading.Thread(target=timed_post, args=(port, "/v1/embeddings", body, []))
               for _ in range(16)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        fail("a second SIGTERM did not end serve (item 10)")
    for t in threads:
        t.join()
    out = process.stdout.read()
    if process.returncode not in (0, 128 + signal.SIGTERM):
        fail(f"two SIGTERMs: exit {process.returncode}: {out[-400:]}")
    print(f"ok: two SIGTERMs: exit {process.returncode} at once (item 10)")


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
        check_heavy_requests_leave_health_answering(work)
        check_out_of_descriptors(work)
        check_hosts_and_tokens(work)
        check_second_signal(work)
    finally:
        serve_harness.stop_all()
    print("serve_hardening_test: ok")


if __name__ == "__main__":
    main()
