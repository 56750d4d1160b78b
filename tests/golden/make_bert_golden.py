#!/usr/bin/python3
"""Writes golden files for polyhal's BERT tests with PyTorch (Debian's
python3-torch 1.13), independently of polyhal.

BertForPreTraining (eval mode) is written out here with torch.nn modules,
following Hugging Face transformers' BertModel semantics: embeddings sum +
LayerNorm, post-LN encoder layers with exact erf GELU, additive attention mask
(1 - mask) * finfo.min, tanh pooler on [CLS], MLM head tied to the word
embeddings with its own bias, NSP head. The safetensors files are written by
a small writer here, not by polyhal.

Run from the repository root:  /usr/bin/python3 tests/golden/make_bert_golden.py
"""
import json
import os
import struct

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bert_tiny")
CONFIG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
              layer_norm_eps=1e-12, hidden_act="gelu", model_type="bert",
              architectures=["BertForPreTraining"])
BATCH, SEQ = 2, 11


def write_safetensors(path, tensors, dtype):
    names = sorted(tensors)
    header, blobs, offset = {}, [], 0
    code = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}[dtype]
    for name in names:
        t = tensors[name].detach().to(dtype).contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if dtype != torch.float32 else t.numpy().tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


class Bert(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.c = c
        self.word = torch.nn.Embedding(c["vocab_size"], h)
        self.position = torch.nn.Embedding(c["max_position_embeddings"], h)
        self.token_type = torch.nn.Embedding(c["type_vocab_size"], h)
        self.embedding_norm = torch.nn.LayerNorm(h, eps=c["layer_norm_eps"])
        self.layers = torch.nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = torch.nn.Module()
            layer.query, layer.key, layer.value = (torch.nn.Linear(h, h) for _ in range(3))
            layer.attention_output = torch.nn.Linear(h, h)
            layer.attention_norm = torch.nn.LayerNorm(h, eps=c["layer_norm_eps"])
            layer.intermediate = torch.nn.Linear(h, i)
            layer.output = torch.nn.Linear(i, h)
            layer.output_norm = torch.nn.LayerNorm(h, eps=c["layer_norm_eps"])
            self.layers.append(layer)
        self.pooler = torch.nn.Linear(h, h)
        self.transform = torch.nn.Linear(h, h)
        self.transform_norm = torch.nn.LayerNorm(h, eps=c["layer_norm_eps"])
        self.mlm_bias = torch.nn.Parameter(torch.zeros(c["vocab_size"]))
        self.nsp = torch.nn.Linear(h, 2)

    def forward(self, ids, types, mask, drop=None, positions=None):
        """`drop(kind, tensor)`, when given, applies dropout: kind "hidden" after
        the embeddings' LayerNorm and on the attention and FFN outputs, kind
        "attention" on the attention probabilities, called in that forward
        order (which numbers polyhal's dropout streams). `positions`, when
        given, are the rows of the flattened (batch * seq) encoder output the
        MLM head runs on (the labelled positions, as polyhal's gathered head);
        otherwise it runs on every position."""
        drop = drop or (lambda kind, t: t)
        b, s = ids.shape
        heads = self.c["num_attention_heads"]
        d = self.c["hidden_size"] // heads
        x = self.word(ids) + self.position(torch.arange(s)[None, :]) + self.token_type(types)
        x = drop("hidden", self.embedding_norm(x))
        additive = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for l in self.layers:
            def split(t):
                return t.view(b, s, heads, d).permute(0, 2, 1, 3)
            q, k, v = split(l.query(x)), split(l.key(x)), split(l.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / (d ** 0.5) + additive
            probs = drop("attention", torch.softmax(scores, dim=-1))
            context = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, s, heads * d)
            x1 = l.attention_norm(drop("hidden", l.attention_output(context)) + x)
            f = torch.nn.functional.gelu(l.intermediate(x1))
            x = l.output_norm(drop("hidden", l.output(f)) + x1)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        rows = x if positions is None else x.reshape(b * s, -1)[positions]
        t = self.transform_norm(torch.nn.functional.gelu(self.transform(rows)))
        mlm = torch.matmul(t, self.word.weight.t()) + self.mlm_bias
        return x, pooled, mlm, self.nsp(pooled)

    def hf_state_dict(self, prefix="bert.", old_names=False):
        ln_w, ln_b = ("gamma", "beta") if old_names else ("weight", "bias")
        sd = {}
        def put(name, t):
            sd[name] = t.detach().clone()
        def norm(name, m):
            put(name + ".LayerNorm." + ln_w, m.weight)
            put(name + ".LayerNorm." + ln_b, m.bias)
        def linear(name, m):
            put(name + ".weight", m.weight)
            put(name + ".bias", m.bias)
        put(prefix + "embeddings.word_embeddings.weight", self.word.weight)
        put(prefix + "embeddings.position_embeddings.weight", self.position.weight)
        put(prefix + "embeddings.token_type_embeddings.weight", self.token_type.weight)
        norm(prefix + "embeddings", self.embedding_norm)
        for n, l in enumerate(self.layers):
            p = f"{prefix}encoder.layer.{n}."
            linear(p + "attention.self.query", l.query)
            linear(p + "attention.self.key", l.key)
            linear(p + "attention.self.value", l.value)
            linear(p + "attention.output.dense", l.attention_output)
            norm(p + "attention.output", l.attention_norm)
            linear(p + "intermediate.dense", l.intermediate)
            linear(p + "output.dense", l.output)
            norm(p + "output", l.output_norm)
        linear(prefix + "pooler.dense", self.pooler)
        linear("cls.predictions.transform.dense", self.transform)
        norm("cls.predictions.transform", self.transform_norm)
        put("cls.predictions.bias", self.mlm_bias)
        linear("cls.seq_relationship", self.nsp)
        return sd


def main():
    torch.manual_seed(1234)
    os.makedirs(OUT, exist_ok=True)
    model = Bert(CONFIG).eval()
    with torch.no_grad():
        for p in model.parameters():  # non-trivial LayerNorm and bias values
            p.copy_(torch.randn_like(p) * 0.2)
    ids = torch.randint(1, CONFIG["vocab_size"], (BATCH, SEQ))
    types = torch.zeros(BATCH, SEQ, dtype=torch.long)
    types[:, 6:] = 1
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, 8:] = 0  # the second sequence is padded
    ids[1, 8:] = 0
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    write_safetensors(os.path.join(OUT, "model.safetensors"), model.hf_state_dict(), torch.float32)
    write_safetensors(os.path.join(OUT, "model_bf16_noprefix_oldnames.safetensors"),
                      model.hf_state_dict(prefix="", old_names=True), torch.bfloat16)
    golden = {"input_ids": ids.float(), "token_type_ids": types.float(), "attention_mask": mask.float()}
    with torch.no_grad():
        for tag, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            m = Bert(CONFIG).eval()
            m.load_state_dict(model.state_dict())
            m = m.to(dtype)
            hidden, pooled, mlm, nsp = m(ids, types, mask)
            golden.update({f"{tag}.last_hidden_state": hidden.float(), f"{tag}.pooled": pooled.float(),
                           f"{tag}.mlm_logits": mlm.float(), f"{tag}.nsp_logits": nsp.float()})
    write_safetensors(os.path.join(OUT, "golden.safetensors"), golden, torch.float32)
    print("wrote", OUT, "torch", torch.__version__)


if __name__ == "__main__":
    main()
