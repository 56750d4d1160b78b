"""Writes TensorFlow checkpoints of a tiny GroupBERT as Graphcore's TensorFlow 1
code names and lays them out, and what that model computes, for polyhal's
tests (tensorflow-cpu 2.21.0 from the Python Package Index).

The model is a transcript of Graphcore's `GroupBertModel` (graphcore/examples,
nlp/bert/tensorflow1/modeling.py at commit f28310e, SDK 3.1) with the IPU-only
calls replaced by their plain TensorFlow meaning:

- `ipu.normalization_ops.group_norm(groups=1, epsilon=0.001, scope="LayerNorm")`
  -> a layer norm over the last axis with variables LayerNorm/gamma and
  LayerNorm/beta, epsilon 0.001;
- `ipu.outlined_function` -> a plain call (it only shares code on the IPU);
- `ipu.nn_ops.gelu` -> the erf GELU (polyhal's `hidden_act: gelu`; Poplar's is
  the tanh approximation, docs/groupbert.md says why polyhal keeps erf);
- dropout off (inference).

The variables are created by the same variable scopes and `get_variable`
calls as Graphcore's code (and `tf.layers.dense`'s dense/kernel, dense/bias),
so their names and layouts are TensorFlow's, not polyhal's: the dwconv weight [K, C, N], the grouped
projection's kernel [I/G, N] used through a grouped `conv1d`, the fused
`kernel/qkv_weight` [N, 3N] or split query/key/value kernels, the final
LayerNorm at the root scope.

Two checkpoints, for the two ways Graphcore's configs set the attention:

- lamb/: pretrain_base_groupbert_128.json's settings (use_qkv_split,
  use_qkv_bias, use_attention_projection_bias, use_cls_layer,
  use_prediction_bias all true), with LAMB slots and global_step;
- adam/: the *_adam.json settings (fused qkv_weight, no q/k/v bias, and, as
  pretrain_mini_groupbert_128_adam.json, no projection bias).

Each folder holds model.ckpt-3.{index,data-00000-of-00001}, bert_config.json
(Graphcore's config format: "groupbert": true and the groupbert_* keys) and
reference.safetensors: the inputs and the outputs TensorFlow computed
(last_hidden_state after the final LayerNorm, mlm_logits at every position,
nsp_logits).

Run (about a minute):
    python3 -m venv build/tf-venv
    build/tf-venv/bin/pip install tensorflow-cpu==2.21.0
    build/tf-venv/bin/python tests/data/tf_checkpoint/make_groupbert_tf_checkpoint.py
"""
import json
import os
import struct

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
HERE = os.path.dirname(os.path.abspath(__file__))
BASE = {"task": "pretraining", "hidden_act": "gelu", "hidden_size": 32,
        "intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
        "max_position_embeddings": 64, "type_vocab_size": 2, "vocab_size": 99,
        "initializer_range": 0.02, "attention_probs_dropout_prob": 0.0,
        "hidden_dropout_prob": 0.0, "groupbert": True, "groupbert_ffn_output_groups": 4,
        "groupbert_conv_group_size": 8, "groupbert_conv_kernel_size": 5}
VARIANTS = {
    "lamb": dict(BASE, use_qkv_split=True, use_qkv_bias=True,
                 use_attention_projection_bias=True, use_cls_layer=True,
                 use_prediction_bias=True, optimizer="lamb"),
    "adam": dict(BASE, use_qkv_split=False, use_qkv_bias=False,
                 use_attention_projection_bias=False, use_cls_layer=True,
                 use_prediction_bias=True, optimizer="mpadamw"),
}
BATCH, SEQ = 2, 12


def layer_norm(x, name="LayerNorm"):
    with tf1.variable_scope(name):
        n = int(x.shape[-1])
        gamma = tf1.get_variable("gamma", [n], initializer=tf1.ones_initializer())
        beta = tf1.get_variable("beta", [n], initializer=tf1.zeros_initializer())
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(variance + 0.001) * gamma + beta


def gelu(x):
    return tf.nn.gelu(x, approximate=False)


def dense(x, units, activation=None, use_bias=True):
    """tf.layers.dense (gone with Keras 3): variables dense/kernel [in, out]
    and dense/bias [out], as it names them."""
    with tf1.variable_scope("dense"):
        y = tf.einsum("...i,io->...o", x, tf1.get_variable("kernel", [int(x.shape[-1]), units]))
        if use_bias:
            y = tf.nn.bias_add(y, tf1.get_variable("bias", [units]))
    return activation(y) if activation else y


