"""Writes TFRecord pre-training data for polyhal's tests with TensorFlow itself
(tensorflow-cpu 2.21.0 from the Python Package Index), in the three layouts
polyhal reads, for the tiny BERT of tests/data/tf_checkpoint (vocab 99,
seq 32):

- google/: Google's create_pretraining_data.py features (input_ids,
  input_mask, segment_ids [32]; masked_lm_positions, masked_lm_ids,
  masked_lm_weights [5]; next_sentence_labels [1]), two plain files.
- google_gzip/: the same records in one GZIP file (TFRecordOptions "GZIP").
- graphcore_remasked/: the same sequences as Graphcore's TensorFlow
  create_pretraining_data.py --remask writes them (masked tokens in the
  first 5 slots, input_position, mask_padding_index, seq_padding_index,
  masked_labels), which must read back as the google rows.
- habana_packed/: the packs of Habana's pack_pretraining_data_tfrec.py
  (input_mask and masked_lm_weights hold the sequence number; positions,
  next_sentence_positions/labels/weights [3]; 5 + 3 masked slots), with the
  JSON side file the packer writes; habana_packed_gzip/ the same, GZIP.
- graphcore_packed/: the packs of Graphcore's pack_pretraining_data.py
  (packed_* features; each sequence's [CLS] moved to the end of the row,
  seq - k, and its label to index 3 - k; 5 + 3 - 1 masked slots), with the
  .index side file tfrecord2idx writes.
- graphcore_remasked_gzip/, graphcore_packed_gzip/: the same, GZIP.
- reference.json: every google record as TensorFlow parses it back
  (tf.data.TFRecordDataset + tf.io.parse_single_example), and every pack in
  polyhal's packed layout, built from the unpacked sequences directly (not
  from either vendor layout), which both packed layouts must give.

The packs are the same in both vendor layouts: sequences taken in order,
first fit into rows of 32 tokens and at most 3 sequences.

Run (seconds):
    python3 -m venv build/tf-venv
    build/tf-venv/bin/pip install tensorflow-cpu==2.21.0
    build/tf-venv/bin/python tests/data/tfrecord/make_tfrecords.py
"""
import json
import os
import shutil

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ, PREDICTIONS, PACK = 32, 5, 3
CLS, SEP, MASK, VOCAB = 1, 2, 3, 99


def unpacked_sequences(rng, count):
    """[CLS] A [SEP] B [SEP], up to 5 tokens masked, as create_pretraining_data.py lays them out."""
    out = []
    for _ in range(count):
        length = int(rng.integers(6, SEQ + 1))
        a = int(rng.integers(1, length - 4))
        b = length - 3 - a
        tokens = [CLS] + list(rng.integers(5, VOCAB, a)) + [SEP] + list(rng.integers(5, VOCAB, b)) + [SEP]
        segments = [0] * (a + 2) + [1] * (b + 1)
        candidates = [i for i, t in enumerate(tokens) if t not in (CLS, SEP)]
        masked = sorted(rng.choice(candidates, size=min(PREDICTIONS, max(1, round(0.15 * length))),
                                   replace=False).tolist())
        labels = [int(tokens[i]) for i in masked]
        for i in masked:
            tokens[i] = MASK
        out.append({"tokens": [int(t) for t in tokens], "segments": segments, "masked": masked,
                    "labels": labels, "is_random_next": int(rng.integers(0, 2))})
    return out


