#!/usr/bin/python3
"""Real English prose for the pre-training parity run, from a Debian package:
the Linux kernel's documentation (linux-doc-6.1, about 24 MB of
reStructuredText in 3,191 files). Writes the input BERT's
create_pretraining_data.py (and `polyhal prepare-data`) reads: one sentence
per line, a blank line between documents (one file = one document), with the
reStructuredText markup that is not prose dropped (directives, literal
blocks, tables, section underlines, link targets, comments). Every 50th
document goes to the held-out evaluation text instead.

  make_corpus.py OUT_DIR [--docs DIR]   -> OUT_DIR/train.txt, OUT_DIR/eval.txt
"""
import argparse
import gzip
import os
import re

DOCS = "/usr/share/doc/linux-doc-6.1/Documentation"
UNDERLINE = re.compile(r"^([=\-~^\"'`#*+_.:])\1{2,}\s*$")
TABLE = re.compile(r"^\s*[+|]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
INLINE = re.compile(r":[a-z:]+:`([^`<]*)(?:<[^>]*>)?`|``([^`]*)``|`([^`<]*)(?:<[^>]*>)?`_*")


def prose_lines(text):
    """Paragraphs of prose, markup removed, each joined into one string."""
    paragraph, literal, out = [], False, []
    for raw in text.splitlines():
        line = raw.rstrip()
        if literal:  # a literal block lasts while lines are indented or blank
            if line and not line[0].isspace():
                literal = False
            else:
                continue
        if not line.strip():
            if paragraph:
                out.append(" ".join(paragraph))
                paragraph = []
            continue
        stripped = line.strip()
        if (UNDERLINE.match(stripped) or TABLE.match(line) or stripped.startswith("..")
                or line[0].isspace() and not paragraph):
            if paragraph:
                out.append(" ".join(paragraph))
                paragraph = []
            if stripped.startswith(".. ") and "::" in stripped:
                literal = True
            continue
        if stripped.endswith("::"):
            literal = True
            stripped = stripped[:-1]
        paragraph.append(INLINE.sub(lambda m: next(g for g in m.groups() if g is not None),
                                    stripped))
    if paragraph:
        out.append(" ".join(paragraph))
    return [p for p in out if len(p.split()) >= 4]


def sentences(paragraphs):
    for p in paragraphs:
        for s in SENTENCE_END.split(p):
            s = s.strip()
            if s:
                yield s


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--docs", default=DOCS)
    args = parser.parse_args()
    files = []
    for root, _, names in os.walk(args.docs):
        files += [os.path.join(root, n) for n in names if n.endswith((".rst", ".rst.gz", ".txt",
                                                                       ".txt.gz"))]
    files.sort()
    os.makedirs(args.out, exist_ok=True)
    counts = {"train": [0, 0], "eval": [0, 0]}
    with open(os.path.join(args.out, "train.txt"), "w") as train, \
            open(os.path.join(args.out, "eval.txt"), "w") as held_out:
        for n, path in enumerate(files):
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8", errors="replace") as f:
                lines = list(sentences(prose_lines(f.read())))
            if len(lines) < 2:
                continue
            split = "eval" if n % 50 == 49 else "train"
            out = held_out if split == "eval" else train
            out.write("\n".join(lines) + "\n\n")
            counts[split][0] += 1
            counts[split][1] += sum(len(s) for s in lines)
    for split, (docs, chars) in counts.items():
        print(f"{split}: {docs} documents, {chars / 1e6:.1f} MB of sentences")


if __name__ == "__main__":
    main()
