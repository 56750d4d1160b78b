"""A varied text corpus for comparing polyhal's WordPiece with Hugging Face's
tokenizers: real text that Debian 12 ships, one line per example, by kind.

- prose: the licence texts (/usr/share/common-licenses), perl's pod pages
  and the Debian changelogs of the installed packages (names with accents,
  e-mail addresses, version strings);
- code: Python's standard library and the C headers in /usr/include, lines
  as they are (indentation, operators, string escapes);
- scripts: every translated message in /usr/share/locale (gettext .mo
  catalogs of about 190 locales: Cyrillic, Greek, Arabic, Hebrew, Devanagari,
  Bengali, Tamil, Thai, Georgian, Armenian, CJK, Hangul, Ethiopic, ...);
- accents: Latin-script translations with diacritics, half of them
  decomposed (NFD), plus the case rules that trip lower-casing (Turkish
  dotted I, German sharp s, Greek final sigma, ligatures, full-width forms);
- emoji: real lines with emoji inserted, alone and as sequences (skin
  tones, zero-width-joiner families, flags, keycaps, variation selectors);
- control: real lines with control, format, zero-width, bidirectional,
  private-use, unassigned, separator and replacement characters inserted;
- long_words: URLs, base64 and hexadecimal runs from the machine's files and
  words of 95 to 205 characters made of real words (around both the 100
  and the 200 character limits), some with accents and emoji;
- special_tokens: real lines with literal [MASK], [SEP], ... spaced, glued
  to words and inside punctuation.

Deterministic for a given machine: files are read in sorted order and the
insertions come from a seeded generator. The corpus is built where the
comparison runs (about 12 MB) and never committed; the lines that once
tokenized differently are (tests/data/tokenizer/).
"""
import glob
import gettext
import gzip
import os
import random
import re
import unicodedata

MB = 1 << 20
# Bytes per kind: 12.5 MB in all.
BUDGET = {"prose": 3 * MB, "code": 2.5 * MB, "scripts": 3 * MB, "accents": 1 * MB,
          "emoji": 0.75 * MB, "control": 1 * MB, "long_words": 0.75 * MB,
          "special_tokens": 0.5 * MB}


def _take(lines, budget):
    out, size = [], 0
    for line in lines:
        line = line.replace("\n", " ")
        if not line.strip():
            continue
        size += len(line.encode("utf-8")) + 1
        if size > budget:
            break
        out.append(line)
    return out


def _read(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="strict") as f:
            return f.read()
    except (UnicodeDecodeError, OSError, EOFError):
        return ""


def _paragraphs(text):
    for paragraph in re.split(r"\n\s*\n", text):
        joined = " ".join(paragraph.split())
        if joined:
            yield joined


def prose():
    files = sorted(glob.glob("/usr/share/common-licenses/*"))
    files += sorted(glob.glob("/usr/share/perl/5.36/pod/*.pod"))
    files += sorted(glob.glob("/usr/share/doc/*/changelog.Debian.gz"))
    for path in files:
        if os.path.isfile(path) and not os.path.islink(path):
            yield from _paragraphs(_read(path))


def code():
    files = sorted(glob.glob("/usr/lib/python3.11/*.py"))
    files += sorted(glob.glob("/usr/include/*.h"))
    for path in files:
        for line in _read(path).split("\n"):
            if line.strip():
                yield line


def _catalog_texts(path):
    try:
        with open(path, "rb") as f:
            catalog = gettext.GNUTranslations(f)._catalog
    except Exception:
        return []
    texts = set()
    for key, value in catalog.items():
        if isinstance(value, str) and value.strip() and key:
            for line in value.split("\n"):
                if line.strip():
                    texts.add(line)
    return sorted(texts)


def _locales():
    return sorted(d for d in os.listdir("/usr/share/locale")
                  if os.path.isdir(os.path.join("/usr/share/locale", d, "LC_MESSAGES")))


def scripts():
    # Round-robin over locales, so every one is represented within the budget.
    per_locale = []
    for locale in _locales():
        texts = []
        for path in sorted(glob.glob(f"/usr/share/locale/{locale}/LC_MESSAGES/*.mo")):
            texts.extend(_catalog_texts(path))
        if texts:
            per_locale.append(iter(texts))
    while per_locale:
        alive = []
        for texts in per_locale:
            line = next(texts, None)
            if line is not None:
                yield line
                alive.append(texts)
        per_locale = alive


LATIN_ACCENTED = ["fr", "de", "es", "pt", "pt_BR", "it", "cs", "sk", "pl", "hu", "ro", "tr",
                  "vi", "lt", "lv", "hr", "sl", "is", "da", "sv", "nb", "fi", "et", "ca", "eu"]
CASE_RULES = ["İSTANBUL İzmir ıiIİ", "STRASSE Straße GROẞ ß", "ΟΔΟΣ ΟΔΥΣΣΕΥΣ Σίσυφος σοφός.",
              "ﬁnance ﬂow ﬀ ﬃ ﬆ", "ＦＵＬＬ ｗｉｄｔｈ １２３", "Ⅻ ⅻ ⓐⓑ Ⓐ ㎏ ℌ ℵ ℃",
              "ǅungla ǈudevit ǋ", "ÅNGSTRÖM Å Ω K", "Ǆ ǆ ǉ", "ŉ ǰ ΐ ΰ և ẖ ẗ ẘ ẙ ẚ",
              "ﬓ ﬔ ﬕ ﬖ ﬗ", "ᾈ ᾏ ᾼ ῌ ῼ", "Ꭰ ꭰ Ᏸ ᏸ", "𐐀 𐐨 𞤀 𞤢", "Ё ё Й й Ї ї"]


