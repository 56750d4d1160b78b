#!/usr/bin/env python3
"""Writes debian/libpolyhal0.1.symbols from a built libpolyhal, so that
dpkg-gensymbols fails the package build when a symbol of polyhal's ABI
disappears (an ABI break) and the file shows what was added.

  python3 scripts/update_symbols.py LIBPOLYHAL.so.X.Y.Z [VERSION]

What is listed, demangled ((c++) tags):
  - polyhal's own strong symbols: the ABI; their loss fails the build.
  - polyhal's weak symbols (inline functions and template instantiations
    the compiler chose to emit) as optional: a consumer has its own copy.
What one optional pattern covers instead of a list: instantiations of
other libraries' templates that libpolyhal emits (std, fmt, nlohmann,
protobuf, Boost, yaml-cpp, spdlog, oneTBB), polyhal::detail (the
library's inside, not for plugins), and protobuf's generated tables.
"""
import os
import re
import subprocess
import sys

THIRD_PARTY = r"(std|__gnu_cxx|__cxxabiv1|nlohmann|fmt|google|boost|YAML|spdlog|tbb|icu_\d+|tensorflow|tensorflow_)"
JSON_ABI = re.compile(r"json_abi_v3_[0-9_]+")
PATTERNS = [
    # Another library's templates, instantiated here (any return type or prefix).
    (f'(c++|regex|optional)"^([^(]*[ ,<])?{THIRD_PARTY}::"', "instantiations of other libraries"),
    ('(c++|regex|optional)"polyhal::detail::"', "polyhal::detail, the library's inside"),
    # The same with a decltype(...) return type, which the pattern above
    # cannot see past.
    (f'(c++|regex|optional)"^decltype .* {THIRD_PARTY}::"', "instantiations of other libraries"),
    # C++20 constrained std members (requires-clauses in the name), which
    # binutils 2.40 does not demangle: matched mangled.
    ('(regex|optional)"^_ZNK?St"', "std members, mangled"),
    # The type information of the lambdas each config key holds in a
    # std::function: numbered by the compiler (GCC 12 and 14 differ).
    ('(c++|regex|optional)"^typeinfo (name )?for polyhal::SectionKeys<"',
     "config keys' lambdas, numbered by the compiler"),
    # polyhal's own function templates, instantiated where they are used:
    # whether one is emitted or inlined is the compiler's choice (GCC 14
    # emits record_training_outcome<PretrainResult>, GCC 12 inlines it).
    ('(c++|regex|optional)"^(void |bool |[^ (]+ )?polyhal::[A-Za-z_]+<[^(]*>\\("',
     "polyhal's function templates, emitted or inlined as the compiler chooses"),
    # The members of a class's private implementation (pimpl: ServedModel::
    # Impl, ...), which the compiler may emit weak where it does not inline
    # them (GCC 14 does, GCC 12 not): the library's inside, never called
    # from outside.
    ('(c++|regex|optional)"polyhal::[A-Za-z_]+::Impl::"', "pimpl members, the library's inside"),
    ('(regex|optional)"^_Z[0-9]+descriptor_table_"', "protobuf's generated tables"),
    ('(c++|regex|optional)"^TableStruct_proto_"', "protobuf's generated tables"),
]


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    library, version = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "0.1.0"
    nm = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True,
                        check=True).stdout.splitlines()
    symbols = []
    for line in nm:
        parts = line.split()
        if len(parts) == 3:
            symbols.append((parts[2], parts[1]))
    names = demangle([s for s, _ in symbols])
    covered = [re.compile(p.split('"')[1]) for p, _ in PATTERNS]
    lines = []
    for (mangled, kind), name in zip(symbols, names):
        if any(c.search(name) or c.search(mangled) for c in covered):
            continue
        if name == mangled and not mangled.startswith("_Z"):
            lines.append(f" {mangled}@Base {version}")  # C symbols (plugin entry helpers)
            continue
        tag = "(c++|optional)" if kind in ("W", "V", "u") else "(c++)"
        if JSON_ABI.search(name):
            # nlohmann/json's inline ABI namespace names its release
            # (json_abi_v3_11_2 on Debian 12, _3 on Debian 13): the same
            # symbol on either, matched by a pattern that still fails the
            # build when it disappears.
            # Up to the first json type: its template arguments differ too
            # (3.11.3 added one), so the rest of the signature is not matched.
            head = name[:JSON_ABI.search(name).start()]
            pattern = re.escape(head) + JSON_ABI.pattern + "::basic_json<.*"
            tag = tag.replace("(c++", "(c++|regex")
            lines.append(f' {tag}"^{pattern.replace(chr(34), chr(92) + chr(34))}@Base$" {version}')
            continue
        quoted = name.replace('"', '\\"')
        lines.append(f' {tag}"{quoted}@Base" {version}')
    soname = os.path.basename(library)
    soname = re.sub(r"(\.so\.\d+\.\d+)\.\d+$", r"\1", soname)
    package = "libpolyhal" + soname.split(".so.")[1]
    header = [f"{soname} {package} #MINVER#", "* Build-Depends-Package: polyhal-dev"]
    header += [f" {p} {version}" for p, _ in PATTERNS]
    path = os.path.join(os.path.dirname(__file__), "..", "debian", f"{package}.symbols")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(header + sorted(lines)) + "\n")
    strong = sum(1 for l in lines if l.startswith(' (c++)"'))
    print(f"{path}: {len(lines)} symbols listed ({strong} strong), {len(symbols) - len(lines)} "
          f"covered by {len(PATTERNS)} optional patterns")


if __name__ == "__main__":
    main()
