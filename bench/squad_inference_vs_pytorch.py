#!/usr/bin/python3
"""The seeds' SQuAD inference benchmark (Graphcore's bert.py --generated-data),
on this machine, in one run:

1. Side by side: BERT-large, seq 384, batch 8, bf16, the encoder and the
   qa_outputs head (BertForQuestionAnswering), generated inputs, the same
   thread count: polyhal (cpu plugin, oneDNN) against PyTorch (Debian
   python3-torch, bf16 weights, inference_mode, OpenBLAS preloaded).
2. A micro-batch sweep at seq 128 and 384 on every backend: the CPU measured
   (sequences/s, p50 and p99 batch latency), ipu and gaudi estimated by their
   device models (--compile-only: planned, not run, and labelled so).

Prints Markdown tables.

  /usr/bin/python3 bench/squad_inference_vs_pytorch.py [--build build] [--sweep-preset base]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_bert  # noqa: E402  (re-executes with OpenBLAS preloaded)
import polyhal_bench  # noqa: E402

torch = pytorch_bert.torch


def config(preset, seq, backend):
    return os.path.join(polyhal_bench.ROOT, "configs", f"squad-inference-bert-{preset}-seq{seq}-{backend}.yaml")


def polyhal(build, preset, seq, backend, batch, threads, iterations, compile_only=False):
    args = ["--config", config(preset, seq, backend), "--set", f"batch.micro={batch}",
            "--set", f"inference.iterations={iterations}"]
    if backend == "cpu":
        args += ["--set", f"device.threads={threads}"]
    if compile_only:
        args.append("--compile-only")
    return polyhal_bench.run(build, args)[-1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    parser.add_argument("--preset", default="large", help="side-by-side model")
    parser.add_argument("--seq", type=int, default=384)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--sweep-preset", default="base")
    parser.add_argument("--sweep-batches", default="1,2,4,8,16")
    parser.add_argument("--no-sweep", action="store_true")
    a = parser.parse_args()

    ours = polyhal(a.build, a.preset, a.seq, "cpu", a.batch, a.threads, a.iterations)
    theirs, theirs_p50, theirs_p99 = pytorch_bert.run_latencies(
        a.preset, a.seq, a.batch, torch.bfloat16, a.threads, a.iterations, 2, "question_answering")
    print(f"SQuAD inference (BertForQuestionAnswering), BERT-{a.preset}, seq {a.seq}, batch {a.batch}, bf16, "
          f"generated inputs, {a.threads} threads, {a.iterations} batches each after warm-up; "
          f"torch {torch.__version__}, PyTorch BLAS {pytorch_bert.blas_library()}\n")
    print("| | sequences/s | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    print(f"| polyhal cpu | {ours['sequences_per_second']:.2f} | {ours['latency_p50_ms']:.0f} | "
          f"{ours['latency_p99_ms']:.0f} |")
    print(f"| PyTorch bf16 | {theirs:.2f} | {theirs_p50 * 1e3:.0f} | {theirs_p99 * 1e3:.0f} |")
    print(f"| ratio | {ours['sequences_per_second'] / theirs:.2f}x | | |\n")
    if a.no_sweep:
        return

    batches = [int(b) for b in a.sweep_batches.split(",")]
    print(f"Micro-batch sweep, BERT-{a.sweep_preset}, generated inputs; cpu measured here, ipu and gaudi "
          "estimated by their device models (not measured)\n")
    print("| seq | backend | micro-batch | sequences/s | kind | p50 ms | p99 ms | fits |")
    print("|---|---|---|---|---|---|---|---|")
    for seq in (128, 384):
        for backend in ("cpu", "ipu", "gaudi"):
            for batch in batches:
                m = polyhal(a.build, a.sweep_preset, seq, backend, batch, a.threads, a.iterations,
                            compile_only=backend != "cpu")
                if backend == "cpu":
                    value, kind = m["sequences_per_second"], "measured"
                    latency = f"{m['latency_p50_ms']:.1f} | {m['latency_p99_ms']:.1f}"
                else:
                    value, kind = m.get("estimated_sequences_per_second"), "estimated (device model)"
                    latency = "- | -"
                shown = f"{value:.1f}" if value else "-"
                print(f"| {seq} | {backend} {m['device']} | {batch} | {shown} | {kind} | {latency} | "
                      f"{'yes' if m['fits'] else 'no'} |")


if __name__ == "__main__":
    main()
