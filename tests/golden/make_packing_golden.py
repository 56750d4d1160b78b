#!/usr/bin/python3
"""Golden packing results from the reference algorithms of Krell et al.,
"Efficient Sequence Packing without Cross-contamination" (2021): SPFHP as
its reference code does it, and NNLSHP with scipy.optimize.nnls. polyhal's
C++ (core/src/data/packing.cpp) is checked against these in
tests/packing_test.cpp.

  /usr/bin/python3 tests/golden/make_packing_golden.py   (python3-numpy, python3-scipy)

Histograms:
  small:     max 16, lengths with a few of each
  wikipedia: max 512, 20000 sequences from a deterministic length
             distribution resembling Wikipedia's at seq 512 (a third of the
             sequences full length, the rest spread towards short; the mean
             leaves about half of all tokens as padding, as the paper reports)
"""
import json
import os
from collections import defaultdict

import numpy as np
from scipy import optimize

HERE = os.path.dirname(os.path.abspath(__file__))


def add_pack(pack, count, tmp, final, limit, offset):
    if len(pack) == limit or offset == 0:
        final[offset].append((count, pack))
    else:
        tmp[offset].append((count, pack))


def pack_using_spfhp(histogram, max_sequence_length, max_sequences_per_pack):
    reversed_histogram = np.flip(histogram)
    tmp_strategies_per_length = defaultdict(list)
    strategies_per_length = defaultdict(list)
    for i in range(max_sequence_length):
        n_sequences_to_bin = reversed_histogram[i]
        length_to_bin = max_sequence_length - i
        offset = i + 1
        while n_sequences_to_bin > 0:
            if (length_to_bin + offset) in tmp_strategies_per_length:
                n_sequences_to_pack, pack = tmp_strategies_per_length[length_to_bin + offset].pop()
                new_pack = pack + [length_to_bin]
                count = min(n_sequences_to_pack, n_sequences_to_bin)
                if n_sequences_to_pack > n_sequences_to_bin:
                    n_sequences_to_pack -= n_sequences_to_bin
                    tmp_strategies_per_length[length_to_bin + offset].append(
                        (n_sequences_to_pack, pack))
                    n_sequences_to_bin = 0
                else:
                    n_sequences_to_bin -= n_sequences_to_pack
                add_pack(new_pack, count, tmp_strategies_per_length, strategies_per_length,
                         max_sequences_per_pack, offset)
                if not tmp_strategies_per_length[length_to_bin + offset]:
                    tmp_strategies_per_length.pop(length_to_bin + offset)
            else:
                offset -= 1
            if offset < 0:
                add_pack([length_to_bin], n_sequences_to_bin, tmp_strategies_per_length,
                         strategies_per_length, max_sequences_per_pack, i)
                n_sequences_to_bin = 0
    for key in tmp_strategies_per_length:
        strategies_per_length[key].extend(tmp_strategies_per_length[key])
    strategy_set, strategy_repeat_count = [], []
    for key in strategies_per_length:
        for count, pack in strategies_per_length[key]:
            pack.reverse()
            strategy_set.append(pack)
            strategy_repeat_count.append(int(count))
    return strategy_set, strategy_repeat_count


def get_packing_strategies(start_length, minimum_increment, target_length, depth):
    gap = target_length - start_length
    strategies = []
    if depth == 1:
        if gap >= minimum_increment:
            strategies.append([gap])
    else:
        for new in range(minimum_increment, gap + 1):
            new_gap = target_length - start_length - new
            if new_gap == 0:
                strategies.append([new])
            else:
                for option in get_packing_strategies(start_length + new, new, target_length,
                                                     depth - 1):
                    if len(option) > 0:
                        strategies.append([new] + option)
    return strategies


def nnlshp_packs(histogram, max_len, depth):
    """The NNLS mixture, rounded down, the rest by SPFHP (polyhal's rule):
    returns the number of packs."""
    strategies = get_packing_strategies(0, 1, max_len, depth)
    a = np.zeros((max_len, len(strategies)))
    for j, s in enumerate(strategies):
        for length in s:
            a[length - 1, j] += 1
    w = np.ones(max_len)
    w[:8] = 0.09
    mixture, _ = optimize.nnls(a * w[:, None], histogram * w)
    left = histogram.copy()
    packs = 0
    for j, s in enumerate(strategies):
        count = int(np.floor(mixture[j] + 1e-9))
        if count <= 0:
            continue
        for length in s:
            count = min(count, left[length - 1] // s.count(length))
        if count <= 0:
            continue
        for length in s:
            left[length - 1] -= count
        packs += count
    rest, counts = pack_using_spfhp(left, max_len, depth)
    return packs + sum(counts), float(np.abs(a @ mixture - histogram).sum())


def wikipedia_like(n, max_len, seed=1234):
    rng = np.random.default_rng(seed)
    full = rng.random(n) < 0.33
    short = np.clip(rng.gamma(2.2, 80.0, n).astype(np.int64) + 8, 8, max_len)
    return np.where(full, max_len, short)


def case(name, lengths, max_len, depth):
    histogram = np.bincount(lengths, minlength=max_len + 1)[1:]
    strategies, counts = pack_using_spfhp(histogram, max_len, depth)
    nnls_packs, _ = nnlshp_packs(histogram, max_len, depth)
    return {
        "name": name,
        "max_len": max_len,
        "max_per_pack": depth,
        "histogram": [int(c) for c in histogram],
        "spfhp": sorted([[s, c] for s, c in zip(strategies, counts)]),
        "spfhp_packs": int(sum(counts)),
        "nnlshp_packs": int(nnls_packs),
        "tokens": int(lengths.sum()),
    }


def main():
    small = np.array([1, 2, 3, 3, 4, 5, 5, 5, 7, 8, 9, 9, 10, 12, 13, 15, 16, 16, 2, 6, 11, 14])
    cases = [case("small", small, 16, 3),
             case("wikipedia", wikipedia_like(20000, 512), 512, 3)]
    with open(os.path.join(HERE, "packing_golden.json"), "w") as f:
        json.dump(cases, f, indent=None, separators=(",", ":"))
        f.write("\n")
    for c in cases:
        print(c["name"], "sequences", sum(c["histogram"]), "spfhp packs", c["spfhp_packs"],
              "nnlshp packs", c["nnlshp_packs"],
              "efficiency %.3f" % (c["tokens"] / (c["spfhp_packs"] * c["max_len"])))


if __name__ == "__main__":
    main()
