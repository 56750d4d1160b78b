#!/usr/bin/python3
"""Packed against unpacked BERT pre-training on the CPU, side by side in one
run: the same sequences, BERT-base at seq 512, bf16, on every core.

Data: MLPerf-layout HDF5 with a length distribution resembling Wikipedia's
at seq 512 (the one tests/golden/make_packing_golden.py uses: a third of the
sequences full length, the rest gamma-distributed towards short; about half
of all tokens are padding unpacked), 15% of each sequence's tokens masked
(at most 76). `polyhal pack` packs it (SPFHP, up to 3 per row); both runs
train the same number of optimizer steps on micro-batches of the same row
count, rows drawn in the same seeded shuffled order, and the table compares
the sequences per second of steps 2 on (step 1 also prepares the kernels).

  /usr/bin/python3 bench/packing_speed.py [--build build] [--steps 3] [--micro 4]
                                          [--algorithm spfhp|nnlshp]
Needs python3-h5py and python3-numpy (bench only; polyhal itself does not).
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import polyhal_bench  # noqa: E402

h5py = polyhal_bench.require("h5py", "apt-get install python3-h5py")
np = polyhal_bench.require("numpy", "apt-get install python3-numpy")

SEQ, PREDICTIONS = 512, 76


def wikipedia_like(n, seed=1234):
    rng = np.random.default_rng(seed)
    full = rng.random(n) < 0.33
    short = np.clip(rng.gamma(2.2, 80.0, n).astype(np.int64) + 8, 8, SEQ)
    return np.where(full, SEQ, short)


def write_mlperf(path, n):
    lengths = wikipedia_like(n)
    rng = np.random.default_rng(7)
    ids = np.zeros((n, SEQ), np.int32)
    mask = np.zeros((n, SEQ), np.int32)
    segments = np.zeros((n, SEQ), np.int32)
    positions = np.zeros((n, PREDICTIONS), np.int32)
    labels = np.zeros((n, PREDICTIONS), np.int32)
    for i, length in enumerate(lengths):
        ids[i, :length] = rng.integers(1000, 30000, length)
        ids[i, 0] = 101
        mask[i, :length] = 1
        segments[i, length // 2:length] = 1
        count = min(PREDICTIONS, max(1, int(round(0.15 * length))))
        chosen = np.sort(rng.choice(np.arange(1, length), size=min(count, length - 1), replace=False))
        positions[i, :len(chosen)] = chosen
        labels[i, :len(chosen)] = ids[i, chosen]
    with h5py.File(path, "w") as f:
        f["input_ids"], f["input_mask"], f["segment_ids"] = ids, mask, segments
        f["masked_lm_positions"], f["masked_lm_ids"] = positions, labels
        f["next_sentence_labels"] = rng.integers(0, 2, n).astype(np.int32)
    return lengths


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--micro", type=int, default=8)
    parser.add_argument("--algorithm", default="spfhp")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "plain")
        os.makedirs(plain)
        lengths = write_mlperf(os.path.join(plain, "part-00000.hdf5"), 2000)
        packed = os.path.join(tmp, "packed")
        out = subprocess.run([os.path.join(a.build, "launcher", "polyhal"), "pack", "--input", plain, "--output",
                              packed, "--max-seq-len", str(SEQ), "--algorithm", a.algorithm],
                             check=True, capture_output=True, text=True).stdout
        print("\n".join(line for line in out.splitlines() if not line.startswith(("reading", "writing", "  wrote"))))
        config = os.path.join(tmp, "bench.yaml")
        with open(config, "w") as f:
            f.write(f"""backend: cpu
task: pretrain
model: {{preset: base, seq_len: {SEQ}, precision: bf16}}
batch: {{micro: {a.micro}, grad_accum: 1}}
data: {{source: mlperf_hdf5, max_predictions: {PREDICTIONS}}}
optimizer: {{name: lamb, learning_rate: 0.004, warmup_steps: 1}}
steps: {a.steps}
""")
        common = ["--config", config]
        rows = {}
        for name, files in (("unpacked", plain), ("packed", packed)):
            args = common + ["--set", f"data.files={files}"]
            lines = polyhal_bench.run(a.build, args)
            # The first step also prepares the kernels: timed from the second on.
            steps = [line for line in lines if line.get("event") == "step"][1:]
            rows[name] = {"sequences": sum(line["sequences"] for line in steps),
                          "seconds": sum(line["seconds"] for line in steps)}
    print()
    print(f"BERT-base seq {SEQ}, bf16, micro-batch {a.micro} rows, {a.steps} steps (the first not timed), mean length "
          f"{lengths.mean():.0f} ({100 * lengths.mean() / SEQ:.0f}% of a row)")
    print()
    print("| data | sequences (steps 2-) | seconds | sequences/s |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        r["rate"] = r["sequences"] / r["seconds"]
        print(f"| {name} | {r['sequences']} | {r['seconds']:.1f} | {r['rate']:.2f} |")
    ratio = rows["packed"]["rate"] / rows["unpacked"]["rate"]
    print(f"\npacked / unpacked: {ratio:.2f}x")


if __name__ == "__main__":
    main()
