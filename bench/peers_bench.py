#!/usr/bin/env python3
"""polyhal against the engines a user would pick instead, side by side in one
run on this machine, same threads, shapes and weights, each at its
recommended fast path:

  OpenVINO          f32 and bf16 inference precision hints, LATENCY hint at
                    batch 1 and THROUGHPUT at batch 8; INT8 through NNCF's
                    post-training quantisation
  ONNX Runtime      the transformer optimizer's fusions (attention, skip and
                    embed LayerNorm), f32; INT8 by dynamic quantisation
  PyTorch 2         bf16 weights (and torch.compile with --compile)
  IPEX              ipex.optimize(dtype=bfloat16) + TorchScript trace and
                    freeze, as Intel's BERT scripts do (needs --ipex-python)
  polyhal           its default (model.precision mixed: bf16 where the CPU
                    has it natively, else f32), f32, bf16 and int8 (dynamic
                    activations) on the cpu plugin

The training row (base-train-b8) is bench/bert_training_vs_pytorch.py's step
(MLM on 20 gathered positions + NSP, dropout 0.1, bf16 autocast) for polyhal
(LAMB, AdamW), this environment's PyTorch (fused AdamW; LAMB in tensor ops)
and IPEX (ipex.optimize with fused AdamW). Each bf16 polyhal row also gives
its share of the bf16 GEMM ceiling measured in the same run (polyhal
matmul-bench: oneDNN's bf16 matmul on each GEMM shape alone).

The weights are polyhal's seeded BERT written as a Hugging Face directory
(model.save), so every engine runs the same numbers. Inputs are random
token ids (seq full, no padding). Prints a Markdown table and the versions.

  bench/peers-venv.sh build                 # the pinned virtual environments, once
  build/peer-venv/bin/python bench/peers_bench.py [--build build] [--rows base-b1,base-b8,large-b8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_flops  # noqa: E402
import polyhal_bench  # noqa: E402

ROWS = {
    "base-b1": ("base", 128, 1),
    "base-b8": ("base", 128, 8),
    "large-b8": ("large", 384, 8),
    "base-train-b8": ("base", 128, 8),  # the pre-training step: fwd + bwd + optimizer
}
TRAINING_BENCH = os.path.join(HERE, "bert_training_vs_pytorch.py")


def timed(fn, iterations, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times


def summary(times, batch):
    p50 = statistics.median(times)
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    return {"seq_per_s": batch * len(times) / sum(times), "p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3}


def polyhal_rows(build, hf_dir, seq, batch, iterations, threads):
    out = {}
    for name, precision in (("polyhal default", "mixed"), ("polyhal f32", "f32"), ("polyhal bf16", "bf16"),
                            ("polyhal int8 (dynamic)", "int8")):
        lines = polyhal_bench.run(build, [
            "--config", os.path.join(polyhal_bench.ROOT, "configs", "bert-demo-cpu.yaml"),
            "--set", f"model.hf_config={hf_dir}/config.json", "--set", f"model.weights={hf_dir}/model.safetensors",
            "--set", f"model.seq_len={seq}", "--set", f"batch.micro={batch}", "--set", f"model.precision={precision}",
            "--set", f"inference.iterations={iterations}", "--set", f"device.threads={threads}"])
        s = lines[-1]
        if precision == "mixed":
            name = f"polyhal default (mixed: {s['precision']})"
        out[name] = {"seq_per_s": s["sequences_per_second"], "p50_ms": s["latency_p50_ms"],
                     "p99_ms": s["latency_p99_ms"],
                     "kernels": "; ".join(sorted({p["implementation"] for p in s.get("profile", [])
                                                  if p["op"].startswith("linear")}))}
    return out


def make_model(build, preset, seq, directory):
    """polyhal's seeded BERT as a Hugging Face directory (one batch run with model.save)."""
    polyhal_bench.run(build, ["--config", os.path.join(polyhal_bench.ROOT, "configs", "bert-demo-cpu.yaml"),
                              "--set", f"model.preset={preset}", "--set", f"model.seq_len={seq}",
                              "--set", "inference.iterations=1", "--set", "inference.warmup=0",
                              "--set", f"model.save={directory}"])


def inputs(seq, batch):
    import numpy as np
    rng = np.random.default_rng(7)
    return {"input_ids": rng.integers(1000, 20000, (batch, seq), dtype=np.int64),
            "attention_mask": np.ones((batch, seq), dtype=np.int64),
            "token_type_ids": np.zeros((batch, seq), dtype=np.int64)}


