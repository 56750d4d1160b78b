#!/usr/bin/env python3
"""Embedding servers side by side in one run, same CPU, threads, model and
sentences: `polyhal serve` (packed rows, and one text per row to show what
packing gains) against infinity-emb (its ONNX engine through optimum, and its
PyTorch engine) and sentence-transformers behind a minimal HTTP server
(bench/st_server.py, its ONNX backend). wrk (Debian's) sends one real
sentence of mixed length per request (tests/data/real_model/sentences.txt,
cycled) in the OpenAI embeddings shape to each server in turn, at each
concurrency level; the table gives sentences/s, p50 and p99 latency and
errors per server and level, and each server's best against polyhal's.
The -int8 servers run each at its int8 fast path (polyhal's dynamic int8;
ONNX Runtime's dynamic int8 graph for the peers, quantised for this CPU as
sentence-transformers recommends); they are not in the default list.

  build/serve-bench-venv/bin/python bench/serve_bench.py [--build build] [--threads 2]
      [--concurrency 1,8,32,64] [--seconds 10] [--model DIR] [--servers polyhal,...]

Needs scripts/build.sh, scripts/fetch-real-model.sh, `apt-get install wrk`
and the peers: bench/serve-bench-venv.sh (infinity-emb and
sentence-transformers, pinned). Each server gets the same thread count
(polyhal device.threads; OMP_NUM_THREADS and torch's for the peers); wrk
runs on one thread beside them, as a client on the same machine would.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_log(work, name):
    """A file for a server's output: a pipe nobody reads would fill and stop
    a server that logs each request."""
    return open(os.path.join(work, f"{name}.log"), "w")


def wait_ready(process, url, seconds=600):
    """Polls `url` until it answers 200; the server's output if it dies."""
    until = time.time() + seconds
    while time.time() < until:
        if process.poll() is not None:
            with open(process.args_log) as f:
                sys.exit(f"the server exited: {f.read()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    process.kill()
    sys.exit(f"{url} did not answer in {seconds} s")


def lua_script(sentences, path, model, work):
    """wrk's script: each request the next sentence, as an OpenAI embeddings body."""
    bodies = [json.dumps({"input": s, "model": model}) for s in sentences]
    script = os.path.join(work, "embed.lua")
    with open(script, "w") as f:
        f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n')
        f.write("local bodies = {\n")
        for body in bodies:
            f.write(f"  {json.dumps(body)},\n")
        f.write("}\nlocal i = 0\n")
        f.write("function setup(thread) thread:set('offset', math.random(#bodies)) end\n")
        f.write("request = function()\n  i = i + 1\n"
                "  local body = bodies[(i + (offset or 0)) % #bodies + 1]\n"
                f'  return wrk.format(nil, "{path}", nil, body)\nend\n')
    return script


def wrk(url, script, connections, seconds):
    """(sentences/s, p50 ms, p99 ms, errors) from one wrk run."""
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
                          "--timeout", "30s", "-s", script, url],
                         capture_output=True, text=True, check=True).stdout

    def millis(label):
        m = re.search(rf"^\s*{label}%\s+([0-9.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return float("nan")
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]

    rate = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    errors = 0
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors += int(m.group(1))
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        errors += sum(int(x) for x in m.groups())
    return rate, millis("50"), millis("99"), errors


def start_polyhal(args, work, packed, replicas=1, precision="mixed"):
    """polyhal serve on args.threads threads in all: one model, or
    `replicas` copies of it with args.threads / replicas threads each, at
    `precision` (int8: dynamic, no calibration file; smoothing would not
    change the speed)."""
    port = free_port()
    config = os.path.join(work, f"serve-{packed}-{replicas}-{precision}.yaml")
    with open(config, "w") as f:
        f.write(f"backend: cpu\ntask: inference\ndevice: {{threads: {args.threads // replicas}}}\n"
                f"model: {{dir: {args.model}, seq_len: 256, precision: {precision}}}\n"
                f"batch: {{micro: 8}}\n"
                f"inference: {{packed: {'true' if packed else 'false'}}}\n"
                f"serve: {{port: {port}, max_queue: 4096, max_wait_ms: 2, replicas: {replicas}}}\n")
    log = server_log(work, f"polyhal-{packed}-{replicas}-{precision}")
    process = subprocess.Popen([os.path.join(args.build, "launcher", "polyhal"), "serve", config,
                                "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
    process.args_log = log.name
    return process, port, "/v1/embeddings", "/ready"


def peer_env(threads):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               ORT_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false",
               INFINITY_ANONYMOUS_USAGE_STATS="0", HF_HUB_OFFLINE="1")
    return env


def model_with_onnx(model, work):
    """The model directory as the ONNX peers read it: a copy with
    model.onnx beside config.json, exported by optimum. (infinity 0.0.78
    hands optimum 2.1 a path where it matches file names, so the file sits
    at the top; sentence-transformers is told its name.)"""
    from optimum.exporters.onnx import main_export

    out = os.path.join(work, "model-with-onnx")
    shutil.copytree(model, out)
    main_export(model, output=out, task="feature-extraction", library_name="transformers")
    return out


def onnx_quantization_config():
    """sentence-transformers' name of the dynamic int8 configuration for
    this CPU (its export_dynamic_quantized_onnx_model offers arm64, avx2,
    avx512 and avx512_vnni)."""
    flags = re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M).group(1).split()
    if "avx512_vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