class GroupBert:
    """Graphcore's GroupBertModel, forward only, on [B, S] inputs."""

    def __init__(self, c):
        self.c = c

    def embeddings(self, ids, types):
        c = self.c
        with tf1.variable_scope("bert/embeddings"):
            table = tf1.get_variable("word_embeddings", [c["vocab_size"], c["hidden_size"]])
            positions = tf1.get_variable("position_embeddings",
                                         [c["max_position_embeddings"], c["hidden_size"]])
            segments = tf1.get_variable("token_type_embeddings",
                                        [c["type_vocab_size"], c["hidden_size"]])
            x = tf.gather(table, ids) + positions[None, :SEQ] + tf.matmul(
                tf.one_hot(types, c["type_vocab_size"]), segments)
            return layer_norm(x), table

    def prenorm_residual(self, x, branch):
        with tf1.variable_scope("prenorm"):
            features = layer_norm(x)
        return branch(features) + x

    def conv(self, x, mask):
        c = self.c
        n = int(x.shape[-1])
        with tf1.variable_scope("pre"):
            with tf1.variable_scope("glu/values"):
                values = dense(x, n)
            with tf1.variable_scope("glu/gates"):
                gates = dense(x, n)
            state = values * tf.sigmoid(gates)
        with tf1.variable_scope("dwconv"):
            weight = tf.expand_dims(tf1.get_variable(
                "weight", [c["groupbert_conv_kernel_size"], c["groupbert_conv_group_size"], n]), 1)
            conv_input = tf.expand_dims(state * tf.cast(mask, tf.float32)[..., None], 2)
            state = tf.squeeze(tf.nn.conv2d(conv_input, weight, [1, 1, 1, 1], "SAME"), 2)
            state = tf.nn.swish(layer_norm(state))
        with tf1.variable_scope("post"):
            return dense(state, n)

    def grouped_feed_forward(self, x):
        c = self.c
        with tf1.variable_scope("intermediate"):
            h = dense(x, c["intermediate_size"], activation=gelu)
        with tf1.variable_scope("output"):
            groups = c["groupbert_ffn_output_groups"]
            filters = tf1.get_variable("dense/kernel",
                                       [c["intermediate_size"] // groups, c["hidden_size"]])
            bias = tf1.get_variable("dense/bias", [c["hidden_size"]])
            y = tf.nn.bias_add(tf.nn.conv1d(h, filters[None], 1, "VALID"), bias)
            if groups > 1:
                with tf1.variable_scope("mixer"):
                    y = dense(y, c["hidden_size"])
        return y

    def attention(self, x, mask):
        c = self.c
        n, heads = c["hidden_size"], c["num_attention_heads"]
        d = n // heads
        with tf1.variable_scope("self"):
            if c["use_qkv_split"]:
                kernels = []
                for part in ("query", "key", "value"):
                    with tf1.variable_scope(part):
                        kernels.append(tf1.get_variable("kernel", [n, n]))
                qkv_weight = tf.concat(kernels, axis=-1)
            else:
                with tf1.variable_scope("kernel"):
                    qkv_weight = tf1.get_variable("qkv_weight", [n, 3 * n])
            qkv = tf.einsum("bsn,nm->bsm", x, qkv_weight)
            if c["use_qkv_bias"]:
                qkv = tf.nn.bias_add(qkv, tf.concat(
                    [tf1.get_variable(f"{p}/bias", [n]) for p in ("query", "key", "value")], -1))
            q, k, v = (tf.transpose(tf.reshape(t, [BATCH, SEQ, heads, d]), [0, 2, 1, 3])
                       for t in tf.split(qkv, 3, axis=-1))
            scores = tf.matmul(q, k, transpose_b=True) / np.sqrt(d)
            scores += (1.0 - tf.cast(mask, tf.float32))[:, None, None, :] * -1000.0
            context = tf.matmul(tf.nn.softmax(scores), v)
            context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [BATCH, SEQ, n])
        with tf1.variable_scope("projection"):
            return dense(context, n, use_bias=c["use_attention_projection_bias"])

    def __call__(self, ids, types, mask):
        c = self.c
        x, table = self.embeddings(ids, types)
        for layer in range(c["num_hidden_layers"]):
            with tf1.variable_scope(f"bert/encoder/layer_{layer}"):
                with tf1.variable_scope("convolution"):
                    x = self.prenorm_residual(x, lambda h: self.conv(h, mask))
                with tf1.variable_scope("feed_forward_1"):
                    x = self.prenorm_residual(x, self.grouped_feed_forward)
                with tf1.variable_scope("attention"):
                    x = self.prenorm_residual(x, lambda h: self.attention(h, mask))
                with tf1.variable_scope("feed_forward_2"):
                    x = self.prenorm_residual(x, self.grouped_feed_forward)
        x = layer_norm(x)  # Graphcore creates the final norm outside every scope
        with tf1.variable_scope("bert/pooler"):
            pooled = dense(x[:, 0], c["hidden_size"], activation=tf.tanh)
        with tf1.variable_scope("cls/predictions/transform"):
            t = layer_norm(dense(x, c["hidden_size"], activation=gelu))
        with tf1.variable_scope("cls/predictions"):
            mlm = tf.einsum("bsn,vn->bsv", t, table)
            mlm = tf.nn.bias_add(mlm, tf1.get_variable("output_bias", [c["vocab_size"]]))
        with tf1.variable_scope("cls/seq_relationship"):
            w = tf1.get_variable("output_weights", [2, c["hidden_size"]])
            b = tf1.get_variable("output_bias", [2])
            nsp = tf.nn.bias_add(tf.matmul(pooled, w, transpose_b=True), b)
        return x, mlm, nsp


def write_safetensors(path, tensors):
    """safetensors by hand (8-byte little-endian header length, JSON, data)."""
    header, blobs, offset = {}, [], 0
    for name, array in sorted(tensors.items()):
        array = np.ascontiguousarray(array)
        dtype = {np.float32: "F32", np.int32: "I32"}[array.dtype.type]
        blob = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write(name, config, seed):
    out = os.path.join(HERE, "groupbert", name)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, config["vocab_size"], (BATCH, SEQ)).astype(np.int32)
    types = (np.arange(SEQ)[None, :] >= 5).astype(np.int32).repeat(BATCH, 0)
    mask = np.ones((BATCH, SEQ), np.int32)
    mask[1, 9:] = 0  # the second row is padded
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(seed)
        hidden, mlm, nsp = GroupBert(config)(tf.constant(ids), tf.constant(types),
                                              tf.constant(mask))
        weights = tf1.global_variables()
        # Values far from an initialiser's, so a layout read wrongly shows.
        assigns = []
        for v in weights:
            shape = v.shape.as_list()
            if v.name.endswith("gamma:0"):
                value = 1.0 + 0.2 * rng.standard_normal(shape)
            else:
                value = 0.3 * rng.standard_normal(shape)
            assigns.append(tf1.assign(v, value.astype(np.float32)))
        slots = []
        if config["optimizer"] == "lamb":  # optimizer state polyhal leaves out
            for v in weights:
                slots.append(tf1.get_variable(v.op.name + "/lamb_m", initializer=tf.zeros(v.shape)))
        tf1.train.get_or_create_global_step()
        saver = tf1.train.Saver()
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            session.run(assigns)
            session.run(tf1.assign(tf1.train.get_global_step(), 3))
            got = session.run({"last_hidden_state": hidden, "mlm_logits": mlm,
                               "nsp_logits": nsp})
            saver.save(session, os.path.join(out, "model.ckpt"), global_step=3,
                       write_meta_graph=False)
    os.remove(os.path.join(out, "checkpoint"))
    with open(os.path.join(out, "bert_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(out, "reference.safetensors"),
                      dict(got, input_ids=ids, token_type_ids=types, attention_mask=mask))
    names = sorted(v.op.name for v in weights)
    print(f"{name}: {len(names)} variables, e.g. {names[:3]}")


def write_fuzz_seed():
    """fuzz/corpus/tf_checkpoint/graphcore_groupbert: a few of Graphcore's
    GroupBERT names in the fuzz target's framing (4-byte index length, the
    index, the one data shard), so the fuzzer reaches the layout code."""
    prefix = os.path.join(HERE, "groupbert", "seed", "model.ckpt")
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        layer = "bert/encoder/layer_0"
        for name, shape in ((f"{layer}/convolution/dwconv/weight", [2, 2, 4]),
                            (f"{layer}/attention/self/kernel/qkv_weight", [4, 12]),
                            (f"{layer}/feed_forward_1/output/dense/kernel", [2, 4]),
                            (f"{layer}/attention/projection/dense/kernel", [4, 4]),
                            ("LayerNorm/gamma", [4])):
            tf1.get_variable(name, shape)
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            tf1.train.Saver().save(session, prefix, write_meta_graph=False)
    with open(prefix + ".index", "rb") as f:
        index = f.read()
    with open(prefix + ".data-00000-of-00001", "rb") as f:
        data = f.read()
    seed = os.path.join(HERE, "..", "..", "..", "fuzz", "corpus", "tf_checkpoint",
                        "graphcore_groupbert")
    with open(seed, "wb") as f:
        f.write(struct.pack("<I", len(index)) + index + data)
    for f in os.listdir(os.path.dirname(prefix)):
        os.remove(os.path.join(os.path.dirname(prefix), f))
    os.rmdir(os.path.dirname(prefix))


def main():
    tf1.disable_eager_execution()
    for seed, (name, config) in enumerate(VARIANTS.items(), start=32):
        write(name, config, seed)
    write_fuzz_seed()


if __name__ == "__main__":
    main()
