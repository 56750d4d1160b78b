"""BERT inference in PyTorch for side-by-side benchmarks: BertForPreTraining's
encoder + pooler (Hugging Face semantics) from tests/golden/make_bert_golden.py,
run the way a PyTorch user would: model.to(bfloat16), torch.inference_mode."""
import os
import sys
import time

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3"


def use_openblas():
    """Re-executes the calling script with OpenBLAS (Debian's
    libopenblas0-openmp) preloaded, before torch is imported. Debian's
    python3-torch takes fp32 BLAS from the system libblas.so.3, which is the
    netlib reference BLAS unless OpenBLAS is selected: without this PyTorch's
    f32 GEMMs run many times slower than PyTorch at its best. Exits with the
    package to install when OpenBLAS is missing (a handicapped baseline is
    worse than none)."""
    if os.environ.get("POLYHAL_BENCH_OPENBLAS") == "1":
        return
    if sys.prefix != sys.base_prefix:
        return  # a virtual environment's PyTorch wheel brings its own BLAS (MKL) and oneDNN
    if not os.path.exists(OPENBLAS):
        sys.exit(f"{OPENBLAS} not found: apt-get install libopenblas0-openmp (PyTorch's baseline BLAS)")
    preload = " ".join(p for p in (OPENBLAS, os.environ.get("LD_PRELOAD", "")) if p)
    env = dict(os.environ, LD_PRELOAD=preload, POLYHAL_BENCH_OPENBLAS="1")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def blas_library():
    """The BLAS shared library mapped into this process (what PyTorch's fp32 GEMMs call)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line.split()[-1]}
    return ", ".join(sorted(paths)) or "none"


use_openblas()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import polyhal_bench  # noqa: E402

torch = polyhal_bench.require("torch", "apt-get install python3-torch, and run the script with /usr/bin/python3")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden"))
from make_bert_golden import Bert  # noqa: E402

PRESETS = {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "medium": (8, 512, 8),
           "base": (12, 768, 12), "large": (24, 1024, 16)}


def bert_config(preset):
    layers, hidden, heads = PRESETS[preset]
    return dict(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                intermediate_size=4 * hidden, max_position_embeddings=512, type_vocab_size=2,
                layer_norm_eps=1e-12)


class Encoder(torch.nn.Module):
    """The encoder and pooler only (what polyhal's inference runs without heads)."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, ids, types, mask):
        x = self.encode(ids, types, mask)
        return x, torch.tanh(self.bert.pooler(x[:, 0]))

    def encode(self, ids, types, mask):
        b = self.bert
        s = ids.shape[1]
        heads = b.c["num_attention_heads"]
        d = b.c["hidden_size"] // heads
        x = b.embedding_norm(b.word(ids) + b.position(torch.arange(s)[None, :]) + b.token_type(types))
        additive = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for l in b.layers:
            def split(t):
                return t.view(ids.shape[0], s, heads, d).permute(0, 2, 1, 3)
            q, k, v = split(l.query(x)), split(l.key(x)), split(l.value(x))
            probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / (d ** 0.5) + additive, dim=-1)
            context = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(ids.shape[0], s, heads * d)
            x1 = l.attention_norm(l.attention_output(context) + x)
            x = l.output_norm(l.output(torch.nn.functional.gelu(l.intermediate(x1))) + x1)
        return x


class QuestionAnswering(Encoder):
    """BertForQuestionAnswering: the encoder and qa_outputs Linear(H, 2) over
    every token, start and end logits (no pooler), what polyhal runs with
    model.head: question_answering."""

    def __init__(self, bert):
        super().__init__(bert)
        self.qa_outputs = torch.nn.Linear(bert.c["hidden_size"], 2)

    def forward(self, ids, types, mask):
        start, end = self.qa_outputs(self.encode(ids, types, mask)).split(1, dim=-1)
        return start.squeeze(-1), end.squeeze(-1)


def run(preset, seq, batch, dtype, threads, iterations, warmup, head="pooler"):
    """Sequences per second and the median batch latency in seconds."""
    per_second, p50, _ = run_latencies(preset, seq, batch, dtype, threads, iterations, warmup, head)
    return per_second, p50


def run_latencies(preset, seq, batch, dtype, threads, iterations, warmup, head="pooler"):
    """Sequences per second and the p50 and p99 batch latencies in seconds.
    `head`: "pooler" (encoder + pooler) or "question_answering"."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    module = QuestionAnswering if head == "question_answering" else Encoder
    model = module(Bert(bert_config(preset))).eval().to(dtype)
    ids = torch.randint(0, 30522, (batch, seq))
    types = torch.zeros(batch, seq, dtype=torch.long)
    mask = torch.ones(batch, seq, dtype=torch.long)
    times = []
    with torch.inference_mode():
        for i in range(warmup + iterations):
            start = time.perf_counter()
            model(ids, types, mask)
            if i >= warmup:
                times.append(time.perf_counter() - start)
    times.sort()
    p99 = times[min(len(times) - 1, max(0, -(-99 * len(times) // 100) - 1))]
    return batch * len(times) / sum(times), times[len(times) // 2], p99
