#!/usr/bin/env python3
"""The docs-commands check: every command in a ```sh block of README.md,
docs/*.md and bench/README.md is run as written, or is accounted for.

Each command (continuation lines joined) must match one rule of RULES, or
the check fails: a command added to the docs is either run here or says
where it is run or why it cannot be. The modes:

  run        run as written in a scratch directory laid out like the
             source tree (configs/, tests/, build/ ... linked), with `polyhal`
             and `polyhal-op-conformance` on PATH, and the few inputs the
             docs name (wiki_dir, vocab.txt, mlperf_dir, bert.yaml, a TF
             checkpoint ...) made from tests/data. Must exit 0.
  validate   a job of hours on the user's own data at the user's own paths:
             run with its verb `run` replaced by `validate --skip-inputs`
             (the config, every key, the backend and the plan are checked;
             the inputs are the user's). Must exit 0.
  elsewhere  run by a named test or script that CI runs (checked to exist).
  not run    with the reason (installs into the system, hour-long
             benchmarks with their own venvs).

Commands run in document order, each file in its own scratch directory, so
a command that writes a file (scales.json) precedes the one that reads it.

  python3 scripts/check_docs_commands.py BUILD_DIR [--list]
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DOCS = ["README.md", "bench/README.md"] + sorted(
    "docs/" + f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
TIMEOUT = 300

# A failed command whose output says the CPU lacks what it needs: (pattern
# on the output, the reason shown). The plugin's own refusals.
HOST_LIMITS = [
    (r"int8 cannot run here: .*this CPU has no VNNI", "no VNNI: int8 refused"),
    (r"does not compute in bf16", "no bf16"),
    (r"mixed: f32 on cpu0.*DOES NOT FIT \(backend cpu",
     "no bf16: the config, sized for bf16, does not fit this host in f32"),
]

# (pattern on the command, mode, detail). First match wins.
RULES = [
    (r"^scripts/demo\.sh", "elsewhere", "the fresh-root timing in README.md; .ci/run builds the same parts"),
    (r"^scripts/test\.sh", "elsewhere", ".ci/run (it is the test command)"),
    (r"^sudo apt-get install \./build/debian/", "elsewhere",
     "tests/package_test.sh (ctest packages_unpack_and_discover) unpacks and runs the same packages"),
    (r"^sudo apt-get install cmake g\+\+", "elsewhere",
     "tests/out_of_tree_plugin_test.sh installs polyhal-dev's files and builds the template"),
    (r"^(cp -r /usr/share/doc/polyhal-dev|cd myaccel|cmake |sudo cmake --install)", "elsewhere",
     "tests/out_of_tree_plugin_test.sh (the plugin author's steps)"),
    (r"^polyhal run /usr/share/polyhal/configs/", "elsewhere",
     "tests/package_test.sh runs the shipped configs from the unpacked packages"),
    (r"^man polyhal", "elsewhere", "tests/package_test.sh (lintian checks the man pages)"),
    (r"^polyhal (run|devices) .*myaccel|^polyhal run bert-myaccel", "elsewhere",
     "tests/out_of_tree_plugin_test.sh (BERT and device options on the template backend)"),
    (r"^polyhal plugins +# myaccel", "elsewhere", "tests/out_of_tree_plugin_test.sh"),
    (r"^polyhal-op-conformance build/libpolyhal_plugin_myaccel", "elsewhere",
     "tests/out_of_tree_plugin_test.sh runs it on the template plugin's file"),
    (r"^scripts/fetch-real-model\.sh", "elsewhere", "scripts/test.sh runs it before the tests"),
    (r"^scripts/netns-hosts\.sh", "elsewhere",
     "tests/multihost_test.sh (ctest multihost_netns), as root with namespaces"),
    (r"^(pip install wandb|scripts/wandb_log\.py|wandb sync)", "elsewhere",
     "scripts/check-with-reference-libraries.sh (tests/reference_libraries/check_wandb.py, "
     "offline: W&B's servers are not reachable here)"),
    (r"^curl -s localhost:8080/(predict|rerank|v1/question-answering)", "elsewhere",
     "tests/serve_heads_test.py (ctest serve_heads) sends these requests to served heads"),
    (r"^(polyhal serve |build/launcher/polyhal serve |curl -s localhost:8080)", "elsewhere",
     "tests/serve_test.py (ctest serve_http) starts polyhal serve and sends these requests"),
    (r"^(sudo mkdir -p /var/lib/polyhal|sudo systemctl enable --now polyhal-serve|"
     r"journalctl -u polyhal-serve)", "elsewhere",
     "tests/package_test.sh checks the unit (systemd-analyze verify) and its shipped config; "
     "systemctl needs a booted systemd, which CI's machine is not"),
    (r"^scripts/check-with-reference-libraries\.sh", "not run",
     "installs transformers, TensorFlow and more into a venv (about 2 GB); run by hand"),
    (r"^bench/serve-bench-venv\.sh|^build/serve-bench-venv/bin/python", "not run",
     "the serving benchmark: a venv of infinity-emb, PyTorch and ONNX Runtime (7 GB); 8 minutes"),
    (r"^bench/peers-venv\.sh|^build/peer-venv/bin/python", "not run",
     "the peers benchmark: its own venvs of OpenVINO, ONNX Runtime, PyTorch, IPEX; 40 minutes"),
    (r"^bench/pretrain_parity/", "not run", "1.5 hours of training against transformers"),
    (r"^/usr/bin/python3 bench/", "not run", "a benchmark (bench/README.md lists what each needs and takes)"),
    (r"^build/bench/polyhal_gemm_epilogue_bench", "run", ""),
    (r"^sysctl -w", "not run", "changes the host's TCP settings"),
    (r"^scripts/debian-packages\.sh", "elsewhere", "scripts/test.sh builds the packages with it"),
    (r"^sudo scripts/debian13-test\.sh|^sudo scripts/debian13-autopkgtest\.sh", "not run",
     "a Debian 13 root, a whole build and tests in it (40 minutes and more on 2 cores), by hand "
     "before a release: CI's hour has no room for it (README.md, Supported platforms)"),
    (r"^scripts/sanitize\.sh", "not run",
     "the suite again under ASan and UBSan (about 15 minutes), by hand: CI's hour has no room "
     "for it; CI fuzzes every parser under the same sanitizers"),
    (r"^git archive .*rpmbuild|^rpmbuild -ba", "not run",
     "a whole build of the binary RPMs (5.5 minutes), scripts/rpm-check.sh by hand; "
     "tests/package_test.sh checks the spec and its %files lists"),
    (r"(^| )mpirun --hostfile|--hostfile hosts", "validate", ""),
    (r"^(build/launcher/)?polyhal supervise", "validate", ""),
    (r"polyhal run .*--compile-only", "run", ""),
    # Training and fine-tuning jobs of hours on the user's data.
    (r"polyhal run (--config )?configs/(pretrain-bert|finetune-)", "validate", ""),
    (r"polyhal run (--config )?squad\.yaml", "validate", ""),
    (r"^(build/launcher/|build/tools/|python3 scripts/|mpirun (--mca \S+ \S+ )?-np 2 |M=|/usr/bin/python3 )", "run", ""),
    (r"^polyhal(-op-conformance)? ", "run", ""),
]


# Where a doc names the bert_config.json of a user's BERT-Large checkpoint.
LARGE_CONFIGS = {"docs/pretraining.md": ("wwm_uncased_L-24_H-1024_A-16", "tf-checkpoints/bs64k_32k_ckpt")}


def commands(path):
    """[(line, command)] of the file's ```sh blocks, continuations joined."""
    out, in_fence, block, pending, start = [], False, False, "", 0
    for number, line in enumerate(open(os.path.join(ROOT, path), encoding="utf-8"), 1):
        fence = re.match(r"^\s*```(\w*)", line)
        if fence:
            in_fence = not in_fence
            block = in_fence and fence.group(1) in ("sh", "bash", "shell", "console")
            continue
        if not block:
            continue
        text = line.strip()
        if not pending and (not text or text.startswith("#")):
            continue
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        out.append((start, pending + text))
        pending = ""
    return out


