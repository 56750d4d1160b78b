#!/usr/bin/python3
"""GroupBERT in PyTorch, written from the paper (arXiv 2106.05822) and
Graphcore's TensorFlow implementation as docs/groupbert.md fixes them,
independently of polyhal: the reference the GroupBERT golden files come from.

    /usr/bin/python3 tests/golden/groupbert_reference.py --self-check

checks the two grouped operations against loops written out element by
element (the grouped down-projection as TensorFlow's grouped conv1d computes
it, the sequence convolution with "SAME" padding, padding tokens and packed
sequences), and that a packed row gives each sequence its unpacked outputs.
"""
import argparse
import math

import torch

F = torch.nn.functional


class GroupedLinear(torch.nn.Module):
    """Block-diagonal dense in_features -> out_features in `groups` groups:
    group j maps inputs [j*in/G, (j+1)*in/G) to outputs [j*out/G, (j+1)*out/G).
    weight [out, in/G], as PyTorch's Conv1d(in, out, 1, groups=G) squeezed."""

    def __init__(self, in_features, out_features, groups):
        super().__init__()
        assert in_features % groups == 0 and out_features % groups == 0
        self.groups = groups
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features // groups))
        self.bias = torch.nn.Parameter(torch.empty(out_features))

    def forward(self, x):
        g = self.groups
        xs = x.reshape(*x.shape[:-1], g, -1)                      # [..., G, in/G]
        w = self.weight.view(g, -1, self.weight.shape[1])         # [G, out/G, in/G]
        y = torch.einsum("...gi,goi->...go", xs, w)
        return y.reshape(*x.shape[:-1], -1) + self.bias


