#!/usr/bin/python3
"""Small files in the MLPerf BERT pre-training HDF5 layout (as the MLPerf
reference's create_pretraining_data.py / chop_hdf5_files.py write them, with
h5py, the library those scripts use), for polyhal's reader tests.

Run from the repository root:  /usr/bin/python3 tests/data/mlperf/make_mlperf_hdf5.py
(needs python3-h5py). Sample g of the set (g = 0..7 across both part files):
  length L = 10 + g % 6; input_ids[p] = 5 + (7 g + p) % 50 for p < L, 0 after
  input_mask[p] = 1 for p < L; segment_ids[p] = 1 for L // 2 <= p < L
  masked_lm_positions = [1, 3] (g even) or [2] (g odd), padded with 0 to 4
  masked_lm_ids = input_ids at those positions + 1, padded with 0
  next_sentence_labels = g % 2
"""
import os

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ, PREDICTIONS = 16, 4


def samples(first, count, seq=SEQ):
    ids = np.zeros((count, seq), np.int64)
    mask = np.zeros((count, seq), np.int64)
    segments = np.zeros((count, seq), np.int64)
    positions = np.zeros((count, PREDICTIONS), np.int64)
    labels = np.zeros((count, PREDICTIONS), np.int64)
    nsp = np.zeros((count,), np.int64)
    for row in range(count):
        g = first + row
        length = 10 + g % 6
        for p in range(length):
            ids[row, p] = 5 + (7 * g + p) % 50
            mask[row, p] = 1
            segments[row, p] = 1 if p >= length // 2 else 0
        chosen = [1, 3] if g % 2 == 0 else [2]
        for k, p in enumerate(chosen):
            positions[row, k] = p
            labels[row, k] = ids[row, p] + 1
        nsp[row] = g % 2
    return ids, mask, segments, positions, labels, nsp


def write(path, data, id_type, compression, skip=()):
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
             "next_sentence_labels")
    types = (id_type, "i1", "i1", id_type, id_type, "i1")
    with h5py.File(path, "w") as f:
        for name, values, dtype in zip(names, data, types):
            if name not in skip:
                f.create_dataset(name, data=values, dtype=dtype, compression=compression)


def write_claiming_files(folder):
    """Files of a few KB whose datasets claim 2^40 rows they do not store
    (unwritten chunks; unallocated contiguous storage): read as fill values,
    they cost minutes before anything is refused."""
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
             "next_sentence_labels")
    widths = (SEQ, SEQ, SEQ, PREDICTIONS, PREDICTIONS, None)
    for name, chunks in (("claims_rows_chunked.hdf5", True), ("claims_rows_contiguous.hdf5", False)):
        with h5py.File(os.path.join(folder, name), "w") as f:
            for dataset, width in zip(names, widths):
                shape = (2 ** 40,) if width is None else (2 ** 40, width)
                chunk = None if not chunks else ((1,) if width is None else (1, width))
                f.create_dataset(dataset, shape=shape, dtype="i4", chunks=chunk)


def main():
    # The chop_hdf5_files.py layout (i4 ids, gzip) and the NVIDIA one (i2 ids, uncompressed).
    write(os.path.join(HERE, "part-00000-of-00002.hdf5"), samples(0, 5), "i4", "gzip")
    write(os.path.join(HERE, "part-00001-of-00002.hdf5"), samples(5, 3), "i2", None)
    bad = os.path.join(HERE, "bad")
    os.makedirs(bad, exist_ok=True)
    write(os.path.join(bad, "seq32.hdf5"), samples(0, 2, seq=32), "i4", None)
    write(os.path.join(bad, "no_labels.hdf5"), samples(0, 2), "i4", None, skip=("masked_lm_ids",))
    # Labels a crafted file could use to index past the logits.
    ids, mask, segments, positions, labels, nsp = samples(0, 2)
    labels[1, 0] = 100000
    write(os.path.join(bad, "lm_label.hdf5"), (ids, mask, segments, positions, labels, nsp), "i4", None)
    ids, mask, segments, positions, labels, nsp = samples(0, 2)
    nsp[1] = 7
    write(os.path.join(bad, "nsp_label.hdf5"), (ids, mask, segments, positions, labels, nsp), "i4", None)
    # Files that would make a reader open other files: an external link, raw
    # data stored in another file, a virtual dataset mapping another file.
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
             "next_sentence_labels")
    data = samples(0, 2)
    with h5py.File(os.path.join(bad, "external_link.hdf5"), "w") as f:
        for name, values in zip(names, data):
            if name == "input_ids":
                f[name] = h5py.ExternalLink("/etc/passwd", "/x")
            else:
                f.create_dataset(name, data=values)
    with h5py.File(os.path.join(bad, "external_storage.hdf5"), "w") as f:
        for name, values in zip(names, data):
            if name == "input_ids":
                f.create_dataset(name, shape=values.shape, dtype="i4",
                                 external=[("/etc/hostname", 0, h5py.h5f.UNLIMITED)])
            else:
                f.create_dataset(name, data=values)
    with h5py.File(os.path.join(bad, "virtual.hdf5"), "w") as f:
        for name, values in zip(names, data):
            if name == "input_ids":
                layout = h5py.VirtualLayout(shape=values.shape, dtype="i4")
                layout[:] = h5py.VirtualSource("/etc/other.h5", "x", shape=values.shape)
                f.create_virtual_dataset(name, layout, fillvalue=0)
            else:
                f.create_dataset(name, data=values)
    claims = os.path.join(HERE, "claims")
    os.makedirs(claims, exist_ok=True)
    write_claiming_files(claims)
    with open(os.path.join(bad, "not_hdf5.hdf5"), "wb") as f:
        f.write(b"this is not an HDF5 file\n" * 4)
    # Five bytes of part-00000 changed (found by mutating it at random): the
    # structure still opens, but Debian 12's libhdf5 1.10.8 segfaults in
    # H5Dread (H5VM_memcpyvv) reading input_ids. polyhal must survive it.
    with open(os.path.join(HERE, "part-00000-of-00002.hdf5"), "rb") as f:
        crashing = bytearray(f.read())
    for offset, value in ((857, 0o30), (878, 0o170), (1220, 0o175), (1732, 0o133),
                          (1792, 0o221)):
        crashing[offset] = value
    with open(os.path.join(bad, "libhdf5_segfault.hdf5"), "wb") as f:
        f.write(crashing)
    print("wrote", HERE)


if __name__ == "__main__":
    main()