def without_comment(command):
    """The command without its trailing `  # comment`."""
    cut = re.search(r"\s+#\s", command + " ")
    return command[: cut.start()].rstrip() if cut else command


def scratch_dir(build, doc):
    """A directory laid out like the source tree, with the docs' inputs."""
    work = tempfile.mkdtemp(prefix="polyhal-docs-")
    for name in ("configs", "tests", "scripts", "bench", "packaging", "docs"):
        os.symlink(os.path.join(ROOT, name), os.path.join(work, name))
    os.symlink(build, os.path.join(work, "build"))
    data = os.path.join(ROOT, "tests", "data")
    links = {
        "wiki_dir": "corpus/text",
        "vocab.txt": "corpus/vocab.txt",
        "mlperf_dir": "mlperf",
        "phase1/model.ckpt-7038.index": "tf_checkpoint/google/model.ckpt-7.index",
        "phase1/model.ckpt-7038.data-00000-of-00001": "tf_checkpoint/google/model.ckpt-7.data-00000-of-00001",
        "phase1/bert_config.json": "tf_checkpoint/google/bert_config.json",
        "ckpt/model.ckpt-7032.index": "tf_checkpoint/groupbert/lamb/model.ckpt-3.index",
        "ckpt/model.ckpt-7032.data-00000-of-00001":
            "tf_checkpoint/groupbert/lamb/model.ckpt-3.data-00000-of-00001",
        "pretrain_base_groupbert_128.json": "tf_checkpoint/groupbert/lamb/bert_config.json",
    }
    for name, target in links.items():
        os.makedirs(os.path.dirname(os.path.join(work, name)), exist_ok=True)
        os.symlink(os.path.join(data, target), os.path.join(work, name))
    # Google's bert_config.json of BERT-Large (the published values), where
    # the docs name the one that comes with a user's checkpoint.
    large = ('{"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, '
             '"hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 4096, '
             '"max_position_embeddings": 512, "num_attention_heads": 16, "num_hidden_layers": 24, '
             '"type_vocab_size": 2, "vocab_size": 30522}\n')
    for folder in LARGE_CONFIGS.get(doc, ()):
        os.makedirs(os.path.join(work, folder), exist_ok=True)
        with open(os.path.join(work, folder, "bert_config.json"), "w", encoding="utf-8") as f:
            f.write(large)
    copies = {"bert.yaml": "bert-demo-cpu.yaml", "pretrain.yaml": "pretrain-demo-cpu.yaml",
              "squad.yaml": "finetune-squad-bert-large-seq384-cpu.yaml"}
    for name, config in copies.items():
        with open(os.path.join(ROOT, "configs", config), encoding="utf-8") as f:
            text = f.read()
        with open(os.path.join(work, name), "w", encoding="utf-8") as f:
            f.write(text)
    tools = os.path.join(work, ".bin")
    os.makedirs(tools)
    os.symlink(os.path.join(build, "launcher", "polyhal"), os.path.join(tools, "polyhal"))
    os.symlink(os.path.join(build, "tools", "polyhal-op-conformance"),
               os.path.join(tools, "polyhal-op-conformance"))
    return work


