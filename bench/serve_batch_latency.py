#!/usr/bin/env python3
"""How long `polyhal serve` takes for one batch of N real sentences, sent
alone and repeated: one request of N texts is one batch, so the latency is
the model's time on that batch's shape plus the HTTP round trip. Under wrk
(bench/serve_bench.py) batches form by timing and a VM's noise of 10 to 25%
hides changes of a few percent; the same batch repeated shows them (the
minimum and median of each size). Use it to compare builds or configs on
the batch sizes a server sees (8 to 32 sentences at 8 to 32 connections).

  build/serve-bench-venv/bin/python bench/serve_batch_latency.py [--build build]
      [--against OTHER_BUILD] [--model DIR] [--precision mixed|int8]
      [--sizes 1,8,13,21,32] [--repeats 15]

With --against, a server of each build runs (idle in turn), and every
repeat sends the batch to one and then the other: an A/B in the same
moments of the VM, which under separate runs drifts by more than the
change measured.
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_bench  # noqa: E402  (the server's start and readiness)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(serve_bench.ROOT, "build"))
    parser.add_argument("--against", metavar="BUILD",
                        help="a second build, served beside the first: each repeat sends "
                             "the batch to one, then the other, so both see the same moments "
                             "of the VM")
    parser.add_argument("--model", default=os.path.join(serve_bench.ROOT, "build", "models",
                                                        "all-MiniLM-L6-v2"))
    parser.add_argument("--precision", default="mixed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", default="1,8,13,21,32")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with open(os.path.join(serve_bench.ROOT, "tests", "data", "real_model", "sentences.txt")) as f:
        sentences = [line.strip() for line in f if line.strip()]
    builds = [args.build] + ([args.against] if args.against else [])
    # Two servers idle in turn: OpenMP's spinning after a batch would take
    # the other's cores.
    os.environ["OMP_WAIT_POLICY"] = "passive"
    servers = []
    try:
        for build in builds:
            args.build = build
            process, port, path, ready = serve_bench.start_polyhal(
                args, tempfile.mkdtemp(prefix="serve-batch-latency-"), True,
                precision=args.precision)
            servers.append((process, port, path))
            serve_bench.wait_ready(process, f"http://127.0.0.1:{port}{ready}")
        columns = " | ".join(f"{b} min / median ms" for b in builds)
        ratio = " | second / first (median)" if len(builds) > 1 else ""
        print(f"| sentences | tokens | {columns}{ratio} |")
        print("|---" * (2 + len(builds) + (1 if ratio else 0)) + "|")
        for size in (int(s) for s in args.sizes.split(",")):
            random.seed(size)  # the same sentences for every build
            body = json.dumps({"input": random.sample(sentences, size), "model": "m"}).encode()

            def once(server):
                _, port, path = server
                request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body,
                                                 {"Content-Type": "application/json"})
                start = time.perf_counter()
                with urllib.request.urlopen(request) as response:
                    answer = json.loads(response.read())
                return time.perf_counter() - start, answer["usage"]["prompt_tokens"]

            for server in servers:
                for _ in range(3):
                    once(server)  # warm
            runs = [[] for _ in servers]
            for _ in range(args.repeats):
                for i, server in enumerate(servers):
                    runs[i].append(once(server))
            medians = [statistics.median(s for s, _ in r) for r in runs]
            cells = " | ".join(f"{1000 * min(s for s, _ in r):.1f} / {1000 * m:.1f}"
                               for r, m in zip(runs, medians))
            tail = f" | {medians[1] / medians[0]:.3f}" if len(servers) > 1 else ""
            print(f"| {size} | {runs[0][0][1]} | {cells}{tail} |", flush=True)
    finally:
        for process, _, _ in servers:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
