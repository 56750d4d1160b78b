#!/usr/bin/python3
"""Crafted packed files (the layout of core/include/polyhal/app/packed_data.hpp),
written with h5py, for the packed reader's bad-input tests. One good row of
two sequences (tokens 0-4 and 5-8 of 12), and copies with one field broken.

  /usr/bin/python3 tests/data/packed/make_packed_hdf5.py   (python3-h5py)
"""
import os

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
S, P, K = 12, 4, 3


def good():
    ids = np.array([[2, 10, 11, 12, 3, 2, 20, 21, 3, 0, 0, 0]], np.int32)
    return {
        "packed_input_ids": ids,
        "packed_segment_ids": np.array([[0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0]], np.int32),
        "packed_input_mask": np.array([[1, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0]], np.int32),
        "packed_position_ids": np.array([[0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 0, 0]], np.int32),
        "packed_masked_lm_positions": np.array([[2, 6, 0, 0]], np.int32),
        "packed_masked_lm_ids": np.array([[15, 25, 0, 0]], np.int32),
        "packed_masked_lm_weights": np.array([[1, 1, 0, 0]], np.float32),
        "packed_next_sentence_positions": np.array([[0, 5, 0]], np.int32),
        "packed_next_sentence_labels": np.array([[1, 0, 0]], np.int32),
        "packed_next_sentence_weights": np.array([[1, 1, 0]], np.float32),
    }


def write(name, data):
    with h5py.File(os.path.join(HERE, name), "w") as f:
        for key, value in data.items():
            f.create_dataset(key, data=value)


def main():
    write("good.hdf5", good())
    bad = os.path.join(HERE, "bad")
    os.makedirs(bad, exist_ok=True)
    d = good(); d["packed_position_ids"][0, 6] = 4   # does not restart with sequence 2
    write("bad/positions.hdf5", d)
    d = good(); d["packed_input_mask"][0, 7] = 1      # sequence 1 again inside sequence 2
    write("bad/mask.hdf5", d)
    d = good(); d["packed_masked_lm_positions"][0, 1] = 10  # a masked position in padding
    write("bad/lm_position.hdf5", d)
    d = good(); d["packed_next_sentence_weights"][0, 2] = 1  # a third sequence that is not there
    write("bad/ns_weights.hdf5", d)


if __name__ == "__main__":
    main()
