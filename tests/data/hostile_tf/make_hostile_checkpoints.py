#!/usr/bin/env python3
"""Writes the crafted TensorFlow checkpoints of issue 53 (items 3 and 4),
as a hostile user would, in TensorFlow's own formats (a LevelDB table of
BundleEntryProto records for PREFIX.index, PREFIX.data-00000-of-00001):

- shared/model.ckpt: 100 f32 tensors of 1024 elements whose index entries
  all point at the same 4 KiB of the one shard (each would be decoded);
- repeated/model.ckpt: an index block that names its one data block 1000
  times (each naming would read the block's entries again);
- step_*/model.ckpt (item 22): a global_step alone, int64 16777217 (which
  a float cannot hold), float 2.5 and int64 -5;
- two_layer_ones/model.ckpt (item 24): bert/encoder/layer_01/output/dense/bias
  and bert/encoder/layer_1/output/dense/bias, which are one layer;
- int8_weight/model.ckpt (item 25): a DT_INT8 bert/pooler/dense/bias.

Standard library only; run from anywhere:
  python3 tests/data/hostile_tf/make_hostile_checkpoints.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = 0xDB4775248B80FB57


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, wire, payload):
    key = varint((number << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + struct.pack("<I", payload)  # wire 5: fixed32


def header():
    version = field(1, 0, 1)  # VersionDef.producer
    return field(1, 0, 1) + field(3, 2, version)  # num_shards 1, endianness LITTLE (0)


def entry(elements, offset, size, crc, dtype=1):
    """A BundleEntryProto: DT_FLOAT (1) by default, DT_INT64 is 9; shard 0;
    elements None: a scalar."""
    shape = b"" if elements is None else field(2, 2, field(1, 0, elements))  # dim { size }
    return (field(1, 0, dtype) + field(2, 2, shape) + field(4, 0, offset) + field(5, 0, size) +
            field(6, 5, crc))


def block(records):
    body = bytearray()
    for key, value in records:
        body += varint(0) + varint(len(key)) + varint(len(value)) + key + value
    body += struct.pack("<II", 0, 1)  # one restart point, at 0
    return bytes(body)


def table(records, namings=1):
    """A table of `records` in one data block, named `namings` times."""
    out = bytearray()
    data = block(records)
    handles = []
    data_at = len(out)
    out += data + b"\0" + struct.pack("<I", masked(crc32c(data + b"\0")))
    handle = varint(data_at) + varint(len(data))
    last = records[-1][0]
    index = block([(last + b"%06d" % i, handle) for i in range(namings)])
    meta_at = len(out)
    meta = block([])
    out += meta + b"\0" + struct.pack("<I", masked(crc32c(meta + b"\0")))
    index_at = len(out)
    out += index + b"\0" + struct.pack("<I", masked(crc32c(index + b"\0")))
    footer = varint(meta_at) + varint(len(meta)) + varint(index_at) + varint(len(index))
    out += footer + b"\0" * (40 - len(footer)) + struct.pack("<Q", MAGIC)
    return bytes(out)


def write(name, index, shard):
    os.makedirs(os.path.join(HERE, name), exist_ok=True)
    with open(os.path.join(HERE, name, "model.ckpt.index"), "wb") as f:
        f.write(index)
    with open(os.path.join(HERE, name, "model.ckpt.data-00000-of-00001"), "wb") as f:
        f.write(shard)


def main():
    shard = struct.pack("<1024f", *([0.5] * 1024))
    crc = masked(crc32c(shard))
    shared = [(b"", header())] + [(b"bert/w%04d" % i, entry(1024, 0, len(shard), crc))
                                  for i in range(100)]
    write("shared", table(shared), shard)
    one = [(b"", header()), (b"bert/w", entry(1024, 0, len(shard), crc))]
    write("repeated", table(one, namings=1000), shard)
    for name, dtype, data in (("step_int64_16777217", 9, struct.pack("<q", 16777217)),
                              ("step_float_2_5", 1, struct.pack("<f", 2.5)),
                              ("step_int64_negative", 9, struct.pack("<q", -5))):
        step = [(b"", header()),
                (b"global_step", entry(None, 0, len(data), masked(crc32c(data)), dtype))]
        write(name, table(step), data)
    bias = struct.pack("<4f", 1, 2, 3, 4)
    both = [(b"", header())] + [
        (b"bert/encoder/layer_%s/output/dense/bias" % layer, entry(4, at, 16, masked(crc32c(bias))))
        for layer, at in ((b"01", 0), (b"1", 16))]
    write("two_layer_ones", table(both), bias + bias)
    small = bytes([1, 2, 3, 4])
    int8 = [(b"", header()), (b"bert/pooler/dense/bias", entry(4, 0, 4, masked(crc32c(small)), 6))]
    write("int8_weight", table(int8), small)


if __name__ == "__main__":
    main()