def as_validate(command):
    """`... polyhal run ARGS` -> `... polyhal validate --skip-inputs ARGS`."""
    changed, count = re.subn(r"(polyhal) run ", r"\1 validate --skip-inputs ", command, count=1)
    if count != 1:
        raise ValueError("no 'polyhal run' to validate")
    # supervise/mpirun wrappers: validate the config they would run, once.
    changed = re.sub(r"^.*?(?=(\S*polyhal) validate )", "", changed, count=1)
    return re.sub(r" --max-restarts \d+", "", changed)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    listing = "--list" in sys.argv
    env = dict(os.environ)
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"  # mpirun as root in CI (docs/scale-out.md says why)
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    failures, rows = [], []
    # Every script the configs and docs name exists (12 configs once named
    # a bench/squad_inference_sweep.sh that never did).
    named_in = DOCS + sorted("configs/" + f for f in os.listdir(os.path.join(ROOT, "configs")))
    for doc in named_in:
        with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                for script in re.findall(r"(?<![\w/.-])((?:bench|scripts|tests)/[\w./-]+\.(?:sh|py))", text):
                    if not os.path.exists(os.path.join(ROOT, script)):
                        failures.append(f"{doc}:{number}: names {script}, which does not exist")
    for doc in DOCS:
        found = commands(doc)
        if not found:
            continue
        work = None if listing else scratch_dir(build, doc)
        env["PATH"] = (os.path.join(work, ".bin") + ":" if work else "") + os.environ["PATH"]
        # `M=dir; ...` on one line is used by the lines after it, as in one shell.
        assignments = ""
        tmp_places = []
        for line, command in found:
            where = f"{doc}:{line}"
            rule = next((r for r in RULES if re.search(r[0], command)), None)
            if rule is None:
                failures.append(f"{where}: no rule says how this command is checked: {command}")
                rows.append((where, "UNCHECKED", command))
                continue
            mode, detail = rule[1], rule[2]
            named = re.match(r"((tests|scripts)/\S+)", detail)
            if mode == "elsewhere" and named and not os.path.exists(os.path.join(ROOT, named.group(1))):
                failures.append(f"{where}: said to be checked by {named.group(1)}, which does not exist")
            if mode in ("elsewhere", "not run") or listing:
                rows.append((where, mode, detail or command))
                continue
            line_to_run = without_comment(command)
            if mode == "validate":
                line_to_run = as_validate(line_to_run)
            shown = line_to_run
            line_to_run = assignments + line_to_run
            leading = re.match(r"^((\w+=\S+;\s*)+)", command)
            if leading:
                assignments += leading.group(1)
            # Places under /tmp the docs name start empty, as on a fresh machine.
            scratch_places = re.findall(r"=(/tmp/[\w.-]+)", line_to_run)
            for place in scratch_places:
                subprocess.run(["rm", "-rf", place])
            tmp_places += scratch_places
            start = time.monotonic()
            try:
                result = subprocess.run(["bash", "-c", line_to_run], cwd=work, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        timeout=TIMEOUT, text=True, errors="replace")
                code, output = result.returncode, result.stdout
            except subprocess.TimeoutExpired as e:
                code, output = "timeout", (e.stdout or b"").decode(errors="replace")
            seconds = time.monotonic() - start
            status = "ok" if code == 0 else f"FAILED ({code})"
            # A precision or a memory plan this CPU does not have, refused as
            # the docs say it is on such a CPU: the host, not the docs.
            host_reason = next((reason for pattern, reason in HOST_LIMITS
                                if code != 0 and re.search(pattern, output, re.S)), None)
            if host_reason:
                status, code = f"skipped on this CPU ({host_reason})", 0
            rows.append((where, f"{mode} {status} {seconds:.0f} s", shown))
            if code != 0:
                failures.append(f"{where}: {shown}\n  exit {code}; last lines:\n    " +
                                "\n    ".join(output.strip().splitlines()[-12:]))
        if work:
            subprocess.run(["rm", "-rf", work] + sorted(set(tmp_places)))
    for where, mode, what in rows:
        print(f"{where:28} {mode:22} {what[:110]}")
    if failures:
        print("\n".join(["", "docs commands that failed or are unaccounted for:"] + failures))
        return 1
    print(f"docs commands: {len(rows)} checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
