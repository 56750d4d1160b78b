#!/usr/bin/env python3
"""The model side's guards (issue 68): each concept read in one place.

1. A tokenizer's kind is named only in the text layer (core/src/text, its
   header polyhal/app/wordpiece_tokenizer.hpp) and the text layer's own
   tests and fuzz targets; everything else holds a `Tokenizer`.
2. A model directory's JSON files (config.json, modules.json,
   1_Pooling/config.json, sentence_bert_config.json) and tokenizer files
   (vocab.txt, tokenizer.json, tokenizer_config.json) are named only in
   core/src/model, core/src/plan and core/src/text.
3. A family is named (`ModelType::groupbert`, `"groupbert"`, a
   `groupbert()` branch) only in its file and the registry,
   core/src/model/families/; the rest of core, the launcher and the plugins
   ask the family of a BertConfig (families/model_family.hpp).

4. A model's JSON files are opened (read_json_object, read_json_value,
   parse_json_input) in three files of core/src: model/bert_config.cpp
   (config.json), model/sentence_modules.cpp (modules.json, 1_Pooling/,
   sentence_bert_config.json) and text/tokenizer_files.cpp (tokenizer.json,
   tokenizer_config.json). The other JSON readers of model/, plan/ and text/
   read files that are not a model's settings (a safetensors header, its
   shard index, polyhal's int8 scales) and are listed by name.

5. The text layer and the serving core (core/src/text, core/src/serving)
   never include a task: no "tasks/..." header and no task's polyhal/app/
   header (the layers test orders them below the tasks; this names it).

Rule 2 carried an allow-list of the files that still broke it while the
model card moved; it is empty now and may only stay so.
Prints each finding; exits 1 when there is one.

  python3 scripts/check_model_side.py [ROOT]
  python3 scripts/check_model_side.py --self-test
"""
import os
import re
import sys

CONCRETE_TOKENIZER = re.compile(
    r"\bWordPieceTokenizer\b|\bPipelineTokenizer\b|wordpiece_tokenizer\.hpp|pipeline_tokenizer\.hpp")
MODEL_FILES = re.compile(
    r'"(config\.json|modules\.json|sentence_bert_config\.json|vocab\.txt|tokenizer\.json|'
    r'tokenizer_config\.json)"|1_Pooling')
FAMILY_NAME = re.compile(r'\bgroupbert\(\)|\bModelType::\w+|"groupbert"')

TOKENIZER_HOME = ("core/src/text/", "core/include/polyhal/app/wordpiece_tokenizer.hpp",
                  "tests/tokenizer_test.cpp", "tests/real_model_test.cpp",
                  "tests/tools/tokenize_lines.cpp", "fuzz/fuzz_tokenizer.cpp",
                  "fuzz/fuzz_tokenizer_files.cpp")
MODEL_FILES_HOME = ("core/src/model/", "core/src/plan/", "core/src/text/")
# Still reading a model directory's files outside the model card's rooms.
MODEL_FILES_ALLOWED = set()
# The families' files and the registry, and the ModelType enum they index.
FAMILY_HOME = ("core/src/model/families/", "core/include/polyhal/app/bert_config.hpp")
FAMILY_RULED = ("core/", "launcher/", "plugins/")

JSON_READER = re.compile(r"\b(read_json_object|read_json_value|parse_json_input)\s*\(")
JSON_RULED = ("core/src/model/", "core/src/plan/", "core/src/text/")
MODEL_JSON_OPENERS = {
    "core/src/model/bert_config.cpp",       # config.json
    "core/src/model/sentence_modules.cpp",  # modules.json, 1_Pooling/, sentence_bert_config.json
    "core/src/text/tokenizer_files.cpp",    # tokenizer.json, tokenizer_config.json
}
OTHER_JSON_READERS = {
    "core/src/model/safetensors.cpp",        # a weights file's header
    "core/src/model/safetensors_index.cpp",  # a sharded model's weight map
    "core/src/model/int8_scales.cpp",        # polyhal's calibrated scales
}

BELOW_TASKS = ("core/src/text/", "core/src/serving/")
TASK_INCLUDE = re.compile(
    r'#\s*include\s+"(tasks/[^"]+|polyhal/app/(task|pretrain_task|finetune_task|inference_task|'
    r'matmul_bench|run_outputs)\.hpp)"')

SOURCES = ("core", "launcher", "plugins", "tests", "fuzz", "bench", "tools")