def sequence_conv(x, weight, kernel, keep, sequence=None):
    """The grouped convolution over positions. x [B, S, N]; weight [N, C, K]
    (Conv1d(N, N, K, groups=N/C)); keep [B, S] 1 for real tokens. Inputs at
    padding positions are zero; with `sequence` [B, S] (packed rows), a
    position only sees positions of its own sequence."""
    b, s, n = x.shape
    x = x * keep[..., None]
    left = (kernel - 1) // 2
    if sequence is None:
        y = F.conv1d(F.pad(x.transpose(1, 2), (left, kernel - 1 - left)), weight,
                     groups=n // weight.shape[1])
        return y.transpose(1, 2)
    # Packed: shift by each tap and keep only taps inside the same sequence.
    c = weight.shape[1]
    groups = n // c
    xg = x.view(b, s, groups, c)
    wg = weight.view(groups, c, c, kernel)                         # [G, out, in, K]
    out = torch.zeros(b, s, groups, c, dtype=x.dtype)
    for k in range(kernel):
        shift = k - left
        src = torch.arange(s) + shift
        valid = (src >= 0) & (src < s)
        src = src.clamp(0, s - 1)
        same = valid[None, :] & (sequence[:, src] == sequence)
        tap = xg[:, src] * same[..., None, None].to(x.dtype)
        out = out + torch.einsum("bsgi,goi->bsgo", tap, wg[..., k])
    return out.reshape(b, s, n)


class GroupBert(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        n, i, eps = c["hidden_size"], c["intermediate_size"], c.get("layer_norm_eps", 1e-3)
        g, cs, k = c["groupbert_ffn_output_groups"], c["groupbert_conv_group_size"], \
            c["groupbert_conv_kernel_size"]
        self.c = c
        self.word = torch.nn.Embedding(c["vocab_size"], n)
        self.position = torch.nn.Embedding(c["max_position_embeddings"], n)
        self.token_type = torch.nn.Embedding(c["type_vocab_size"], n)
        self.embedding_norm = torch.nn.LayerNorm(n, eps=eps)

        def ffn():
            m = torch.nn.Module()
            m.prenorm = torch.nn.LayerNorm(n, eps=eps)
            m.intermediate = torch.nn.Linear(n, i)
            m.output = GroupedLinear(i, n, g)
            m.mixer = torch.nn.Linear(n, n) if g > 1 else None
            return m

        self.layers = torch.nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = torch.nn.Module()
            conv = layer.convolution = torch.nn.Module()
            conv.prenorm = torch.nn.LayerNorm(n, eps=eps)
            conv.glu_values, conv.glu_gates = torch.nn.Linear(n, n), torch.nn.Linear(n, n)
            conv.conv = torch.nn.Parameter(torch.empty(n, cs, k))
            conv.conv_norm = torch.nn.LayerNorm(n, eps=eps)
            conv.post = torch.nn.Linear(n, n)
            layer.feed_forward_1, layer.feed_forward_2 = ffn(), ffn()
            att = layer.attention = torch.nn.Module()
            att.prenorm = torch.nn.LayerNorm(n, eps=eps)
            att.query, att.key, att.value = (torch.nn.Linear(n, n) for _ in range(3))
            att.output = torch.nn.Linear(n, n)
            self.layers.append(layer)
        self.final_norm = torch.nn.LayerNorm(n, eps=eps)
        self.pooler = torch.nn.Linear(n, n)
        self.transform = torch.nn.Linear(n, n)
        self.transform_norm = torch.nn.LayerNorm(n, eps=eps)
        self.mlm_bias = torch.nn.Parameter(torch.zeros(c["vocab_size"]))
        self.nsp = torch.nn.Linear(n, 2)

    def initialise(self, seed):
        """docs/groupbert.md, Initialisation (Graphcore's initialisers)."""
        gen = torch.Generator().manual_seed(seed)
        sd = self.c.get("initializer_range", 0.02)

        def normal(t):
            # Truncated at 2 sd by redrawing, as TensorFlow's initialiser.
            v = torch.randn(t.shape, generator=gen)
            while (v.abs() > 2).any():
                far = v.abs() > 2
                v[far] = torch.randn(int(far.sum()), generator=gen)
            with torch.no_grad():
                t.copy_(v * sd)

        for name, p in self.named_parameters():
            if name.endswith("conv"):
                n, cs, k = p.shape
                limit = math.sqrt(6.0 / (k * cs + k * n))
                with torch.no_grad():
                    p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * limit)
            elif "norm" in name:
                with torch.no_grad():
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("weight") or ("feed_forward" in name and name.endswith("output.bias")):
                normal(p)
            else:
                with torch.no_grad():
                    p.zero_()
        return self

    def forward(self, ids, types, mask, drop=None, positions=None, sequence=None):
        """As make_bert_golden.Bert.forward. `drop(kind, tensor)` applies dropout
        ("hidden" on the embedding output and each module's output, "attention"
        on the probabilities, in forward order). `sequence` [B, S], when given,
        numbers the sequences of packed rows (0 for padding): attention and the
        convolution stay inside a sequence."""
        drop = drop or (lambda kind, t: t)
        b, s = ids.shape
        heads = self.c["num_attention_heads"]
        d = self.c["hidden_size"] // heads
        k = self.c["groupbert_conv_kernel_size"]
        x = self.word(ids) + self.position(torch.arange(s)[None, :]) + self.token_type(types)
        x = drop("hidden", self.embedding_norm(x))
        keep = mask.to(x.dtype)
        if sequence is None:
            allowed = mask[:, None, None, :].bool()
        else:
            allowed = ((sequence[:, :, None] == sequence[:, None, :]) &
                       (sequence[:, None, :] > 0))[:, None]
        additive = (~allowed).to(x.dtype) * torch.finfo(x.dtype).min

        def ffn(m, h):
            y = m.output(F.gelu(m.intermediate(h)))
            return m.mixer(y) if m.mixer is not None else y

        for layer in self.layers:
            cv = layer.convolution
            h = cv.prenorm(x)
            h = cv.glu_values(h) * torch.sigmoid(cv.glu_gates(h))
            # Padding positions give 0 (polyhal's rule; Graphcore's conv gives
            # them their neighbours' sum, which nothing downstream reads).
            h = sequence_conv(h, cv.conv, k, keep, mask.long() if sequence is None else sequence)
            h = cv.post(F.silu(cv.conv_norm(h)))
            x = x + drop("hidden", h)
            x = x + drop("hidden", ffn(layer.feed_forward_1, layer.feed_forward_1.prenorm(x)))
            at = layer.attention
            h = at.prenorm(x)

            def split(t):
                return t.view(b, s, heads, d).permute(0, 2, 1, 3)
            q, kk, v = split(at.query(h)), split(at.key(h)), split(at.value(h))
            scores = torch.matmul(q, kk.transpose(-1, -2)) / (d ** 0.5) + additive
            probs = drop("attention", torch.softmax(scores, dim=-1))
            context = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, s, heads * d)
            x = x + drop("hidden", at.output(context))
            x = x + drop("hidden", ffn(layer.feed_forward_2, layer.feed_forward_2.prenorm(x)))
        x = self.final_norm(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        rows = x if positions is None else x.reshape(b * s, -1)[positions]
        t = self.transform_norm(F.gelu(self.transform(rows)))
        mlm = torch.matmul(t, self.word.weight.t()) + self.mlm_bias
        return x, pooled, mlm, self.nsp(pooled)

    def hf_parameters(self):
        """Name -> parameter, with the names of docs/groupbert.md, Checkpoint names."""
        out = {}

        def linear(name, m):
            out[name + ".weight"] = m.weight
            out[name + ".bias"] = m.bias

        out["bert.embeddings.word_embeddings.weight"] = self.word.weight
        out["bert.embeddings.position_embeddings.weight"] = self.position.weight
        out["bert.embeddings.token_type_embeddings.weight"] = self.token_type.weight
        linear("bert.embeddings.LayerNorm", self.embedding_norm)
        for index, layer in enumerate(self.layers):
            p = f"bert.encoder.layer.{index}."
            cv = layer.convolution
            for name in ("prenorm", "glu_values", "glu_gates", "conv_norm", "post"):
                linear(p + "convolution." + name, getattr(cv, name))
            out[p + "convolution.conv.weight"] = cv.conv
            for f in ("feed_forward_1", "feed_forward_2"):
                m = getattr(layer, f)
                for name in ("prenorm", "intermediate", "output", "mixer"):
                    if getattr(m, name) is not None:
                        linear(p + f + "." + name, getattr(m, name))
            at = layer.attention
            linear(p + "attention.prenorm", at.prenorm)
            for name in ("query", "key", "value"):
                linear(p + "attention.self." + name, getattr(at, name))
            linear(p + "attention.output", at.output)
        linear("bert.encoder.final_norm", self.final_norm)
        linear("bert.pooler.dense", self.pooler)
        linear("cls.predictions.transform.dense", self.transform)
        linear("cls.predictions.transform.LayerNorm", self.transform_norm)
        out["cls.predictions.bias"] = self.mlm_bias
        linear("cls.seq_relationship", self.nsp)
        return out

    def hf_state_dict(self):
        return {name: p.detach().clone() for name, p in self.hf_parameters().items()}


TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=48, max_position_embeddings=40, type_vocab_size=2,
            layer_norm_eps=1e-3, groupbert_ffn_output_groups=4, groupbert_conv_group_size=8,
            groupbert_conv_kernel_size=5)


