#!/usr/bin/python3
"""A small corpus for polyhal's prepare-data tests, in the reference's input
format (one sentence per line, documents separated by blank lines), and a
WordPiece vocabulary that covers it, with words of several pieces so that
whole-word masking has something to join.

Run from the repository root: /usr/bin/python3 tests/data/corpus/make_corpus.py
"""
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
WHOLE = ("the a of and to in is was for on with as by at from that this it he she they we "
         "river mountain city village road bridge forest market school garden house tower "
         "king queen farmer teacher doctor child friend people water bread stone light night "
         "morning winter summer old new small large quiet busy green north south").split()
# Words the vocabulary holds only as pieces: "walking" = walk ##ing.
PIECES = {"walking": ["walk", "##ing"], "builders": ["build", "##ers"],
          "unwanted": ["un", "##want", "##ed"], "rebuilt": ["re", "##built"],
          "carefully": ["care", "##ful", "##ly"], "lighthouse": ["light", "##house"],
          "travellers": ["travel", "##lers"], "overlooking": ["over", "##look", "##ing"]}


def sentence(rng):
    words = [rng.choice(WHOLE + list(PIECES)) for _ in range(rng.randint(4, 14))]
    return " ".join(words).capitalize() + rng.choice([".", ".", "!", "?"])


def main():
    rng = random.Random(7)
    for part in range(2):
        docs = []
        for _ in range(14 + part * 4):
            docs.append("\n".join(sentence(rng) for _ in range(rng.randint(2, 9))))
        with open(os.path.join(HERE, "text", f"part-{part}.txt"), "w") as f:
            f.write("\n\n".join(docs) + "\n")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "!", "?", ","]
    vocab += WHOLE
    for pieces in PIECES.values():
        for p in pieces:
            if p not in vocab:
                vocab.append(p)
    with open(os.path.join(HERE, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")


if __name__ == "__main__":
    main()
