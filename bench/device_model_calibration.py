#!/usr/bin/python3
"""The device models' training estimates against published MLPerf Training
logs (BERT-large, seq 512). Prints case | published | estimate | ratio and
exits 1 when a ratio is outside 0.8-1.25.

Published rates are the logged training-block throughput (not time-to-train,
which includes evaluation), in 512-token rows: both submissions pack about
2 sequences per row, and polyhal's estimate is for unpacked rows of 512
tokens, which cost the same compute.

- IPU-POD16, MLPerf Training v1.1 BERT (Graphcore, PopART, closed): about
  1,526 sequences/s -> about 763 rows/s -> 48 rows/s per IPU; estimated with
  the recipe's layout (configs/pretrain-bert-large-phase2-ipu.yaml at
  MLPerf's 512 tokens: 4 replicas x 4 pipeline stages, recomputation, 1F1B
  with its ramp, the slowest stage setting the pace, host I/O), divided by
  the 16 IPUs.
- 8x Gaudi2, MLPerf Training v2.0 BERT (Habana, TensorFlow): about 2,367
  sequences/s -> about 1,184 rows/s -> 148 rows/s per card; estimated with
  8 replicas (one per card), gradient all-reduce included.

  /usr/bin/python3 bench/device_model_calibration.py [--build build]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import polyhal_bench  # noqa: E402

CASES = [
    # name, published rows/s per device, config, overrides, devices sharing the estimate
    ("IPU-POD16, MLPerf v1.1 BERT (Graphcore), per IPU", 1526 / 2 / 16,
     "pretrain-bert-large-phase2-ipu.yaml",
     ["--set", "model.seq_len=512", "--set", "data.max_predictions=80"], 16),
    ("8x Gaudi2, MLPerf v2.0 BERT (Habana), per card", 2367 / 2 / 8,
     "pretrain-bert-large-phase2-gaudi.yaml", ["--set", "batch.replicas=8"], 8),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    a = parser.parse_args()
    print("| case | published rows/s | estimate rows/s | ratio |")
    print("|---|---|---|---|")
    failed = False
    for name, published, config, overrides, devices in CASES:
        summary = polyhal_bench.run(a.build, ["--config", os.path.join(polyhal_bench.ROOT, "configs", config),
                                              "--compile-only"] + overrides, check=False)[-1]
        estimate = summary["estimated_sequences_per_second"] / devices
        ratio = estimate / published
        failed = failed or not 0.8 <= ratio <= 1.25
        print(f"| {name} | {published:.1f} | {estimate:.1f} | {ratio:.2f} |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
