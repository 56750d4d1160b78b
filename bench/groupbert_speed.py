#!/usr/bin/python3
"""GroupBERT-base against BERT-base on this CPU, side by side in one run:
polyhal's pre-training step (forward, backward, LAMB) and inference (the
encoder), seq 128, the same batch, data, threads and precision for both
models, and each one's share of the GEMM ceiling measured in the same run.

The work: generated MLM/NSP data with 20 labelled positions per sequence,
dropout off (Graphcore's GroupBERT pre-training configs set it to 0; BERT
gets the same), the first step left out (first touch of the memory).
Inference is polyhal's `inference` task (configs/bert-demo-cpu.yaml, the
encoder without heads) over `--iterations` batches.

The ceiling: every 2-D GEMM of the model (bench/model_flops.py counts them
from the dimensions, GroupBERT's grouped down-projection as its G GEMMs of
[t, I/G] x [I/G, N/G]) at the rate oneDNN's matmul reaches on that shape
alone (polyhal matmul-bench, in the row's precision), summed; attention's
batched GEMMs and GroupBERT's grouped convolution at the best rate measured
(their own kernels never reach it, so the ceiling errs high). "% of
ceiling" = ceiling time / measured time. TFLOP/s counts the model's
matrix work (GEMMs, attention, convolution) only.

    /usr/bin/python3 bench/groupbert_speed.py [--build build] [--batch 8]
        [--steps 4] [--iterations 20] [--precisions bf16,f32]

About 3 minutes on 2 cores; the machine should be otherwise idle (a busy
neighbour slows polyhal's spinning threads many times over).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_flops  # noqa: E402
import polyhal_bench  # noqa: E402


def inference_rate(build, preset, seq, batch, precision, iterations, threads):
    """Sequences per second of polyhal's inference task, and the kernels its linears ran."""
    rows = polyhal_bench.run(build, [
        "--config", os.path.join(polyhal_bench.ROOT, "configs", "bert-demo-cpu.yaml"),
        "--set", f"model.preset={preset}", "--set", f"model.seq_len={seq}", "--set", f"batch.micro={batch}",
        "--set", f"model.precision={precision}", "--set", f"inference.iterations={iterations}",
        "--set", f"device.threads={threads}"])
    summary = rows[-1]
    return summary["sequences_per_second"]


def ceiling_seconds(build, work, precision, threads):
    gemms, other = work
    rates = polyhal_bench.gemm_rates(build, [(m, n, k) for m, n, k, _ in gemms], threads, dtype=precision)
    return polyhal_bench.ceiling_seconds(gemms, rates) + other / (max(rates.values()) * 1e9)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    p.add_argument("--models", default="base,groupbert-base")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--predictions", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--precisions", default="bf16,f32")
    a = p.parse_args()
    models = a.models.split(",")
    cpu = open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].splitlines()[0].strip()
    print(f"GroupBERT vs BERT on polyhal's cpu plugin: seq {a.seq}, batch {a.batch}, {a.threads} threads, {cpu}\n")
    print("| model | precision | task | GFLOP/seq | seq/s | TFLOP/s | % of ceiling |")
    print("|---|---|---|---|---|---|---|")
    results = {}
    for precision in a.precisions.split(","):
        for model in models:
            for task in ("training step", "inference"):
                training = task == "training step"
                work = model_flops.model_work(model, a.seq, a.batch, a.predictions, training)
                gflop = model_flops.flops(*work) / a.batch / 1e9
                if training:
                    rate = polyhal_bench.pretrain_step_rate(a.build, model, a.seq, a.batch, precision, a.steps,
                                                            0.0, a.predictions, a.threads)
                else:
                    rate = inference_rate(a.build, model, a.seq, a.batch, precision, a.iterations, a.threads)
                ceiling = ceiling_seconds(a.build, work, precision, a.threads)
                share = 100 * ceiling * rate / a.batch
                results[(precision, model, task)] = (gflop, rate)
                print(f"| {model} | {precision} | {task} | {gflop:.1f} | {rate:.2f} | {gflop * rate / 1e3:.3f} | "
                      f"{share:.0f}% |", flush=True)
    if len(models) == 2:
        print(f"\n{models[1]} against {models[0]} (time per sequence; matrix work per sequence):")
        for precision in a.precisions.split(","):
            for task in ("training step", "inference"):
                (f0, r0), (f1, r1) = results[(precision, models[0], task)], results[(precision, models[1], task)]
                print(f"- {precision} {task}: {r0 / r1:.2f}x the time for {f1 / f0:.2f}x the FLOPs")


if __name__ == "__main__":
    main()
