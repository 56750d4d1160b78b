#!/usr/bin/env python3
"""Writes sentences.txt: real text that Debian 12 ships, one sentence a line,
for comparing polyhal with the reference libraries on a real model.

- English prose: the licence texts in /usr/share/common-licenses (base-files)
  and the explanations in perl's perldiag.pod, split into sentences.
- Other languages and scripts: glib's translated messages
  (/usr/share/locale/*/LC_MESSAGES/glib20.mo, libglib2.0-data), a few dozen
  per language, read with Python's gettext.

The selection is deterministic; the file is committed, so the tests do not
depend on the machine's copies. Run: python3 make_sentences.py
"""
import gettext
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
LICENCES = ["GPL-3", "Apache-2.0", "MPL-2.0", "GFDL-1.3", "LGPL-2.1", "Artistic", "GPL-2",
            "MPL-1.1", "GFDL-1.2", "CC0-1.0", "LGPL-3", "GPL-1"]
# perl-base's diagnostics: English explanations, one paragraph per message.
PERLDIAG = "/usr/share/perl/5.36/pod/perldiag.pod"
LANGUAGES = ["ru", "uk", "bg", "el", "he", "ar", "fa", "hi", "bn", "ta", "th", "ka", "hy", "ja",
             "zh_CN", "zh_TW", "ko", "de", "fr", "es", "pt_BR", "pl", "cs", "tr", "vi", "lt"]
ENGLISH, PER_LANGUAGE = 1100, 14


def prose():
    for name in LICENCES:
        with open(os.path.join("/usr/share/common-licenses", name), encoding="utf-8") as f:
            yield " ".join(f.read().split())
    with open(PERLDIAG, encoding="utf-8") as f:
        # Paragraphs that are explanations, not =item headings or code.
        for paragraph in f.read().split("\n\n"):
            if paragraph.startswith(("=", " ", "\t")):
                continue
            yield re.sub(r"[A-Z]<([^<>]*)>", r"\1", " ".join(paragraph.split()))


def english():
    seen, out = set(), []
    for text in prose():
        for sentence in re.split(r"(?<=[.!?;:])\s+", text):
            if 25 <= len(sentence) <= 300 and sentence not in seen:
                seen.add(sentence)
                out.append(sentence)
    return out[:ENGLISH]


def translated():
    out = []
    for language in LANGUAGES:
        path = f"/usr/share/locale/{language}/LC_MESSAGES/glib20.mo"
        catalog = gettext.GNUTranslations(open(path, "rb"))._catalog
        texts = sorted({" ".join(v.split()) for k, v in catalog.items()
                        if isinstance(k, str) and k and isinstance(v, str) and 20 <= len(v) <= 200
                        and "%" not in v})
        out.extend(texts[:PER_LANGUAGE])
    return out


def main():
    lines = english() + translated()
    with open(os.path.join(HERE, "sentences.txt"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line.replace("\t", " ") + "\n")
    print(f"wrote {len(lines)} sentences")


if __name__ == "__main__":
    main()