def findings(files):
    """files: {relative path: text}. Returns the problems, one line each."""
    out = []
    breaking_model = set()
    for rel, text in sorted(files.items()):
        if not rel.endswith((".cpp", ".hpp", ".h", ".cc")):
            continue
        if CONCRETE_TOKENIZER.search(text) and not rel.startswith(TOKENIZER_HOME):
            out.append(f"{rel}: names a tokenizer's kind; hold a Tokenizer "
                       "(polyhal/app/tokenizer.hpp) and open it with open_tokenizer")
        if rel.startswith("core/src/"):
            if MODEL_FILES.search(text) and not rel.startswith(MODEL_FILES_HOME):
                breaking_model.add(rel)
                if rel not in MODEL_FILES_ALLOWED:
                    out.append(f"{rel}: names a model directory's file; only model/, plan/ and "
                               "text/ read them (the model card)")
        if (rel.startswith(JSON_RULED) and JSON_READER.search(text)
                and rel not in MODEL_JSON_OPENERS | OTHER_JSON_READERS):
            out.append(f"{rel}: opens a JSON file; a model's JSON files are opened in "
                       f"{', '.join(sorted(MODEL_JSON_OPENERS))} only")
        if rel.startswith(BELOW_TASKS) and TASK_INCLUDE.search(text):
            out.append(f"{rel}: includes a task ({TASK_INCLUDE.search(text).group(1)}); the text "
                       "layer and the serving core sit below the tasks")
        if (FAMILY_NAME.search(text) and rel.startswith(FAMILY_RULED)
                and not rel.startswith(FAMILY_HOME)):
            out.append(f"{rel}: names a model family; a family's rules live in its file under "
                       "core/src/model/families/ (ask families::model_family(config.model_type))")
    for rel in sorted(MODEL_FILES_ALLOWED - breaking_model):
        if rel in files:
            out.append(f"{rel}: no longer names a model file: take it off MODEL_FILES_ALLOWED")
    return out


def read_tree(root):
    files = {}
    for top in SOURCES:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if rel.endswith((".cpp", ".hpp", ".h", ".cc")):
                    with open(path, encoding="utf-8", errors="replace") as f:
                        files[rel] = f.read()
    return files


def self_test():
    """Each rule fails on a planted violation and passes the tree's own."""
    clean = {rel: '"config.json"\n' for rel in MODEL_FILES_ALLOWED}
    clean.update({rel: "read_json_object(file)" for rel in MODEL_JSON_OPENERS})
    planted = {
        "core/src/serving/x.cpp": "const WordPieceTokenizer& t;",
        "core/src/tasks/y.cpp": 'dir / "tokenizer.json"',
        "core/src/data/z.cpp": "if (model.groupbert()) {}",
        "plugins/ipu/w.cpp": "c.model_type == ModelType::groupbert",
        "launcher/v.cpp": 'name == "groupbert"',
        "core/src/plan/u.cpp": 'detail::read_json_object(dir / name, 1 << 20, "x")',
        "core/src/serving/t.cpp": '#include "tasks/inference/inference_section.hpp"',
        "core/src/text/s.cpp": '#include "polyhal/app/inference_task.hpp"',
    }
    wrong = []
    if findings(clean):
        wrong.append(f"the allowed tree fails: {findings(clean)}")
    for rel, text in planted.items():
        got = findings({**clean, rel: text})
        if len(got) != 1 or not got[0].startswith(rel):
            wrong.append(f"planted {rel}: {got}")
    allowed = {"core/src/text/wordpiece_tokenizer.cpp": "WordPieceTokenizer",
               "core/src/model/families/groupbert.cpp": "groupbert()",
               "core/src/model/families/registry.cpp": "ModelType::bert",
               "tests/groupbert_golden_test.cpp": "ModelType::groupbert",
               "core/src/plan/model_plan.cpp": '"config.json"'}
    if findings({**clean, **allowed}):
        wrong.append(f"a rule fires in its own rooms: {findings({**clean, **allowed})}")
    print(f"check_model_side self-test: {'ok' if not wrong else wrong}")
    return 1 if wrong else 0


def main():
    root = os.path.abspath(next((a for a in sys.argv[1:] if not a.startswith("--")),
                                os.path.join(os.path.dirname(__file__), "..")))
    problems = findings(read_tree(root))
    for p in problems:
        print(p)
    print(f"check_model_side: {len(problems)} finding(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(self_test() if "--self-test" in sys.argv else main())
