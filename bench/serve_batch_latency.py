#!/usr/bin/env python3
"""How long `polyhal serve` takes for one batch of N real sentences, sent
alone and repeated: one request of N texts is one batch, so the latency is
the model's time on that batch's shape plus the HTTP round trip. Under wrk
(bench/serve_bench.py) batches form by timing and a VM's noise of 10 to 25%
hides changes of a few percent; the same batch repeated shows them (the
minimum and median of each size). Use it to compare builds or configs on
the batch sizes a server sees (8 to 32 sentences at 8 to 32 connections).

  build/serve-bench-venv/bin/python bench/serve_batch_latency.py [--build build]
      [--model DIR] [--precision mixed|int8] [--sizes 1,8,13,21,32] [--repeats 15]
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
    parser.add_argument("--model", default=os.path.join(serve_bench.ROOT, "build", "models",
                                                        "all-MiniLM-L6-v2"))
    parser.add_argument("--precision", default="mixed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", default="1,8,13,21,32")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with open(os.path.join(serve_bench.ROOT, "tests", "data", "real_model", "sentences.txt")) as f:
        sentences = [line.strip() for line in f if line.strip()]
    work = tempfile.mkdtemp(prefix="serve-batch-latency-")
    process, port, path, ready = serve_bench.start_polyhal(args, work, True,
                                                           precision=args.precision)
    try:
        serve_bench.wait_ready(process, f"http://127.0.0.1:{port}{ready}")
        print("| sentences | tokens | min ms | median ms |\n|---|---|---|---|")
        for size in (int(s) for s in args.sizes.split(",")):
            random.seed(size)  # the same sentences for every build
            body = json.dumps({"input": random.sample(sentences, size), "model": "m"}).encode()

            def once():
                request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body,
                                                 {"Content-Type": "application/json"})
                start = time.perf_counter()
                with urllib.request.urlopen(request) as response:
                    answer = json.loads(response.read())
                return time.perf_counter() - start, answer["usage"]["prompt_tokens"]

            for _ in range(3):
                once()  # warm
            runs = [once() for _ in range(args.repeats)]
            seconds = sorted(s for s, _ in runs)
            print(f"| {size} | {runs[0][1]} | {1000 * seconds[0]:.1f} | "
                  f"{1000 * statistics.median(seconds):.1f} |")
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
