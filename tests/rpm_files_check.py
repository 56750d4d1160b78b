#!/usr/bin/env python3
"""The RPM spec's %files lists against what `cmake --install` installs, as
rpmbuild's own check would judge them, without a second build: every
installed file belongs to exactly one package, and every listed path
matches something installed. The installed tree is the Debian package
build's (debian/tmp), with Debian's multiarch library directory read as
the RPM's %{_libdir}. scripts/rpm-check.sh does the real rpmbuild -bb.

  rpm_files_check.py SPEC INSTALLED_ROOT MULTIARCH
"""
import fnmatch
import os
import subprocess
import sys


def spec_entries(spec):
    """(package, pattern, is_dir_only) for each absolute path of %files."""
    text = subprocess.run(["rpmspec", "-P", spec], capture_output=True, text=True,
                          check=True).stdout
    entries, package = [], None
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0].startswith("%") and not words[0].startswith(("%dir", "%doc", "%license",
                                                                 "%config", "%attr")):
            package = " ".join(words[1:]) or "main" if words[0] == "%files" else None
            continue
        if package is None:
            continue
        directives = [w for w in words if w.startswith("%")]
        paths = [w for w in words if w.startswith("/")]
        for path in paths:
            entries.append((package, path, "%dir" in directives))
    return entries


def spec_installs(spec):
    """What the spec's %install adds beyond `cmake --install` (the systemd
    unit): the destination of each `install -D... SOURCE %{buildroot}PATH`."""
    text = subprocess.run(["rpmspec", "-P", spec], capture_output=True, text=True,
                          check=True).stdout
    paths = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "install" and words[1].startswith("-D"):
            after = words[-1].split("/BUILDROOT/", 1)[1]
            paths.append("/" + after.split("/", 1)[1])
    return paths


def installed_files(root, multiarch):
    files = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = "/" + os.path.relpath(os.path.join(folder, name), root)
            path = path.replace(f"/usr/lib/{multiarch}/", "/usr/lib64/")
            # Man pages: rpm's brp-compress compresses them, the patterns end in *.
            files.append(path)
    return sorted(files)


def covers(pattern, path):
    if fnmatch.fnmatchcase(path, pattern):
        return True
    parent = os.path.dirname(path)
    while parent != "/":
        if fnmatch.fnmatchcase(parent, pattern):
            return True
        parent = os.path.dirname(parent)
    return False


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    spec, root, multiarch = sys.argv[1:]
    entries = spec_entries(spec)
    problems = []
    files = sorted(installed_files(root, multiarch) + spec_installs(spec))
    for path in files:
        owners = sorted({pkg for pkg, pattern, dir_only in entries
                         if not dir_only and covers(pattern, path)})
        if not owners:
            problems.append(f"installed but in no %files list (rpmbuild fails): {path}")
        elif len(owners) > 1:
            problems.append(f"in more than one package ({', '.join(owners)}): {path}")
    for pkg, pattern, dir_only in entries:
        if not any(covers(pattern, f) for f in files):
            problems.append(f"%files {pkg} lists {pattern}, which nothing installs (rpmbuild fails)")
    for problem in problems:
        print(f"{spec}: {problem}")
    if problems:
        sys.exit(1)
    print(f"{spec}: %files of {len({e[0] for e in entries})} packages cover the {len(files)} installed files")


if __name__ == "__main__":
    main()
