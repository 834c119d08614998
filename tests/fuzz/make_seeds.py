"""Regenerate tests/fuzz/seeds/ from the test data (run from the repository root):

    python tests/fuzz/make_seeds.py [--suite DIR]

Literals are read from the Python tests with ``ast`` (nothing is imported or run):
strings with ``::=`` are EBNF seeds, strings with a ``start:`` rule are Lark seeds,
the string arguments of ``from_regex``/``compile_regex`` and of the regex tables of
test_regex.py are regex seeds, and dict literals that look like schemas (a ``type``,
``properties``, ``$ref``... key) are JSON Schema seeds.  ``--suite`` adds the schemas of
a JSON-Schema-Test-Suite draft2020-12 directory (see test_json_schema_suite.py).  The
hand-written seeds (``hand_*``) are kept; generated ones (``t_*``) are replaced.
"""

import argparse
import ast
import glob
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "python")
SEEDS = os.path.join(HERE, "seeds")
MAX_BYTES = 2048  # small seeds keep executions fast; the fuzzer grows what it needs
PER_TARGET = 80
SCHEMA_KEYS = {"type", "properties", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "items",
               "pattern", "$defs", "prefixItems", "additionalProperties", "required"}


def _strings(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def _regex_args(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "from_regex", "compile_regex") and node.args and isinstance(node.args[0], ast.Constant):
            yield node.args[0].value


def _schemas(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            try:
                value = ast.literal_eval(node)
            except (ValueError, SyntaxError, TypeError, RecursionError):
                continue
            if isinstance(value, dict) and SCHEMA_KEYS & set(map(str, value)):
                try:
                    yield json.dumps(value)
                except (TypeError, ValueError):
                    continue


def collect(suite=None):
    found = {"ebnf": [], "lark": [], "regex": [], "json_schema": []}
    for path in sorted(glob.glob(os.path.join(TESTS, "*.py"))):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for s in _strings(tree):
            if "::=" in s and "root" in s:
                found["ebnf"].append(s)
            elif s.lstrip().startswith("start") and ":" in s:
                found["lark"].append(s)
        found["regex"].extend(x for x in _regex_args(tree) if isinstance(x, str))
        if os.path.basename(path) == "test_regex.py":
            found["regex"].extend(s for s in _strings(tree) if 0 < len(s) < 80 and "\n" not in s)
        found["json_schema"].extend(_schemas(tree))
    if suite:
        for path in sorted(glob.glob(os.path.join(suite, "*.json"))):
            for case in json.load(open(path, encoding="utf-8")):
                found["json_schema"].append(json.dumps(case["schema"]))
    return found


def write(target, texts):
    folder = os.path.join(SEEDS, target)
    os.makedirs(folder, exist_ok=True)
    for old in glob.glob(os.path.join(folder, "t_*")):
        os.remove(old)
    unique = list(dict.fromkeys(t.encode("utf-8") for t in texts))
    unique = [d for d in unique if d and len(d) <= MAX_BYTES]
    step = max(1, len(unique) // PER_TARGET)  # spread over every test file, not the first
    for data in unique[::step][:PER_TARGET]:
        name = "t_" + hashlib.sha1(data).hexdigest()[:12]
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return len(unique[::step][:PER_TARGET])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", help="a JSON-Schema-Test-Suite draft2020-12 directory")
    args = ap.parse_args()
    for target, texts in collect(args.suite).items():
        print(target, write(target, texts))


if __name__ == "__main__":
    main()