def export_onnx(hf_dir, seq, path):
    import torch
    from transformers import BertModel
    model = BertModel.from_pretrained(hf_dir, attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):  # positional inputs, the encoder's output only
        def __init__(self):
            super().__init__()
            self.bert = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                             use_cache=False).last_hidden_state

    feed = {k: torch.from_numpy(v) for k, v in inputs(seq, 1).items()}
    torch.onnx.export(Encoder().eval(), (feed["input_ids"], feed["attention_mask"], feed["token_type_ids"]), path,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"],
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask",
                                                                         "token_type_ids")},
                      opset_version=17, dynamo=False)


def onnxruntime_rows(onnx_path, hidden, heads, seq, batch, iterations, threads, work):
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model
    fused = os.path.join(work, "bert-fused.onnx")
    if not os.path.exists(fused):
        optimize_model(onnx_path, model_type="bert", num_heads=heads, hidden_size=hidden).save_model_to_file(fused)
        # The fused graph's contrib ops carry no inferred types: name the default.
        import onnx
        quantize_dynamic(fused, os.path.join(work, "bert-int8.onnx"), weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    static_path = os.path.join(work, f"bert-int8-static-{batch}x{seq}.onnx")
    static_error = None
    if not os.path.exists(static_path):
        # Static: QDQ per channel, on the same kind of calibration batches as NNCF's.
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

        class Batches(CalibrationDataReader):
            def __init__(self):
                self.batches = iter([inputs(seq, batch) for _ in range(8)])

            def get_next(self):
                return next(self.batches, None)
        try:
            import onnx
            quantize_static(fused, static_path, Batches(), quant_format=QuantFormat.QDQ, per_channel=True,
                            weight_type=QuantType.QInt8, activation_type=QuantType.QInt8,
                            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        except Exception as e:  # reported in the table, not hidden
            static_error = f"quantize_static failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    feed = inputs(seq, batch)
    out = {}
    if static_error:
        out["ONNX Runtime int8 (static, QDQ)"] = {"error": static_error}
    models = [("ONNX Runtime f32 (fused)", fused), ("ONNX Runtime int8 (dynamic)", os.path.join(work, "bert-int8.onnx"))]
    if os.path.exists(static_path):
        models.append(("ONNX Runtime int8 (static, QDQ)", static_path))
    for name, path in models:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        out[name] = summary(timed(lambda: session.run(None, feed), iterations, 3), batch)
        out[name]["note"] = "MLAS kernels (ONNX Runtime reports no ISA)"
    return out


def openvino_rows(onnx_path, seq, batch, iterations, threads, work, bf16):
    import openvino as ov
    core = ov.Core()
    model = core.read_model(onnx_path)
    model.reshape({n.get_any_name(): [batch, seq] for n in model.inputs})
    feed = inputs(seq, batch)
    out = {}
    precisions = ["f32"] + (["bf16"] if bf16 else [])
    for precision in precisions:
        for hint in ("LATENCY", "THROUGHPUT"):
            compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": hint, "INFERENCE_NUM_THREADS": threads,
                                                         "INFERENCE_PRECISION_HINT": precision})
            r = openvino_time(compiled, feed, batch, iterations, hint)
            r["note"] = "; ".join(filter(None, [r.get("note"), openvino_kernels(compiled)]))
            out[f"OpenVINO {precision} ({hint})"] = r
    # INT8: NNCF post-training quantisation on random-token calibration batches.
    import nncf
    int8_path = os.path.join(work, f"bert-int8-{batch}x{seq}.xml")
    if not os.path.exists(int8_path):
        calibration = nncf.Dataset([inputs(seq, batch) for _ in range(8)])
        quantized = nncf.quantize(model, calibration, model_type=nncf.ModelType.TRANSFORMER, subset_size=8)
        ov.save_model(quantized, int8_path)
    for hint in ("LATENCY", "THROUGHPUT"):
        compiled = core.compile_model(core.read_model(int8_path), "CPU",
                                      {"PERFORMANCE_HINT": hint, "INFERENCE_NUM_THREADS": threads})
        r = openvino_time(compiled, feed, batch, iterations, hint)
        r["note"] = "; ".join(filter(None, [r.get("note"), openvino_kernels(compiled)]))
        out[f"OpenVINO int8 NNCF ({hint})"] = r
    return out


