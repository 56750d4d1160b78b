#!/usr/bin/python3
"""The device models' estimates for BERT-large pre-training past one box:
the seeds' IPU-POD16 / POD64 / POD128 and 8 / 16 / 32 Gaudi2-card configs,
phase 1 (seq 128) and phase 2, each at the same global batch. Prints config
| devices | estimated seq/s | per device | scaling vs one box | all-reduce
share of the step. Every figure is a device model's estimate
(`polyhal run --compile-only`), never a measurement.

No seed publishes throughput for these systems (the Graphcore and Habana
READMEs give commands only), so there is no published figure to divide by;
the one-box configs are the calibrated points (bench/device_model_calibration.py).

  /usr/bin/python3 bench/scale_out_estimates.py [--build build]
"""
import argparse
import os

import polyhal_bench

CASES = [
    # config, overrides, devices
    ("pretrain-bert-large-phase1-ipu.yaml", [], 16),
    ("pretrain-bert-large-phase1-pod64-ipu.yaml", [], 64),
    ("pretrain-bert-large-phase1-pod128-ipu.yaml", [], 128),
    ("pretrain-bert-large-phase2-ipu.yaml", [], 16),
    ("pretrain-bert-large-phase2-pod64-ipu.yaml", [], 64),
    ("pretrain-bert-large-phase2-pod128-ipu.yaml", [], 128),
    ("pretrain-bert-large-phase1-gaudi.yaml", ["--set", "batch.replicas=8", "--set", "batch.grad_accum=128"], 8),
    ("pretrain-bert-large-phase1-16gaudi2.yaml", [], 16),
    ("pretrain-bert-large-phase1-32gaudi2.yaml", [], 32),
    ("pretrain-bert-large-phase2-gaudi.yaml", ["--set", "batch.replicas=8", "--set", "batch.grad_accum=512"], 8),
    ("pretrain-bert-large-phase2-16gaudi2.yaml", [], 16),
    ("pretrain-bert-large-phase2-32gaudi2.yaml", [], 32),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    a = parser.parse_args()
    print("| config | devices | estimated seq/s | per device | scaling vs one box | all-reduce share |")
    print("|---|---|---|---|---|---|")
    base = None
    for config, overrides, devices in CASES:
        records = polyhal_bench.run(a.build, ["--config", os.path.join(polyhal_bench.ROOT, "configs", config),
                                              "--compile-only"] + overrides)
        summary = records[-1]
        rate = summary["estimated_sequences_per_second"]
        per_device = rate / devices
        if not any(scale in config for scale in ("pod64", "pod128", "16gaudi2", "32gaudi2")):
            base = per_device  # the one-box config of this phase and backend
        step = summary.get("estimated_step_seconds", {})
        share = step["all_reduce"] / step["total"] if step.get("total") else None
        print(f"| {config} | {devices} | {rate:,.0f} | {per_device:.1f} | {per_device / base:.2f} | "
              f"{'-' if share is None else f'{share:.1%}'} |")


if __name__ == "__main__":
    main()
