"""polyhal's WordPiece against Hugging Face's BertTokenizerFast (tokenizers)
and BertTokenizer (transformers) on about 12 MB of varied real text
(tokenizer_corpus.py), uncased and cased, with the real model's vocabulary
and tokenizer files.

    python compare_tokenizers.py TOKENIZE_LINES MODEL_DIR [--write-sample DIR]

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

import transformers
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


def explained(line):
    """The documented reason polyhal's ids may differ from BertTokenizer's
    (docs/bert.md, "Tokenizer"), or None."""
    for char in line:
        category = unicodedata.category(char)
        if category in ("Cn", "Cs"):
            return (f"U+{ord(char):04X} is unassigned in Python {sys.version_info[0]}."
                    f"{sys.version_info[1]}'s Unicode {unicodedata.unidata_version}: "
                    "BertTokenizer removes it, BertTokenizerFast and polyhal keep it")
    return None


def sample_reason(line, mine, fast, slow):
    """Why a line belongs in the committed regression sample, or None: it
    differs between the two references, or it holds a case polyhal once
    tokenized differently (before this comparison existed)."""
    if fast != slow:
        return "fast != slow"
    if any(unicodedata.category(c) == "Co" for c in line):
        return "private use (polyhal kept it as [UNK])"
    if "\u03a3" in line:
        return "capital sigma (polyhal lower-cased a final one to \u03c2)"
    if any(t in line for t in SPECIAL) and not all(
            w in SPECIAL or not any(t in w for t in SPECIAL) for w in line.split()):
        return "special token glued to text (polyhal split it)"
    if any(100 < len(w) <= 200 for w in line.split()):
        return "word of 101-200 characters (polyhal's limit was Google's 200)"
    return None


def main():
    tool, model_dir = sys.argv[1:3]
    transformers.logging.set_verbosity_error()  # lines longer than 512 tokens are fine here
    sample_dir = sys.argv[sys.argv.index("--write-sample") + 1] if "--write-sample" in sys.argv else None
    vocab = os.path.join(model_dir, "vocab.txt")
    lines_by_kind = corpus()
    kinds = list(dict.fromkeys(k for k, _ in lines_by_kind))
    lines = [line for _, line in lines_by_kind]
    total_bytes = sum(len(l.encode("utf-8")) + 1 for l in lines)
    print(f"corpus: {len(lines)} lines, {total_bytes / (1 << 20):.2f} MB")
    rows, differing, sample, failures = [], [], [], 0
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
                if mine[i] != fast[i] or mine[i] != slow[i]:
                    reason = explained(lines[i])
                    differing.append((case, kind, lines[i], mine[i], fast[i], slow[i], reason))
                    if mine[i] != fast[i] or reason is None:
                        failures += 1
                why = sample_reason(lines[i], mine[i], fast[i], slow[i])
                if why:
                    sample.append((case, kind, why, lines[i], fast[i], slow[i]))
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
    reasons = {}
    for *_, reason in differing:
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda r: -r[1]):
        print(f"{count} lines differ from BertTokenizer: {reason}")
    print(f"{sum(m != f for *_, m, f, _s, _r in differing)} lines differ from BertTokenizerFast; "
          f"{failures} differences unexplained")
    if sample_dir:
        write_sample(sample_dir, sample)
    return 1 if failures else 0


# Lines per (case, reason) in the committed sample: enough to pin each rule,
# small enough to read (about 100 KB).
PER_REASON = 20


def write_sample(sample_dir, sample):
    os.makedirs(sample_dir, exist_ok=True)
    taken = {}
    path = os.path.join(sample_dir, "regression.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for case, kind, why, line, fast, slow in sample:
            key = (case, why)
            if taken.get(key, 0) >= PER_REASON:
                continue
            taken[key] = taken.get(key, 0) + 1
            f.write(json.dumps({"case": case, "kind": kind, "why": why, "text": line,
                                "fast": fast, "slow": slow}, ensure_ascii=False) + "\n")
    print(f"wrote {sum(taken.values())} lines to {path}")


if __name__ == "__main__":
    sys.exit(main())