def openvino_kernels(compiled):
    """What OpenVINO's CPU plugin says ran for the GEMMs: the runtime
    precision and primitive type of each FullyConnected/MatMul node of the
    compiled (execution) graph, counted."""
    counts = {}
    for op in compiled.get_runtime_model().get_ops():
        info = op.get_rt_info()

        def field(name):
            return str(info[name].value) if name in info.keys() else "?"
        kind = field("layerType")
        if kind not in ("FullyConnected", "MatMul"):
            continue
        key = f"{kind} {field('runtimePrecision')} {field('primitiveType')}"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n}x {k}" for k, n in sorted(counts.items()))


def openvino_time(compiled, feed, batch, iterations, hint):
    if hint == "LATENCY":
        request = compiled.create_infer_request()
        return summary(timed(lambda: request.infer(feed), iterations, 3), batch)
    import openvino as ov
    queue = ov.AsyncInferQueue(compiled)
    requests = len(queue)
    for _ in range(requests):  # warm every request
        queue.start_async(feed)
    queue.wait_all()
    start = time.perf_counter()
    for _ in range(iterations):
        queue.start_async(feed)
    queue.wait_all()
    elapsed = time.perf_counter() - start
    # Throughput mode overlaps requests: no per-batch latency to report.
    return {"seq_per_s": batch * iterations / elapsed, "p50_ms": float("nan"), "p99_ms": float("nan"),
            "note": f"{requests} requests in flight"}


def torch_rows(hf_dir, seq, batch, iterations, threads, compile_too):
    import torch
    from transformers import BertModel
    torch.set_num_threads(threads)
    model = BertModel.from_pretrained(hf_dir, torch_dtype=torch.bfloat16).eval()
    f32_model = BertModel.from_pretrained(hf_dir).eval()
    feed = {k: torch.from_numpy(v) for k, v in inputs(seq, batch).items()}
    out = {}
    version = torch.__version__.split("+")[0]

    def autocast():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return f32_model(**feed)

    with torch.inference_mode():
        for name, fn in ((f"PyTorch {version} bf16 weights", lambda: model(**feed)),
                         (f"PyTorch {version} bf16 autocast", autocast)):
            out[name] = summary(timed(fn, iterations, 3), batch)
            out[name]["note"] = onednn_kernels(fn)
        if compile_too:
            compiled = torch.compile(model)
            out[f"PyTorch {version} bf16 weights, torch.compile"] = summary(
                timed(lambda: compiled(**feed), iterations, 3), batch)
    return out


