#!/usr/bin/env python3
"""The include-order test: every #include in core/, launcher/ and plugins/
must go down the layers that docs/architecture.md declares (its ```layers
block: one line per layer, lowest first, with its folders and the
polyhal/app/ headers it implements). A file may include its own layer and
the layers before it; plugins may include the contract only. Two rules
more (issue 51): `config` is the layer right below `plan`, so that nothing
below the plan (train, data, report, ...) includes the config headers: they
take settings structs the plan fills; and a task folder under
core/src/tasks/ never includes another task's folder (what tasks share sits
in core/src/tasks/ itself). Prints each include against the order and
exits 1 when there is one.

  python3 scripts/check_layers.py [ROOT]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_layers():
    """[(name, [folders], [app headers])] from the ```layers block, lowest first."""
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    if not block:
        sys.exit("docs/architecture.md has no ```layers block")
    layers = []
    for line in block.group(1).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        folders = [w for w in words[1:] if not w.startswith("polyhal/")]
        headers = [w for w in words[1:] if w.startswith("polyhal/")]
        layers.append((words[0], folders, headers))
    return layers


def other_task_folder(rel, target):
    """The other task folder `target` lies in, when `rel` is in a task folder
    (core/src/tasks/NAME/...) and includes a file of another one; else None."""
    parts = rel.split("/")
    if len(parts) < 5 or parts[:3] != ["core", "src", "tasks"]:
        return None
    mine = parts[3]
    if target.startswith("tasks/"):
        path = target.split("/")
    else:  # beside the includer, or ../other/x.hpp
        path = os.path.normpath(os.path.join(*parts[2:4], target)).split(os.sep)
    if len(path) >= 3 and path[0] == "tasks" and path[1] != mine:
        return path[1]
    return None


def main():
    layers = read_layers()
    rank = {name: i for i, (name, _, _) in enumerate(layers)}
    problems = []
    if "plan" not in rank or "config" not in rank or rank["config"] != rank["plan"] - 1:
        problems.append("docs/architecture.md: the config layer must come right below plan: "
                        "the layers below the plan take settings structs, never config sections")
    folder_layer, header_layer = {}, {}
    for name, folders, headers in layers:
        for f in folders:
            folder_layer[f.rstrip("/")] = name
        for h in headers:
            header_layer[h] = name
    app_dir = os.path.join(ROOT, "core", "include", "polyhal", "app")
    for h in sorted(os.listdir(app_dir)):
        if "polyhal/app/" + h not in header_layer:
            problems.append(f"core/include/polyhal/app/{h}: in no layer of docs/architecture.md")

    def layer_of_file(rel):
        parts = rel.split("/")
        for n in range(len(parts) - 1, 0, -1):
            folder = "/".join(parts[:n])
            if folder in folder_layer:
                return folder_layer[folder]
        return None

    def layer_of_include(target, rel):
        if target.startswith("polyhal/app/"):
            return header_layer.get(target)
        if target.startswith("polyhal/"):
            return "contract"
        first = target.split("/")[0]
        if "/" in target and os.path.isdir(os.path.join(ROOT, "core", "src", first)):
            return layer_of_file("core/src/" + target)
        if rel.startswith("launcher/") and os.path.exists(os.path.join(ROOT, "launcher", target)):
            return layer_of_file("launcher/" + target)  # the launcher's include directory
        return layer_of_file(os.path.join(os.path.dirname(rel), target))  # beside the includer

    for top in ("core", "launcher", "plugins"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".hpp")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                plugin = rel.startswith("plugins/")
                if plugin:
                    mine = "contract"
                elif rel.startswith("core/include/polyhal/app/"):
                    mine = header_layer.get("polyhal/app/" + f)
                else:
                    mine = layer_of_file(rel)
                if mine is None:
                    problems.append(f"{rel}: in no layer of docs/architecture.md")
                    continue
                with open(os.path.join(dirpath, f), encoding="utf-8") as source:
                    for number, line in enumerate(source, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if plugin and not target.startswith("polyhal/"):
                            continue  # the plugin's own files
                        other = other_task_folder(rel, target)
                        if other:
                            problems.append(f"{rel}:{number}: a task folder includes {target} of "
                                            f"task folder {other}: move what they share to "
                                            "core/src/tasks/")
                        theirs = layer_of_include(target, rel)
                        if theirs is None:
                            problems.append(f"{rel}:{number}: includes {target}, in no layer")
                        elif rank[theirs] > rank[mine]:
                            who = "a plugin" if plugin else f"layer {mine}"
                            problems.append(f"{rel}:{number}: {who} includes {target} of layer {theirs}")
    for p in problems:
        print(p)
    print(f"check_layers: {len(problems)} include(s) against the order of {len(layers)} layers")
    return 1 if problems else 0


def self_test():
    """The task-folder rule sees both spellings of another folder's file."""
    cases = {
        ("core/src/tasks/a/y.cpp", "tasks/b/x.hpp"): "b",
        ("core/src/tasks/a/y.cpp", "../b/x.hpp"): "b",
        ("core/src/tasks/a/y.cpp", "tasks/a/x.hpp"): None,
        ("core/src/tasks/a/y.cpp", "x.hpp"): None,
        ("core/src/tasks/y.cpp", "tasks/b/x.hpp"): None,
    }
    wrong = {k: other_task_folder(*k) for k, v in cases.items() if other_task_folder(*k) != v}
    print(f"check_layers self-test: {'ok' if not wrong else wrong}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(self_test() if "--self-test" in sys.argv else main())
