"""scripts/wandb_log.py on malformed metrics files (issue 72, item 21): each
is named by file and line, exit 1, and no Python traceback, with or
without wandb installed (the files are checked before wandb is imported).

  python3 wandb_log_test.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

SOURCE = os.path.abspath(sys.argv[1])
SCRIPT = os.path.join(SOURCE, "scripts", "wandb_log.py")

CASES = [
    (b'{"event": "step", "step": 1}\n\xff\xfe\n', ":2: not UTF-8"),
    (b'{"event": "step"\n', ":1: not a JSON line"),
    (b"[" * 100000 + b"]" * 100000 + b"\n", ":1: JSON nested too deep"),
    (b'{"event": "step", "step": 1}\n[1, 2]\n', ":2: not a JSON object"),
    (b'\n\n"text"\n', ":3: not a JSON object"),
]


def main():
    work = tempfile.mkdtemp()
    for i, (data, needle) in enumerate(CASES):
        path = os.path.join(work, f"m{i}.jsonl")
        with open(path, "wb") as f:
            f.write(data)
        r = subprocess.run([sys.executable, SCRIPT, "--offline", path], capture_output=True,
                           text=True, cwd=work)
        said = r.stdout + r.stderr
        if r.returncode != 1 or "Traceback" in said or f"{path}{needle}" not in said:
            print(f"FAIL: case {i} ({needle}): exit {r.returncode}: {said[-600:]}")
            return 1
    print(f"wandb_log_test: ok ({len(CASES)} malformed files named by line, no traceback)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