def model_with_int8_onnx(onnx_model, work):
    """A copy of the exported model with the ONNX graph quantised as
    sentence-transformers' docs recommend for a CPU (dynamic int8, ONNX
    Runtime's quantiser, the configuration of this CPU) in
    model_quantized.onnx: infinity prefers a "quantize" file on a CPU by
    itself, and sentence-transformers is told its name."""
    from optimum.onnxruntime import ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    out = os.path.join(work, "model-with-int8-onnx")
    shutil.copytree(onnx_model, out)
    config = getattr(AutoQuantizationConfig, onnx_quantization_config())(is_static=False)
    ORTQuantizer.from_pretrained(out, file_name="model.onnx").quantize(config, out)
    return out


def start_infinity(args, work, engine, int8=False):
    port = free_port()
    command = [os.path.join(os.path.dirname(sys.executable), "infinity_emb"), "v2",
               "--model-id", ".", "--engine", engine, "--device", "cpu",
               "--port", str(port), "--batch-size", "32", "--no-model-warmup"]
    # From inside the directory: infinity 0.0.78 passes a local model's ONNX
    # file to optimum as an absolute path, which optimum then cannot find.
    log = server_log(work, f"infinity-{engine}{'-int8' if int8 else ''}")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               env=peer_env(args.threads),
                               cwd=args.int8_onnx_model if int8 else args.onnx_model)
    process.args_log = log.name
    return process, port, "/embeddings", "/health"


def start_sentence_transformers(args, work, int8=False):
    port = free_port()
    log = server_log(work, "st-onnx-int8" if int8 else "st-onnx")
    model = args.int8_onnx_model if int8 else args.onnx_model
    onnx_file = "model_quantized.onnx" if int8 else "model.onnx"
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "st_server.py"),
                                model, str(port), str(args.threads), "onnx", onnx_file],
                               stdout=log, stderr=subprocess.STDOUT, env=peer_env(args.threads),
                               cwd=work)
    process.args_log = log.name
    return process, port, "/v1/embeddings", "/health"


SERVERS = {
    "polyhal": lambda args, work: start_polyhal(args, work, True),
    # f32 whatever the CPU offers: "mixed" (polyhal's default) is bf16 where
    # the CPU has it natively, and the peers' default rows are f32.
    "polyhal-f32": lambda args, work: start_polyhal(args, work, True, precision="f32"),
    "polyhal-unpacked": lambda args, work: start_polyhal(args, work, False),
    # One replica per thread: no thread waits for another inside a kernel,
    # and one replica's packing and pooling overlap the other's encoder.
    "polyhal-replicas": lambda args, work: start_polyhal(args, work, True, args.threads),
    "infinity-optimum": lambda args, work: start_infinity(args, work, "optimum"),
    "infinity-torch": lambda args, work: start_infinity(args, work, "torch"),
    "st-onnx": start_sentence_transformers,
    # int8, each at its own fast path: polyhal's dynamic int8 (seven-bit
    # weights without VNNI), the peers on ONNX Runtime's dynamic int8 graph.
    "polyhal-int8": lambda args, work: start_polyhal(args, work, True, precision="int8"),
    "infinity-optimum-int8": lambda args, work: start_infinity(args, work, "optimum", True),
    "st-onnx-int8": lambda args, work: start_sentence_transformers(args, work, True),
}


def measure(args, name, sentences, work):
    process, port, path, ready = SERVERS[name](args, work)
    try:
        wait_ready(process, f"http://127.0.0.1:{port}{ready}")
        script = lua_script(sentences, path, os.path.basename(args.model.rstrip("/")), work)
        url = f"http://127.0.0.1:{port}"
        wrk(url, script, 8, 3)  # warm-up: kernels, caches, the peers' lazy paths
        rows = []
        for c in args.concurrency:
            rows.append((c, *wrk(url, script, c, args.seconds)))
        return rows
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--model")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--concurrency", default="1,8,32,64")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--servers",
                        default=",".join(name for name in SERVERS if not name.endswith("-int8")))
    parser.add_argument("--sentences",
                        default=os.path.join(ROOT, "tests", "data", "real_model", "sentences.txt"))
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    args.model = os.path.abspath(args.model or os.path.join(args.build, "models",
                                                            "all-MiniLM-L6-v2"))
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: apt-get install wrk")
    with open(args.sentences) as f:
        sentences = [line.strip() for line in f if line.strip()]
    cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read()).group(1)
    print(f"# {cpu}, {args.threads} threads per server, model {args.model}, "
          f"{len(sentences)} sentences, one per request, {args.seconds} s per level")
    results = {}
    work = tempfile.mkdtemp()
    try:
        if any(not name.startswith("polyhal") for name in args.servers.split(",")):
            args.onnx_model = model_with_onnx(args.model, work)
        if any(name.endswith("-int8") and not name.startswith("polyhal")
               for name in args.servers.split(",")):
            args.int8_onnx_model = model_with_int8_onnx(args.onnx_model, work)
        for name in args.servers.split(","):
            results[name] = measure(args, name, sentences, work)
            print(f"# {name} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| server | connections | sentences/s | p50 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        for c, rate, p50, p99, errors in rows:
            print(f"| {name} | {c} | {rate:.1f} | {p50:.1f} | {p99:.1f} | {errors} |")
    best = {name: max(r[1] for r in rows) for name, rows in results.items()}
    print()
    # Each polyhal server against the best peer of its own precision, then
    # of any.
    for name, rate in best.items():
        if name.startswith("polyhal"):
            for same in (True, False):
                peers = {peer: peer_rate for peer, peer_rate in best.items()
                         if not peer.startswith("polyhal")
                         and (not same or peer.endswith("-int8") == name.endswith("-int8"))}
                if peers:
                    peer = max(peers, key=peers.get)
                    print(f"{name}'s best {rate:.1f} sentences/s is {rate / peers[peer]:.2f}x the "
                          f"best {'peer at its precision' if same else 'peer'} "
                          f"({peer}, {peers[peer]:.1f})")


if __name__ == "__main__":
    main()