def accents():
    rng = random.Random(2026_11_25)
    for text in CASE_RULES:
        yield text
        yield unicodedata.normalize("NFD", text)
    for locale in LATIN_ACCENTED:
        for path in sorted(glob.glob(f"/usr/share/locale/{locale}/LC_MESSAGES/*.mo")):
            for line in _catalog_texts(path):
                if any(ord(c) > 127 for c in line):
                    yield line if rng.random() < 0.5 else unicodedata.normalize("NFD", line)


EMOJI = ["😀", "😂", "🥲", "❤️", "❤", "👍", "👍🏽", "👍🏿", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪", "🇯🇵",
         "🇺🇳", "#️⃣", "1️⃣", "©️", "™", "☺︎", "🤷‍♀️", "🧑🏾‍🚀", "🐍", "🦀", "🔥", "✨", "🚀", "🎉",
         "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "👁️‍🗨️", "🫠", "🪿", "⌚", "⚡", "☕", "🀄", "🃏", "〰️", "‼️", "🔟", "🆗"]


def _english_lines():
    return [line for line in _take(prose(), 1 * MB) if 40 <= len(line) <= 400]


def emoji():
    rng = random.Random(1)
    lines = _english_lines()
    for i, line in enumerate(lines):
        words = line.split(" ")
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(words) + 1)
            mark = rng.choice(EMOJI) * rng.choice([1, 1, 1, 2, 3])
            if rng.random() < 0.5:  # glued to a word, as people type them
                at = min(at, len(words) - 1)
                words[at] = words[at] + mark
            else:
                words.insert(at, mark)
        yield " ".join(words)


INSERTED = (
    [chr(c) for c in range(1, 32) if c != 10] + [chr(0x7F)] + [chr(c) for c in range(0x80, 0xA0)] +
    ["\u00a0", "\u00ad", "\u034f", "\u061c", "\u115f", "\u1680", "\u180e", "\u2000", "\u2007",
     "\u200a", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2028", "\u2029", "\u202a",
     "\u202e", "\u202f", "\u205f", "\u2060", "\u2066", "\u2069", "\u3000", "\u3164", "\ufe0f",
     "\ufe00", "\ufeff", "\ufff9", "\ufffc", "\ufffd", "\u0000", "\ue000", "\uf8ff",
     "\U000f0000", "\U0010fffd", "\u0378", "\u0870", "\U0001fffe", "\uffff", "\U000e0001",
     "\U000e0041", "\U0001d173", "\U0001bca0"])


def control():
    rng = random.Random(2)
    lines = _english_lines()
    translated = list(_take(scripts(), 200_000))
    for line in lines + translated:
        chars = list(line)
        for _ in range(rng.randint(1, 5)):
            at = rng.randrange(len(chars) + 1)
            chars.insert(at, rng.choice(INSERTED))
        yield "".join(chars)


def _machine_long_runs():
    for path in sorted(glob.glob("/etc/ssl/certs/*.pem"))[:120]:
        body = "".join(l for l in _read(path).split("\n") if l and not l.startswith("-----"))
        for width in (64, 99, 100, 101, 150, 199, 200, 201, 400):
            yield body[:width]
    for path in sorted(glob.glob("/var/lib/dpkg/info/*.md5sums"))[:300]:
        for line in _read(path).split("\n")[:3]:
            if line:
                yield line
    urls = set()
    for path in sorted(glob.glob("/usr/share/doc/*/copyright"))[:800]:
        urls.update(re.findall(r"https?://\S+", _read(path)))
    yield from sorted(urls)


def _made_words(rng, words):
    for target in list(range(95, 106)) + list(range(195, 206)):
        for flavour in ("plain", "accent", "emoji", "hyphen", "upper"):
            word = ""
            while len(word) < target:
                word += rng.choice(words)
            word = word[:target]
            if flavour == "accent":
                word = word[:-3] + "éüñ"
            elif flavour == "emoji":
                word = word[:-1] + "😀"
            elif flavour == "hyphen":
                word = word[: target // 2] + "-" + word[target // 2 + 1:]
            elif flavour == "upper":
                word = word.upper()
            yield f"the word {word} is long"
            yield word
            yield unicodedata.normalize("NFD", word)


def long_words():
    rng = random.Random(3)
    words = sorted({w for line in _english_lines() for w in re.findall(r"[a-z]{4,}", line)})
    yield from _made_words(rng, words)
    yield from _machine_long_runs()
    german = []
    for path in sorted(glob.glob("/usr/share/locale/de/LC_MESSAGES/*.mo")):
        german += [w for line in _catalog_texts(path) for w in line.split() if len(w) >= 20]
    yield from sorted(set(german))


SPECIAL = ["[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[mask]", "[MASK", "MASK]"]


def special_tokens():
    """Real lines with literal special tokens, spaced and glued to words and
    punctuation ("x[MASK].", "[[SEP]]")."""
    rng = random.Random(4)
    for line in _english_lines():
        words = line.split(" ")
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(words))
            token = rng.choice(SPECIAL)
            glue = rng.choice(["{t}", "{w}{t}", "{t}{w}", "({t})", "{w}{t}.", "[{t}]"])
            words[at] = glue.format(t=token, w=words[at]) if "{w}" in glue else \
                words[at] + " " + glue.format(t=token)
        yield " ".join(words)


KINDS = {"prose": prose, "code": code, "scripts": scripts, "accents": accents, "emoji": emoji,
         "control": control, "long_words": long_words, "special_tokens": special_tokens}


def corpus():
    """[(kind, line)], about 12 MB of UTF-8."""
    out = []
    for kind, make in KINDS.items():
        out.extend((kind, line) for line in _take(make(), BUDGET[kind]))
    return out
