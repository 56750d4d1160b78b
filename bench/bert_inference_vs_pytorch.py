#!/usr/bin/python3
"""Side-by-side BERT inference benchmark on this machine, in one run:

  polyhal (cpu plugin, oneDNN)  vs  PyTorch 1.13 (Debian python3-torch)
  same model dims, seq 128, bf16 weights, same thread count, generated inputs

and polyhal's model-FLOPs utilisation against the oneDNN GEMM ceiling measured
in the same run (polyhal matmul-bench on BERT-base's GEMM shapes at this
batch). Prints a Markdown table.

  /usr/bin/python3 bench/bert_inference_vs_pytorch.py [--build build] [--preset base]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_bert  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def polyhal(build, args):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([os.path.join(build, "launcher", "polyhal"), "run", "--metrics-out", metrics] + args,
                       check=True, stdout=subprocess.DEVNULL)
        with open(metrics) as f:
            return [json.loads(line) for line in f]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--preset", default="base")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    a = parser.parse_args()
    config = os.path.join(ROOT, "configs", "bert-demo-cpu.yaml")
    hidden = pytorch_bert.PRESETS[a.preset][1]
    rows = []
    for batch in (8, 1):
        common = ["--config", config, "--set", f"model.preset={a.preset}", "--set", f"model.seq_len={a.seq}",
                  "--set", f"batch.micro={batch}", "--set", "model.precision=bf16", "--set",
                  f"inference.iterations={a.iterations}", "--set", f"device.threads={a.threads}"]
        ours = polyhal(a.build, common)[-1]
        tokens = batch * a.seq
        shapes = f"[[{tokens},{3 * hidden},{hidden}],[{tokens},{hidden},{hidden}],[{tokens},{4 * hidden},{hidden}],[{tokens},{hidden},{4 * hidden}]]"
        gemm = polyhal(a.build, ["--config", os.path.join(ROOT, "configs", "matmul-bench-cpu.yaml"), "--set",
                                 f"matmul_bench.shapes={shapes}", "--set", "matmul_bench.iterations=20", "--set",
                                 f"device.threads={a.threads}"])
        # The ceiling: GFLOP/s of the same GEMMs weighted by their FLOPs.
        flops = [2 * r["m"] * r["n"] * r["k"] for r in gemm if r.get("event") == "matmul"]
        times = [f / (r["gflops"] * 1e9) for f, r in zip(flops, [r for r in gemm if r.get("event") == "matmul"])]
        ceiling = sum(flops) / sum(times) / 1e12
        torch_sps, torch_p50 = pytorch_bert.run(a.preset, a.seq, batch, torch.bfloat16, a.threads, a.iterations, 3)
        rows.append((batch, ours["sequences_per_second"], torch_sps, ours["latency_p50_ms"], torch_p50 * 1e3,
                     ours["model_tflops"], ceiling))
    print(f"BERT-{a.preset} inference, seq {a.seq}, bf16, {a.threads} threads, torch {torch.__version__}\n")
    print("| batch | polyhal seq/s | PyTorch seq/s | ratio | polyhal p50 ms | PyTorch p50 ms | latency ratio |"
          " polyhal TFLOP/s | oneDNN GEMM TFLOP/s | MFU of GEMM ceiling |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for batch, ours, theirs, p50, torch_p50, tflops, ceiling in rows:
        print(f"| {batch} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f}x | {p50:.1f} | {torch_p50:.1f} | "
              f"{p50 / torch_p50:.2f} | {tflops:.3f} | {ceiling:.3f} | {100 * tflops / ceiling:.0f}% |")


if __name__ == "__main__":
    main()
