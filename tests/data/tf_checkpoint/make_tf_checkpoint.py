"""Writes TensorFlow checkpoints of a tiny BERT for polyhal's tests, with
TensorFlow itself (tensorflow-cpu 2.21.0 from the Python Package Index):

- google/model.ckpt-7: a TF1 name-based checkpoint (tf.compat.v1.train.Saver)
  with the variable names and layouts of Google's BERT (modeling.py and
  run_pretraining.py): bert/embeddings/..., bert/encoder/layer_N/...,
  bert/pooler/..., cls/predictions/..., cls/seq_relationship/... (kernels
  stored [in, out], output_weights [2, hidden]); AdamWeightDecayOptimizer's
  adam_m/adam_v slots (m = w / 2 and v = w * w, so a slot laid out other
  than its variable shows) and global_step, as run_pretraining.py saves them.
- sharded/model.ckpt-7: the same variables split over two shards
  (Saver(sharded=True) with the variables on two CPU devices).
- bert_config.json: Google's config format.
- tf2/ckpt-1: the same variables as a TF2 object-based checkpoint
  (tf.train.Checkpoint), whose keys follow the object tree and whose
  variable names live in the object graph, with tf.compat.v1 Adam's m and v
  slots (again w / 2 and w * w).
- dtypes/model.ckpt: one variable of each dtype (float, bfloat16, half,
  double, int32, and a string polyhal leaves out).
- variables.npz (not committed; in the output folder): every variable as
  TensorFlow reads it back (tf.train.load_checkpoint), for make_reference.py.

Run (about a minute):
    python3 -m venv build/tf-venv
    build/tf-venv/bin/pip install tensorflow-cpu==2.21.0
    build/tf-venv/bin/python tests/data/tf_checkpoint/make_tf_checkpoint.py [NPZ_DIR]
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 37,
          "max_position_embeddings": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
          "type_vocab_size": 2, "vocab_size": 99}


def google_variables(rng):
    """Google's BERT names and shapes, with random values."""
    h, i, v = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"]
    shapes = {
        "bert/embeddings/word_embeddings": [v, h],
        "bert/embeddings/token_type_embeddings": [CONFIG["type_vocab_size"], h],
        "bert/embeddings/position_embeddings": [CONFIG["max_position_embeddings"], h],
        "bert/embeddings/LayerNorm/gamma": [h],
        "bert/embeddings/LayerNorm/beta": [h],
    }
    for n in range(CONFIG["num_hidden_layers"]):
        layer = f"bert/encoder/layer_{n}"
        for part in ("query", "key", "value"):
            shapes[f"{layer}/attention/self/{part}/kernel"] = [h, h]
            shapes[f"{layer}/attention/self/{part}/bias"] = [h]
        shapes[f"{layer}/attention/output/dense/kernel"] = [h, h]
        shapes[f"{layer}/attention/output/dense/bias"] = [h]
        shapes[f"{layer}/attention/output/LayerNorm/gamma"] = [h]
        shapes[f"{layer}/attention/output/LayerNorm/beta"] = [h]
        shapes[f"{layer}/intermediate/dense/kernel"] = [h, i]
        shapes[f"{layer}/intermediate/dense/bias"] = [i]
        shapes[f"{layer}/output/dense/kernel"] = [i, h]
        shapes[f"{layer}/output/dense/bias"] = [h]
        shapes[f"{layer}/output/LayerNorm/gamma"] = [h]
        shapes[f"{layer}/output/LayerNorm/beta"] = [h]
    shapes.update({
        "bert/pooler/dense/kernel": [h, h],
        "bert/pooler/dense/bias": [h],
        "cls/predictions/transform/dense/kernel": [h, h],
        "cls/predictions/transform/dense/bias": [h],
        "cls/predictions/transform/LayerNorm/gamma": [h],
        "cls/predictions/transform/LayerNorm/beta": [h],
        "cls/predictions/output_bias": [v],
        "cls/seq_relationship/output_weights": [2, h],
        "cls/seq_relationship/output_bias": [2],
    })
    values = {}
    for name, shape in shapes.items():
        if name.endswith("gamma"):
            values[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            values[name] = (0.3 * rng.standard_normal(shape)).astype(np.float32)
    return values


def save(values, prefix, sharded):
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for k, (name, value) in enumerate(sorted(values.items())):
            device = f"/cpu:{k % 2}" if sharded else "/cpu:0"
            with tf.device(device):
                variables.append(tf.compat.v1.get_variable(name, initializer=value))
                if value.dtype == np.float32:  # AdamWeightDecayOptimizer's slots
                    # m = w / 2 and v = w * w: a slot laid out other than its
                    # variable (a kernel not transposed) shows in the tests.
                    for slot, slot_value in (("adam_m", 0.5 * value), ("adam_v", value * value)):
                        variables.append(tf.compat.v1.get_variable(
                            f"{name}/{slot}", initializer=slot_value.astype(np.float32)))
        with tf.device("/cpu:0"):
            tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver(sharded=sharded)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
        with tf.compat.v1.Session(graph=graph, config=config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.assign(tf.compat.v1.train.get_global_step(), 7))
            saver.save(session, prefix, global_step=7, write_meta_graph=False)


def save_tf2(values, prefix):
    """The same variables as a TF2 object-based checkpoint (tf.train.Checkpoint):
    keys follow the tracked object tree (model/weights/N/.ATTRIBUTES/VARIABLE_VALUE,
    optimizer/.../.OPTIMIZER_SLOT/...), the variables' own names live in the object
    graph; with tf.compat.v1's Adam slots m = w / 2 and v = w * w."""
    root = tf.Module()
    root.weights = [tf.Variable(value, name=name) for name, value in sorted(values.items())]
    optimizer = tf.compat.v1.train.AdamOptimizer()
    optimizer.apply_gradients([(tf.zeros_like(v), v) for v in root.weights])
    for variable, (name, value) in zip(root.weights, sorted(values.items())):
        variable.assign(value)
        optimizer.get_slot(variable, "m").assign(0.5 * value)
        optimizer.get_slot(variable, "v").assign(value * value)
    tf.train.Checkpoint(model=root, optimizer=optimizer).write(prefix)


def save_dtypes(prefix):
    """One small variable of each dtype polyhal converts to f32."""
    graph = tf.Graph()
    with graph.as_default():
        for name, value in (("f32", np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5),
                            ("bf16", np.array([1.5, -2.25, 3e38, 1e-3],
                                              dtype=tf.bfloat16.as_numpy_dtype)),
                            ("f16", np.array([0.5, -65504.0], np.float16)),
                            ("f64", np.array([1e-10, 2.0], np.float64)),
                            ("i32", np.array([-3, 4], np.int32)),
                            ("text", np.array([b"not a number"]))):
            tf.compat.v1.get_variable(name, initializer=value)
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, prefix, write_meta_graph=False)


