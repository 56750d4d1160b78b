#!/usr/bin/env python3
"""Puts polyhal runs into Weights & Biases: each `--metrics-out` file (JSON
lines, docs/config.md "Metrics") becomes one W&B run whose history holds
every training step (loss, mlm_loss, nsp_loss, learning_rate, grad_norm,
loss_scale, sequences_per_second), every evaluation (under eval/) and whose
summary holds the run's summary line (backend, device, model, precision,
...). Public wandb API only (wandb.init, run.log), so any wandb release
works; `--offline` writes the run to ./wandb for a later `wandb sync`.

  pip install wandb
  scripts/wandb_log.py [--project P] [--name N] [--offline] METRICS.jsonl...

docs/config.md "Weights & Biases" says how, and how TensorBoard files
(`--tensorboard DIR`) reach W&B.
"""
import argparse
import json
import math
import pathlib
import sys


def records(path):
    """The file's JSON objects; exits naming the file and line of the first
    that is not one (never a traceback: a bad byte, a value nested past
    Python's recursion limit, a line of another type)."""
    out = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            where = f"wandb_log: {path}:{number}"
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                sys.exit(f"{where}: not UTF-8 (byte {e.start + 1} of the line)")
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{where}: not a JSON line ({e.msg} at column {e.colno})")
            except RecursionError:
                sys.exit(f"{where}: JSON nested too deep")
            if not isinstance(record, dict):
                sys.exit(f"{where}: not a JSON object")
            out.append(record)
    return out


def numbers(record, prefix=""):
    """The record's finite numbers (booleans as 0/1), keyed for W&B."""
    out = {}
    for key, value in record.items():
        if key in ("event", "step", "time"):
            continue
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, int) and not -2**63 <= value < 2**63:
            continue  # past what W&B stores as a number
        if isinstance(value, (int, float)) and math.isfinite(value):
            out[prefix + key] = value
    return out


def log_file(wandb, path, records_of_file, project, name, offline):
    run = wandb.init(project=project, name=name or pathlib.Path(path).stem,
                     mode="offline" if offline else None, job_type="polyhal",
                     config={"metrics_file": str(path)})
    steps = 0
    for record in records_of_file:
        event = record.get("event")
        step = record.get("step")
        if event == "step" and isinstance(step, int):
            run.log(numbers(record), step=step)
            steps += 1
        elif event == "eval":
            values = numbers(record, "eval/")
            if isinstance(step, int):
                run.log(values, step=step)
            else:
                run.log(values)
        elif event == "summary":
            for key, value in record.items():
                if key != "event" and (value is None or isinstance(value, (str, int, float, bool))):
                    run.summary[key] = value
    run.finish()
    print(f"wandb_log: {path}: {steps} steps into {'offline ' if offline else ''}run {run.id}"
          f" ({project})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="polyhal --metrics-out files")
    parser.add_argument("--project", default="polyhal")
    parser.add_argument("--name", help="the run's name (default: the file's stem); one file only")
    parser.add_argument("--offline", action="store_true", help="write ./wandb for `wandb sync`")
    args = parser.parse_args()
    if args.name and len(args.files) > 1:
        sys.exit("wandb_log: --name names one run: give one file")
    # Every file is read and checked first: a bad line is named before any
    # run is made, and with or without wandb installed.
    read = {}
    for path in args.files:
        if not pathlib.Path(path).is_file():
            sys.exit(f"wandb_log: {path}: no such file")
        read[path] = records(path)
    try:
        import wandb
    except ImportError:
        sys.exit("wandb_log: no wandb module here: pip install wandb")
    for path in args.files:
        log_file(wandb, path, read[path], args.project, args.name, args.offline)


if __name__ == "__main__":
    main()
