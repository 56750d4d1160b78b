"""polyhal's runs in Weights & Biases, checked offline with the wandb client
(docs/config.md "Weights & Biases"):

1. scripts/wandb_log.py on a `--metrics-out` file: the offline run's history
   holds every step's loss and learning rate as polyhal wrote them, and its
   summary the run's precision.
2. TensorBoard files: a wandb run tracking a directory (as
   `wandb.init(sync_tensorboard=True)` does for a framework's writer), then
   `polyhal run --tensorboard` writing into it: wandb-core reads polyhal's
   event files and its history holds the same losses.

The offline run files (.wandb) are read back here in the client's record
format: a 7-byte header, then 32 KiB blocks of chunks (CRC-32 4, length 2,
type 1: full, first, middle, last), each record a wandb.proto Record.

  python check_wandb.py POLYHAL WORK_DIR
"""
import glob
import json
import math
import os
import struct
import subprocess
import sys
import time

import wandb
from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768
HEADER = 7


def wandb_records(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B", f"{path}: not a W&B run file"
    pos, record = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        if length == 0 and kind == 0:
            pos += left
            continue
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        record = chunk if kind in (1, 2) else record + chunk
        if kind in (1, 4):
            out = pb.Record()
            out.ParseFromString(record)
            yield out


def history(run_dir):
    """{step: {key: value}} of the run's history records."""
    files = glob.glob(os.path.join(run_dir, "run-*.wandb"))
    assert len(files) == 1, (run_dir, files)
    out, summary = {}, {}
    for r in wandb_records(files[0]):
        kind = r.WhichOneof("record_type")
        if kind == "history":
            items = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
            step = items.get("_step", r.history.step.num)
            out.setdefault(step, {}).update(items)
        elif kind == "summary":
            for i in r.summary.update:
                summary[i.key or "/".join(i.nested_key)] = json.loads(i.value_json)
    return out, summary


def newest_run(wandb_dir):
    runs = sorted(glob.glob(os.path.join(wandb_dir, "offline-run-*")))
    assert runs, wandb_dir
    return runs[-1]


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def main():
    polyhal, work = sys.argv[1], os.path.abspath(sys.argv[2])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    config = os.path.join(root, "configs", "pretrain-demo-cpu.yaml")
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_SILENT"] = "true"
    metrics = os.path.join(work, "wandb-metrics.jsonl")
    subprocess.run([polyhal, "run", config, "--set", "steps=6", "--set", "checkpoint.dir=null",
                    "--progress", "none", "--metrics-out", metrics], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    steps = [json.loads(l) for l in open(metrics) if '"event":"step"' in l]
    subprocess.run([sys.executable, os.path.join(root, "scripts", "wandb_log.py"), "--offline",
                    metrics], check=True)
    logged, summary = history(newest_run(os.path.join(work, "wandb")))
    for s in steps:
        got = logged.get(s["step"], {})
        for key in ("loss", "mlm_loss", "nsp_loss", "learning_rate", "grad_norm"):
            assert close(got.get(key, math.nan), s[key]), (s["step"], key, got.get(key), s[key])
    assert summary.get("precision") == "f32", summary
    print(f"ok: wandb_log.py: {len(steps)} steps of {metrics} in the offline run's history, exactly")

    # TensorBoard: wandb-core reads event files created after the run began.
    tb = os.path.join(work, "wandb-tb")
    run = wandb.init(project="polyhal", dir=os.path.join(work, "tb-run"))
    run._tensorboard_callback(tb, save=False, root_logdir=tb)
    subprocess.run([polyhal, "run", config, "--set", "steps=6", "--set", "checkpoint.dir=null",
                    "--progress", "none", "--tensorboard", tb], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)  # wandb-core polls the directory
    run.finish()
    logged, _ = history(newest_run(os.path.join(work, "tb-run", "wandb")))
    losses = {}
    for items in logged.values():
        if "step/loss" in items and "global_step" in items:
            losses[int(items["global_step"])] = items["step/loss"]
    want = {s["step"]: s["loss"] for s in steps}
    assert sorted(losses) == sorted(want), (sorted(losses), sorted(want))
    for step, loss in want.items():
        assert math.isclose(losses[step], loss, rel_tol=1e-6), (step, losses[step], loss)
    print(f"ok: wandb-core read polyhal's TensorBoard events: step/loss of steps "
          f"{min(losses)}-{max(losses)} as the metrics file has them")


if __name__ == "__main__":
    main()