def self_check():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    # Grouped down-projection against TensorFlow's grouped conv1d, element by element:
    # filter [in/G, out] (TF layout), output o in group o // (out/G).
    lin = GroupedLinear(12, 8, 4)
    torch.nn.init.normal_(lin.weight)
    torch.nn.init.normal_(lin.bias)
    x = torch.randn(3, 12)
    tf_filter = lin.weight.t()                                   # [in/G, out]
    want = torch.zeros(3, 8)
    for o in range(8):
        g = o // 2
        for i in range(3):
            want[:, o] += x[:, g * 3 + i] * tf_filter[i, o]
    assert torch.allclose(lin(x), want + lin.bias), "grouped projection"
    # Sequence convolution against the loop, "SAME" padding, padding tokens zeroed.
    b, s, n, c, k = 2, 9, 8, 4, 4
    x = torch.randn(b, s, n)
    w = torch.randn(n, c, k)
    keep = torch.ones(b, s)
    keep[1, 6:] = 0
    got = sequence_conv(x, w, k, keep)
    left = (k - 1) // 2
    want = torch.zeros(b, s, n)
    for bb in range(b):
        for t in range(s):
            for o in range(n):
                g = o // c
                for tap in range(k):
                    src = t + tap - left
                    if 0 <= src < s:
                        for i in range(c):
                            want[bb, t, o] += w[o, i, tap] * x[bb, src, g * c + i] * keep[bb, src]
    assert torch.allclose(got, want), "sequence convolution"
    # The packed path with one sequence per row is the unpacked one at the real
    # tokens (padding positions see nothing in it; their outputs are unused).
    real = keep.bool()
    assert torch.allclose(sequence_conv(x, w, k, keep, keep.long())[real], want[real]), \
        "packed, one sequence"
    # A packed row: each sequence gets its unpacked outputs from the whole model.
    model = GroupBert(TINY).initialise(3).eval()
    a_ids, b_ids = torch.randint(5, 99, (1, 7)), torch.randint(5, 99, (1, 5))
    alone = [model(i, torch.zeros_like(i), torch.ones_like(i))[0] for i in (a_ids, b_ids)]
    ids = torch.cat([a_ids, b_ids, torch.zeros(1, 3, dtype=torch.long)], 1)
    sequence = torch.tensor([[1] * 7 + [2] * 5 + [0] * 3])
    # Positions restart in each sequence of a packed row, as polyhal's packed data.
    packed = model.__class__.forward
    position = model.position
    model.position = torch.nn.Module()
    positions = torch.tensor([list(range(7)) + list(range(5)) + [0] * 3])
    model.position.forward = lambda _: position(positions)
    out = packed(model, ids, torch.zeros_like(ids), (sequence > 0).long(), sequence=sequence)[0]
    model.position = position
    assert torch.allclose(out[0, :7], alone[0][0]) and torch.allclose(out[0, 7:12], alone[1][0]), \
        "packed row"
    print("groupbert_reference self-check: ok")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--self-check", action="store_true")
    if parser.parse_args().self_check:
        self_check()