def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def floats(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


def padded(values, size):
    return list(values) + [0] * (size - len(values))


def google_example(s):
    n = len(s["tokens"])
    features = {
        "input_ids": ints(padded(s["tokens"], SEQ)),
        "input_mask": ints(padded([1] * n, SEQ)),
        "segment_ids": ints(padded(s["segments"], SEQ)),
        "masked_lm_positions": ints(padded(s["masked"], PREDICTIONS)),
        "masked_lm_ids": ints(padded(s["labels"], PREDICTIONS)),
        "masked_lm_weights": floats(padded([1.0] * len(s["masked"]), PREDICTIONS)),
        "next_sentence_labels": ints([s["is_random_next"]]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def graphcore_remasked_example(s, pad_position=384):
    """Graphcore's TF1 create_pretraining_data.py --remask: masked tokens first."""
    ids, positions, segments = [0] * SEQ, [pad_position] * SEQ, [0] * SEQ
    labels = [0] * PREDICTIONS
    masked_slot, other_slot = 0, PREDICTIONS
    for at, token in enumerate(s["tokens"]):
        if at in s["masked"]:
            slot = masked_slot
            labels[slot] = s["labels"][s["masked"].index(at)]
            masked_slot += 1
        else:
            slot = other_slot
            other_slot += 1
        ids[slot], positions[slot], segments[slot] = token, at, s["segments"][at]
    features = {
        "input_ids": ints(ids), "input_position": ints(positions), "segment_ids": ints(segments),
        "mask_padding_index": ints([masked_slot]), "seq_padding_index": ints([other_slot]),
        "masked_lm_positions": ints(s["masked"]),  # not padded, as the script writes it
        "masked_labels": ints(labels),
        "masked_lm_ids": ints(padded(s["labels"], PREDICTIONS)),
        "masked_lm_weights": floats(padded([1.0] * len(s["masked"]), PREDICTIONS)),
        "next_sentence_labels": ints([s["is_random_next"]]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def first_fit(sequences):
    packs = []
    for index, s in enumerate(sequences):
        for pack in packs:
            if len(pack) < PACK and sum(len(sequences[i]["tokens"]) for i in pack) + len(s["tokens"]) <= SEQ:
                pack.append(index)
                break
        else:
            packs.append([index])
    return [[sequences[i] for i in pack] for pack in packs]


def polyhal_row(pack):
    """polyhal's packed layout (core/include/polyhal/app/packed_data.hpp), from the sequences."""
    row = {k: [0] * SEQ for k in ("input_ids", "segment_ids", "input_mask", "position_ids")}
    row.update({"masked_lm_positions": [], "masked_lm_ids": [], "next_sentence_positions": [],
                "next_sentence_labels": []})
    offset = 0
    for number, s in enumerate(pack, start=1):
        n = len(s["tokens"])
        row["input_ids"][offset:offset + n] = s["tokens"]
        row["segment_ids"][offset:offset + n] = s["segments"]
        row["input_mask"][offset:offset + n] = [number] * n
        row["position_ids"][offset:offset + n] = list(range(n))
        row["masked_lm_positions"] += [offset + p for p in s["masked"]]
        row["masked_lm_ids"] += s["labels"]
        row["next_sentence_positions"].append(offset)
        row["next_sentence_labels"].append(s["is_random_next"])
        offset += n
    row["masked_lm_weights"] = [1.0] * len(row["masked_lm_ids"])
    row["next_sentence_weights"] = [1.0] * len(pack)
    return row


def habana_example(pack):
    slots = PREDICTIONS + PACK
    ids, mask, segments, positions = ([0] * SEQ for _ in range(4))
    lm_positions, lm_ids, lm_weights = [], [], []
    ns_positions, ns_labels, ns_weights = [0] * PACK, [0] * PACK, [0.0] * PACK
    offset = 0
    for number, s in enumerate(pack, start=1):
        n = len(s["tokens"])
        ids[offset:offset + n] = s["tokens"]
        mask[offset:offset + n] = [number] * n
        segments[offset:offset + n] = s["segments"]
        positions[offset:offset + n] = list(range(n))
        lm_positions += [offset + p for p in s["masked"]]
        lm_ids += s["labels"]
        lm_weights += [float(number)] * len(s["masked"])
        ns_positions[number - 1], ns_labels[number - 1], ns_weights[number - 1] = offset, s["is_random_next"], 1.0
        offset += n
    features = {
        "input_ids": ints(ids), "input_mask": ints(mask), "segment_ids": ints(segments),
        "positions": ints(positions), "masked_lm_positions": ints(padded(lm_positions, slots)),
        "masked_lm_ids": ints(padded(lm_ids, slots)), "masked_lm_weights": floats(padded(lm_weights, slots)),
        "next_sentence_positions": ints(ns_positions), "next_sentence_labels": ints(ns_labels),
        "next_sentence_weights": floats(ns_weights),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def graphcore_example(pack):
    slots = PREDICTIONS + PACK - 1
    ids, mask, segments, positions = ([0] * SEQ for _ in range(4))
    lm_positions, lm_ids, lm_mask = [], [], []
    ns_labels, ns_mask = [0] * PACK, [0.0] * PACK
    offset = 0
    for number, s in enumerate(pack, start=1):
        n = len(s["tokens"])
        ids[offset:offset + n - 1] = s["tokens"][1:]  # all but the [CLS]
        mask[offset:offset + n - 1] = [number] * (n - 1)
        segments[offset:offset + n - 1] = s["segments"][1:]
        positions[offset:offset + n - 1] = list(range(1, n))
        lm_positions += [p - 1 + offset for p in s["masked"]]
        lm_ids += s["labels"]
        lm_mask += [float(number)] * len(s["masked"])
        ids[-number], mask[-number], segments[-number], positions[-number] = s["tokens"][0], number, s["segments"][0], 0
        ns_labels[-number], ns_mask[-number] = s["is_random_next"], 1.0
        offset += n - 1
    features = {
        "packed_input_ids": ints(ids), "packed_input_mask": ints(mask),
        "packed_segment_ids": ints(segments), "packed_position_ids": ints(positions),
        "packed_masked_lm_positions": ints(padded(lm_positions, slots)),
        "packed_masked_lm_ids": ints(padded(lm_ids, slots)),
        "packed_masked_lm_mask": floats(padded(lm_mask, slots)),
        "packed_next_sentence_labels": ints(ns_labels), "packed_next_sentence_mask": floats(ns_mask),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def write(folder, name, examples, gzip=False):
    out = os.path.join(HERE, folder)
    os.makedirs(out, exist_ok=True)
    options = tf.io.TFRecordOptions(compression_type="GZIP") if gzip else None
    with tf.io.TFRecordWriter(os.path.join(out, name), options=options) as writer:
        for example in examples:
            writer.write(example.SerializeToString())
    return os.path.join(out, name)


def parsed_google(paths, compression):
    """The google records as TensorFlow parses them."""
    spec = {name: tf.io.FixedLenFeature([size], tf.int64) for name, size in (
        ("input_ids", SEQ), ("input_mask", SEQ), ("segment_ids", SEQ),
        ("masked_lm_positions", PREDICTIONS), ("masked_lm_ids", PREDICTIONS), ("next_sentence_labels", 1))}
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([PREDICTIONS], tf.float32)
    rows = []
    for record in tf.data.TFRecordDataset(paths, compression_type=compression):
        parsed = tf.io.parse_single_example(record, spec)
        rows.append({k: v.numpy().tolist() for k, v in parsed.items()})
    return rows


def main():
    for folder in ("google", "google_gzip", "graphcore_remasked", "graphcore_remasked_gzip", "habana_packed",
                   "habana_packed_gzip", "graphcore_packed", "graphcore_packed_gzip"):
        shutil.rmtree(os.path.join(HERE, folder), ignore_errors=True)
    rng = np.random.default_rng(2912)
    sequences = unpacked_sequences(rng, 40)
    google = [google_example(s) for s in sequences]
    plain = [write("google", "part-00000-of-00002", google[:25]),
             write("google", "part-00001-of-00002", google[25:])]
    compressed = write("google_gzip", "part-00000-of-00001.gz", google, gzip=True)
    remasked = [graphcore_remasked_example(s) for s in sequences]
    write("graphcore_remasked", "sample.tfrecord", remasked)
    write("graphcore_remasked_gzip", "sample.tfrecord.gz", remasked, gzip=True)
    rows = parsed_google(plain, "")
    assert rows == parsed_google([compressed], "GZIP")

    packs = first_fit(sequences)
    write("habana_packed", "strategy_part_0", [habana_example(p) for p in packs])
    with open(os.path.join(HERE, "habana_packed", "strategy_part_0_metadata.json"), "w") as f:
        json.dump({"avg_seq_per_sample": len(sequences) / len(packs)}, f)
    write("habana_packed_gzip", "strategy_part_0.gz", [habana_example(p) for p in packs], gzip=True)
    path = write("graphcore_packed", "wiki_000.tfrecord", [graphcore_example(p) for p in packs])
    write("graphcore_packed_gzip", "wiki_000.tfrecord.gz", [graphcore_example(p) for p in packs], gzip=True)
    with open(os.path.join(HERE, "graphcore_packed", "wiki_000.index"), "w") as f:
        offset = 0
        for record in tf.data.TFRecordDataset([path]):
            size = len(record.numpy()) + 16
            f.write(f"{offset} {size}\n")
            offset += size

    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "seq": SEQ, "google": rows,
                   "packed": [polyhal_row(p) for p in packs]}, f, separators=(",", ":"))
    print(f"{len(rows)} sequences, {len(packs)} packs")


if __name__ == "__main__":
    main()
