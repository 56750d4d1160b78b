"""polyhal's WordPiece against Hugging Face's BertTokenizerFast (tokenizers)
and BertTokenizer (transformers) on about 12 MB of varied real text
(tokenizer_corpus.py), uncased and cased, with the real model's vocabulary
and tokenizer files.

    python compare_tokenizers.py TOKENIZE_LINES MODEL_DIR WORK_DIR [--write-sample DIR]

Prints one table (lines and bytes per kind, lines with identical ids per
tokenizer and case) and the first differing lines. Exit status 1 when a line
differs from BertTokenizerFast in a way docs/bert.md does not explain (the
`explained` rules below). --write-sample writes tests/data/tokenizer/'s
regression sample: the lines that differ between the tokenizers or that
once differed in polyhal, with BertTokenizerFast's ids.
"""
import json
import os
import subprocess
import sys
import time
import unicodedata

from transformers import BertTokenizer, BertTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_corpus import corpus  # noqa: E402

SPECIAL = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")


def polyhal_ids(tool, vocab, lines, lower):
    text = "".join(line + "\n" for line in lines).encode("utf-8")
    done = subprocess.run([tool, vocab, "--lower-case", "true" if lower else "false"],
                          input=text, capture_output=True, check=True)
    out = done.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) == len(lines) + 1, (len(out), len(lines))
    return [[int(i) for i in row.split()] for row in out[:-1]]


def explained(line, lower, fast, slow):
    """The documented reason polyhal's ids differ from BertTokenizerFast's,
    or None. docs/bert.md, "Tokenizer", states each rule."""
    if any(s in line for s in SPECIAL) and fast != slow:
        return None
    return None


def main():
    tool, model_dir, work = sys.argv[1:4]
    sample_dir = sys.argv[sys.argv.index("--write-sample") + 1] if "--write-sample" in sys.argv else None
    vocab = os.path.join(model_dir, "vocab.txt")
    lines_by_kind = corpus()
    kinds = list(dict.fromkeys(k for k, _ in lines_by_kind))
    lines = [line for _, line in lines_by_kind]
    total_bytes = sum(len(l.encode("utf-8")) + 1 for l in lines)
    print(f"corpus: {len(lines)} lines, {total_bytes / (1 << 20):.2f} MB")
    rows, differing, failures = [], [], 0
    for lower in (True, False):
        case = "uncased" if lower else "cased"
        start = time.time()
        mine = polyhal_ids(tool, vocab, lines, lower)
        t_mine = time.time() - start
        fast_tok = BertTokenizerFast.from_pretrained(model_dir, do_lower_case=lower)
        slow_tok = BertTokenizer.from_pretrained(model_dir, do_lower_case=lower)
        start = time.time()
        fast = fast_tok(lines, add_special_tokens=False)["input_ids"]
        t_fast = time.time() - start
        start = time.time()
        slow = [slow_tok.convert_tokens_to_ids(slow_tok.tokenize(l)) for l in lines]
        t_slow = time.time() - start
        print(f"{case}: polyhal {t_mine:.1f} s, BertTokenizerFast {t_fast:.1f} s, "
              f"BertTokenizer {t_slow:.1f} s")
        for kind in kinds:
            idx = [i for i, (k, _) in enumerate(lines_by_kind) if k == kind]
            size = sum(len(lines[i].encode("utf-8")) + 1 for i in idx)
            same_fast = sum(mine[i] == fast[i] for i in idx)
            same_slow = sum(mine[i] == slow[i] for i in idx)
            fast_slow = sum(fast[i] == slow[i] for i in idx)
            rows.append((case, kind, len(idx), size, same_fast, same_slow, fast_slow))
            for i in idx:
                if mine[i] != fast[i] or mine[i] != slow[i] or fast[i] != slow[i]:
                    reason = explained(lines[i], lower, fast[i], slow[i])
                    differing.append((case, kind, lines[i], mine[i], fast[i], slow[i], reason))
                    if mine[i] != fast[i] and reason is None:
                        failures += 1
    print()
    print("| case | kind | lines | bytes | = BertTokenizerFast | = BertTokenizer | fast = slow |")
    print("|---|---|---|---|---|---|---|")
    for case, kind, n, size, sf, ss, fs in rows:
        print(f"| {case} | {kind} | {n} | {size:,} | {sf} ({100 * sf / n:.3f}%) | "
              f"{ss} ({100 * ss / n:.3f}%) | {fs} ({100 * fs / n:.3f}%) |")
    print()
    fast_tok = BertTokenizerFast.from_pretrained(model_dir)
    shown = 0
    for case, kind, line, mine, fast, slow, reason in differing:
        if shown >= 40:
            break
        shown += 1
        print(f"{case} {kind}: {line!r}\n  reason: {reason}\n  polyhal: "
              f"{fast_tok.convert_ids_to_tokens(mine)}\n  fast:    "
              f"{fast_tok.convert_ids_to_tokens(fast)}\n  slow:    "
              f"{fast_tok.convert_ids_to_tokens(slow)}")
    print(f"{len(differing)} differing lines, {failures} unexplained against BertTokenizerFast")
    if sample_dir:
        write_sample(sample_dir, differing)
    return 1 if failures else 0


def write_sample(sample_dir, differing):
    os.makedirs(sample_dir, exist_ok=True)
    with open(os.path.join(sample_dir, "differing.jsonl"), "w", encoding="utf-8") as f:
        for case, kind, line, mine, fast, slow, reason in differing:
            f.write(json.dumps({"case": case, "kind": kind, "text": line, "fast": fast,
                                "slow": slow, "reason": reason}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    sys.exit(main())
