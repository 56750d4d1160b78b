#!/usr/bin/env python3
"""Golden curve for the short pre-training parity test
(PretrainParity.ShortRunFollowsTheTransformersCurve): Hugging Face
transformers (bench/pretrain_parity/reference_trainer.py) pre-trains a tiny
BERT with the bert-base-uncased vocabulary for 60 LAMB steps on real prose
(Debian 12's licence texts, committed in tests/data/licence_prose: the
licences but Apache-2.0 to train, Apache-2.0 held out), dropout off, from the initial
weights polyhal writes for seed 5; this writes every step's loss and the
evaluations. The test makes the same data and weights with polyhal and
trains it with polyhal.

Run from the repository root, with the peer venv (bench/peers-venv.sh) and
h5py:
  build/peer-venv/bin/python tests/golden/make_pretrain_parity_golden.py \
      build/launcher/polyhal build/models/all-MiniLM-L6-v2/vocab.txt
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LICENSES = os.path.join(ROOT, "tests/data/licence_prose")
STEPS, BATCH, LR, WARMUP, EVAL_EVERY, SEQ, PREDICTIONS = 60, 8, 0.002, 6, 20, 64, 10


def main():
    polyhal, vocab = sys.argv[1], sys.argv[2]
    names = sorted(n for n in os.listdir(LICENSES) if n not in ("Apache-2.0", "README.md"))
    with tempfile.TemporaryDirectory() as work:
        def run(*args):
            subprocess.run(args, check=True, cwd=work, stdout=subprocess.DEVNULL)
        train = [arg for n in names for arg in ("--input", os.path.join(LICENSES, n))]
        common = ["--vocab", vocab, "--max-seq-len", str(SEQ), "--max-predictions",
                  str(PREDICTIONS), "--dupe-factor", "1", "--progress", "none"]
        run(polyhal, "prepare-data", *train, "--output", "train", *common)
        run(polyhal, "prepare-data", "--input", os.path.join(LICENSES, "Apache-2.0"), "--output",
            "eval", *common)
        with open(os.path.join(work, "init.yaml"), "w") as f:
            f.write(f"backend: cpu\ntask: inference\nmodel: {{preset: tiny, vocab_size: 30522, "
                    f"seq_len: {SEQ}, head: pretraining, seed: 5, save: init}}\n"
                    "batch: {micro: 1}\ndata: {source: generated}\n"
                    "inference: {iterations: 1, warmup: 0}\n")
        run(polyhal, "run", "init.yaml")
        metrics = os.path.join(work, "reference.jsonl")
        run(sys.executable, os.path.join(ROOT, "bench/pretrain_parity/reference_trainer.py"),
            "--init", "init", "--train", "train", "--eval", "eval", "--steps", str(STEPS),
            "--batch", str(BATCH), "--lr", str(LR), "--warmup", str(WARMUP), "--dropout", "0",
            "--eval-every", str(EVAL_EVERY), "--threads", "2", "--metrics", metrics)
        steps, evals, engine = [], [], ""
        with open(metrics) as f:
            for line in f:
                r = json.loads(line)
                if r["event"] == "step":
                    steps.append(r["loss"])
                elif r["event"] == "eval":
                    evals.append({k: r[k] for k in ("step", "mlm_accuracy", "mlm_loss",
                                                    "nsp_accuracy", "nsp_loss", "masked_tokens",
                                                    "sequences")})
                elif r["event"] == "summary":
                    engine = r["engine"]
    out = dict(reference=engine, train_licenses=names, held_out="Apache-2.0", steps=STEPS,
               batch=BATCH, learning_rate=LR, warmup_steps=WARMUP, eval_every=EVAL_EVERY,
               seq_len=SEQ, max_predictions=PREDICTIONS, losses=steps, evaluations=evals)
    with open(os.path.join(ROOT, "tests/golden/pretrain_parity_short.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{len(steps)} steps: loss {steps[0]:.4f} -> {steps[-1]:.4f}; "
          f"eval masked-LM accuracy {evals[-1]['mlm_accuracy']:.4f}")


if __name__ == "__main__":
    main()