def main():
    npz_dir = sys.argv[1] if len(sys.argv) > 1 else HERE
    rng = np.random.default_rng(2911)
    values = google_variables(rng)
    for folder, sharded in (("google", False), ("sharded", True)):
        out = os.path.join(HERE, folder)
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
        save(values, os.path.join(out, "model.ckpt"), sharded)
        os.remove(os.path.join(out, "checkpoint"))  # the index file is what users name
        with open(os.path.join(out, "bert_config.json"), "w") as f:
            json.dump(CONFIG, f, indent=2)
    tf2 = os.path.join(HERE, "tf2")
    os.makedirs(tf2, exist_ok=True)
    for f in os.listdir(tf2):
        os.remove(os.path.join(tf2, f))
    save_tf2(values, os.path.join(tf2, "ckpt-1"))
    with open(os.path.join(tf2, "bert_config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    os.makedirs(os.path.join(HERE, "dtypes"), exist_ok=True)
    save_dtypes(os.path.join(HERE, "dtypes", "model.ckpt"))
    os.remove(os.path.join(HERE, "dtypes", "checkpoint"))
    reader = tf.train.load_checkpoint(os.path.join(HERE, "google", "model.ckpt-7"))
    read = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    os.makedirs(npz_dir, exist_ok=True)
    np.savez(os.path.join(npz_dir, "variables.npz"), **read)
    print(f"{len(read)} variables; shards:", sorted(os.listdir(os.path.join(HERE, "sharded"))))


if __name__ == "__main__":
    main()
