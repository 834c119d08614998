"""Regenerate tests/fuzz/seeds/ from the test data (run from the repository root):

    python tests/fuzz/make_seeds.py [--suite DIR]

Literals are read from the Python tests with ``ast`` (nothing is imported or run):
strings with ``::=`` are EBNF seeds, strings with a ``start:`` rule are Lark seeds,
the string arguments of ``from_regex``/``compile_regex`` and of the regex tables of
test_regex.py are regex seeds, and dict literals that look like schemas (a ``type``,
``properties``, ``$ref``... key) are JSON Schema seeds.  ``--suite`` adds the schemas of
a JSON-Schema-Test-Suite draft2020-12 directory (see test_json_schema_suite.py).  The
hand-written seeds (``hand_*``) are kept; generated ones (``t_*``) are replaced.

Structural-tag seeds: the dict literals of the structural-tag tests whose ``type`` is a
format type (names bound to literals at a test module's top level are resolved), and
the tags ``get_model_structural_tag`` makes for every built-in family with 1-3 small
tools (this part imports ``xg2_plugin``).
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


def _module_literals(tree):
    """Top-level ``NAME = <literal>`` of a module (what its dict literals refer to)."""
    env = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                env[node.targets[0].id] = _eval(node.value, env)
            except Exception:  # not a literal (a call, a comprehension...): skipped
                continue
    return env


def _eval(node, env):
    """A literal expression that may name earlier literals (``{**JS, "any_order": True}``)."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Call, ast.Attribute, ast.Lambda, ast.comprehension, ast.Subscript)):
            raise ValueError("not a literal")
    return eval(compile(ast.Expression(node), "<seed>", "eval"), {"__builtins__": {}}, dict(env))


def _tags(tree, kinds):
    env = _module_literals(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            try:
                value = _eval(node, env)
            except Exception:
                continue
            if isinstance(value, dict) and value.get("type") in kinds:
                yield json.dumps(value, ensure_ascii=False)


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
]


def structural_tags():
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    from xg2_plugin.structural_tag.formats import FORMAT_TYPES
    from xg2_plugin.structural_tag.model_formats import _REGISTRY, get_model_structural_tag

    found = []
    for path in sorted(glob.glob(os.path.join(TESTS, "test_*tag*.py"))):
        found.extend(_tags(ast.parse(open(path, encoding="utf-8").read()), set(FORMAT_TYPES) | {"structural_tag"}))
    for family in sorted(_REGISTRY):
        calls = [(TOOLS[:n], {}) for n in (1, 2, 3)]
        calls.append((TOOLS[:1], {"tool_choice": "required", "reasoning": "disabled"}))
        for tools, kwargs in calls:
            tag = get_model_structural_tag(family, tools, **kwargs)
            found.append(json.dumps(tag.model_dump(exclude_none=True), separators=(",", ":"),
                                    ensure_ascii=False))
    return found


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


def write(target, texts, per_target=PER_TARGET, max_bytes=MAX_BYTES):
    folder = os.path.join(SEEDS, target)
    os.makedirs(folder, exist_ok=True)
    for old in glob.glob(os.path.join(folder, "t_*")):
        os.remove(old)
    unique = list(dict.fromkeys(t.encode("utf-8", "surrogatepass") for t in texts))
    unique = [d for d in unique if d and len(d) <= max_bytes]
    step = max(1, len(unique) // per_target)  # spread over every test file, not the first
    for data in unique[::step][:per_target]:
        name = "t_" + hashlib.sha1(data).hexdigest()[:12]
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return len(unique[::step][:per_target])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", help="a JSON-Schema-Test-Suite draft2020-12 directory")
    ap.add_argument("--target", help="regenerate only this target's seeds")
    args = ap.parse_args()
    for target, texts in collect(args.suite).items():
        if args.target in (None, target):
            print(target, write(target, texts))
    if args.target in (None, "structural_tag"):
        # every family's tags and every test literal (the target's -max_len is 4096)
        print("structural_tag", write("structural_tag", structural_tags(), per_target=400, max_bytes=4096))


if __name__ == "__main__":
    main()
