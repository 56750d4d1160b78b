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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_bert  # noqa: E402  (re-executes with OpenBLAS preloaded)
import polyhal_bench  # noqa: E402

torch = pytorch_bert.torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    parser.add_argument("--preset", default="base")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    a = parser.parse_args()
    config = os.path.join(polyhal_bench.ROOT, "configs", "bert-demo-cpu.yaml")
    hidden = pytorch_bert.PRESETS[a.preset][1]
    rows = []
    for batch in (8, 1):
        common = ["--config", config, "--set", f"model.preset={a.preset}", "--set", f"model.seq_len={a.seq}",
                  "--set", f"batch.micro={batch}", "--set", "model.precision=bf16", "--set",
                  f"inference.iterations={a.iterations}", "--set", f"device.threads={a.threads}"]
        ours = polyhal_bench.run(a.build, common)[-1]
        tokens = batch * a.seq
        gemms = [(tokens, 3 * hidden, hidden, 1), (tokens, hidden, hidden, 1), (tokens, 4 * hidden, hidden, 1),
                 (tokens, hidden, 4 * hidden, 1)]
        rates = polyhal_bench.gemm_rates(a.build, [(m, n, k) for m, n, k, _ in gemms], a.threads)
        # The ceiling: GFLOP/s of the same GEMMs weighted by their FLOPs.
        flops = sum(2.0 * m * n * k for m, n, k, _ in gemms)
        ceiling = flops / polyhal_bench.ceiling_seconds(gemms, rates) / 1e12
        torch_sps, torch_p50 = pytorch_bert.run(a.preset, a.seq, batch, torch.bfloat16, a.threads, a.iterations, 3)
        rows.append((batch, ours["sequences_per_second"], torch_sps, ours["latency_p50_ms"], torch_p50 * 1e3,
                     ours["model_tflops"], ceiling))
    print(f"BERT-{a.preset} inference, seq {a.seq}, bf16, {a.threads} threads, torch {torch.__version__}, "
          f"PyTorch BLAS {pytorch_bert.blas_library()}\n")
    print("| batch | polyhal seq/s | PyTorch seq/s | ratio | polyhal p50 ms | PyTorch p50 ms | latency ratio |"
          " polyhal TFLOP/s | oneDNN GEMM TFLOP/s | MFU of GEMM ceiling |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for batch, ours, theirs, p50, torch_p50, tflops, ceiling in rows:
        print(f"| {batch} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f}x | {p50:.1f} | {torch_p50:.1f} | "
              f"{p50 / torch_p50:.2f} | {tflops:.3f} | {ceiling:.3f} | {100 * tflops / ceiling:.0f}% |")


if __name__ == "__main__":
    main()