def onednn_kernels(fn):
    """The oneDNN GEMM implementations PyTorch ran for one call of `fn`
    (oneDNN's verbose log, captured from file descriptor 1)."""
    import torch
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+") as log:
        os.dup2(log.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        log.seek(0)
        return verbose_summary(log.read())


def verbose_summary(text):
    """'matmul brg:avx512_core_bf16' and the like, from oneDNN verbose lines."""
    seen = set()
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 5 and fields[0] in ("onednn_verbose", "dnnl_verbose") and "exec" in fields:
            at = fields.index("exec")
            kind, impl = fields[at + 2], fields[at + 3]
            if kind in ("matmul", "inner_product", "convolution"):
                seen.add(f"{kind} {impl}")
    return "oneDNN: " + "; ".join(sorted(seen)) if seen else "no oneDNN GEMM reported"


IPEX_SCRIPT = r'''
import json, sys, time, statistics, torch, numpy as np
import intel_extension_for_pytorch as ipex
from transformers import BertModel
hf, seq, batch, iterations, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
model = BertModel.from_pretrained(hf, torchscript=True, attn_implementation="eager").eval()
model = ipex.optimize(model, dtype=torch.bfloat16)
rng = np.random.default_rng(7)
ids = torch.from_numpy(rng.integers(1000, 20000, (batch, seq), dtype=np.int64))
mask = torch.ones((batch, seq), dtype=torch.int64); types = torch.zeros((batch, seq), dtype=torch.int64)
with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
    traced = torch.jit.freeze(torch.jit.trace(model, (ids, mask, types), strict=False))
    for _ in range(3): traced(ids, mask, types)
    times = []
    for _ in range(iterations):
        t = time.perf_counter(); traced(ids, mask, types); times.append(time.perf_counter() - t)
    # One more call with oneDNN's verbose log on, captured from descriptor 1.
    import os, tempfile
    sys.stdout.flush(); saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+") as log:
        os.dup2(log.fileno(), 1)
        with ipex.verbose(ipex.VERBOSE_ON):
            traced(ids, mask, types)
        sys.stdout.flush(); os.dup2(saved, 1); os.close(saved)
        log.seek(0); verbose = log.read()
print(json.dumps({"times": times, "torch": torch.__version__, "ipex": ipex.__version__, "verbose": verbose}))
'''


def ipex_rows(python, hf_dir, seq, batch, iterations, threads):
    result = subprocess.run([python, "-c", IPEX_SCRIPT, hf_dir, str(seq), str(batch), str(iterations), str(threads)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        return {"IPEX": {"error": result.stderr.strip().splitlines()[-1] if result.stderr else "failed"}}
    data = json.loads(result.stdout.strip().splitlines()[-1])
    times = sorted(data["times"])
    r = summary(times, batch)
    r["note"] = verbose_summary(data.get("verbose", ""))
    return {f"IPEX {data['ipex']} bf16 (TorchScript, frozen)": r}


def training_rows(build, ipex_python, seq, batch, steps, threads):
    """The pre-training step (MLM on 20 gathered positions + NSP, dropout 0.1)
    as bench/bert_training_vs_pytorch.py defines it, with bf16 autocast: polyhal
    with LAMB and AdamW, PyTorch 2 with its fused AdamW and with LAMB, IPEX's
    bf16 training path with fused AdamW. The bf16 GEMM ceiling of the step is
    measured in the same run."""
    out = {}
    for optimizer in ("lamb", "adamw"):
        out[f"polyhal bf16, {optimizer}"] = {
            "seq_per_s": polyhal_bench.pretrain_step_rate(build, "base", seq, batch, "bf16", steps, 0.1, 20, threads, optimizer)}
    for python, name, extra in ((sys.executable, "PyTorch", []), (ipex_python, "IPEX", ["--ipex"])):
        if not os.path.exists(python):
            continue
        for optimizer in (("adamw", "lamb") if name == "PyTorch" else ("adamw",)):
            result = subprocess.run([python, TRAINING_BENCH, "--torch-only", "--preset", "base", "--seq", str(seq),
                                     "--batch", str(batch), "--steps", str(steps), "--threads", str(threads),
                                     "--rows", "autocast", "--optimizer", optimizer] + extra,
                                    capture_output=True, text=True)
            if result.returncode != 0:
                out[f"{name} {optimizer}"] = {"error": (result.stderr.strip().splitlines() or ["failed"])[-1]}
                continue
            data = json.loads(result.stdout.strip().splitlines()[-1])
            fused = " (fused)" if optimizer == "adamw" else " (in-place tensor ops)"
            out[f"{data['version']} bf16 autocast, {optimizer}{fused}"] = {
                "seq_per_s": data["rows"]["autocast"]}
    gemms, attention_flops = model_flops.model_work("base", seq, batch, 20, training=True)
    rates = polyhal_bench.gemm_rates(build, [(m, n, k) for m, n, k, _ in gemms], threads)
    ceiling = polyhal_bench.ceiling_seconds(gemms, rates) + attention_flops / (max(rates.values()) * 1e9)
    for r in out.values():
        r.update({"p50_ms": float("nan"), "p99_ms": float("nan")})
        if "seq_per_s" in r:
            r["note"] = f"{100 * ceiling * r['seq_per_s'] / batch:.0f}% of the step's bf16 GEMM ceiling"
    return out


def inference_ceiling(build, preset, seq, batch, threads):
    """Seconds per batch of the encoder's four linears at oneDNN's bf16 matmul
    rate on each shape alone (polyhal matmul-bench): the bf16 GEMM ceiling."""
    layers, hidden = {"base": (12, 768), "large": (24, 1024)}[preset]
    t = batch * seq
    gemms = [(t, 3 * hidden, hidden, layers), (t, hidden, hidden, layers), (t, 4 * hidden, hidden, layers),
             (t, hidden, 4 * hidden, layers)]
    rates = polyhal_bench.gemm_rates(build, [(m, n, k) for m, n, k, _ in gemms], threads)
    return polyhal_bench.ceiling_seconds(gemms, rates)


def gemm_ceilings(build, tokens, hidden, threads):
    """oneDNN's int8 and bf16 GEMM ceilings on the encoder's shapes, raw and
    with polyhal's epilogues (bench/gemm_epilogue_bench.cpp), as its table."""
    binary = os.path.join(build, "bench", "polyhal_gemm_epilogue_bench")
    if not os.path.exists(binary):
        return f"({binary} not built)"
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env.pop("LD_PRELOAD", None)
    return subprocess.run([binary, str(tokens), str(hidden)], capture_output=True, text=True, env=env,
                          check=True).stdout


def isa_line():
    flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0]
    wanted = ["avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_fp16", "avx512_fp16"]
    return ", ".join(f"{w} {'yes' if f' {w}' in flags else 'no'}" for w in wanted)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    parser.add_argument("--rows", default="base-b1,base-b8,large-b8,base-train-b8")
    parser.add_argument("--train-steps", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--ipex-python", default=os.path.join(polyhal_bench.ROOT, "build", "ipex-venv", "bin", "python"))
    parser.add_argument("--compile", action="store_true", help="also torch.compile (minutes per shape)")
    a = parser.parse_args()
    import onnxruntime
    import openvino
    import torch
    has_bf16 = "avx512_bf16" in open("/proc/cpuinfo").read() or "amx_bf16" in open("/proc/cpuinfo").read()
    results, ceilings = [], []
    with tempfile.TemporaryDirectory() as work:
        for row in a.rows.split(","):
            preset, seq, batch = ROWS[row]
            if row.startswith("base-train"):
                results.append((row, preset, seq, batch, training_rows(a.build, a.ipex_python, seq, batch,
                                                                       a.train_steps, a.threads)))
                print(f"{row} done", file=sys.stderr)
                continue
            hf_dir = os.path.join(work, preset)
            onnx_path = os.path.join(hf_dir, "bert.onnx")
            if not os.path.exists(hf_dir):
                make_model(a.build, preset, seq, hf_dir)
                export_onnx(hf_dir, seq, onnx_path)
            config = json.load(open(os.path.join(hf_dir, "config.json")))
            iterations = a.iterations if preset == "base" else max(5, a.iterations // 4)
            engines = {}
            engines.update(polyhal_rows(a.build, hf_dir, seq, batch, iterations, a.threads))
            ceiling = inference_ceiling(a.build, preset, seq, batch, a.threads)
            bf16 = engines["polyhal bf16"]
            bf16["kernels"] = (f"{100 * ceiling * bf16['seq_per_s'] / batch:.0f}% of the encoder linears' bf16 GEMM "
                               f"ceiling; " + bf16["kernels"])
            engines.update(openvino_rows(onnx_path, seq, batch, iterations, a.threads, hf_dir, has_bf16))
            engines.update(onnxruntime_rows(onnx_path, config["hidden_size"], config["num_attention_heads"], seq,
                                            batch, iterations, a.threads, hf_dir))
            engines.update(torch_rows(hf_dir, seq, batch, iterations, a.threads, a.compile))
            if os.path.exists(a.ipex_python):
                engines.update(ipex_rows(a.ipex_python, hf_dir, seq, batch, iterations, a.threads))
            ceilings.append((row, gemm_ceilings(a.build, seq * batch, config["hidden_size"], a.threads)))
            results.append((row, preset, seq, batch, engines))
            print(f"{row} done", file=sys.stderr)
    print(f"BERT inference and pre-training step, {a.threads} threads, {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}")
    print(f"CPU: {isa_line()}")
    print(f"OpenVINO {openvino.__version__}, ONNX Runtime {onnxruntime.__version__}, PyTorch {torch.__version__}\n")
    print("| row | engine | seq/s | p50 ms | p99 ms | vs polyhal default | note |")
    print("|---|---|---|---|---|---|---|")
    for row, preset, seq, batch, engines in results:
        label = f"{preset} s{seq} b{batch}" + (" training step" if "train" in row else "")
        for name, r in sorted(engines.items(), key=lambda kv: -kv[1].get("seq_per_s", 0)):
            # Training rows compare with polyhal on the same optimizer.
            default = [n for n in engines if n.startswith("polyhal default")]
            baseline = default[0] if default else \
                f"polyhal bf16, {'adamw' if 'adamw' in name else 'lamb'}"
            ours = engines[baseline]["seq_per_s"]
            if "error" in r:
                print(f"| {label} | {name} | - | - | - | - | {r['error']} |")
                continue
            print(f"| {label} | {name} | {r['seq_per_s']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} "
                  f"| {r['seq_per_s'] / ours:.2f}x | {r.get('note', r.get('kernels', ''))} |")
    for row, table in ceilings:
        print(f"\nGEMM ceilings of {row} (one encoder layer's four GEMMs, measured in this run):\n")
        print(table)


if __name__ == "__main__":
    main()
