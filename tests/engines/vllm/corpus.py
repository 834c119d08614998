"""The verdict corpus: vLLM requests of every type, each with outputs (valid and invalid) and an
independent oracle (jsonschema, re, json) that says which outputs satisfy the request.

JSON schemas come from PyPI data, fetched once and cached in ~/.cache/xg2_plugin (as the main
suite's JSON tests do): the official JSON-Schema-Test-Suite (inside the jsonschema sdist of the
version installed here) and BFCL's function definitions (the bfcl-eval wheel, never imported)."""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from typing import Any, Callable, Dict, List, NamedTuple

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "xg2_plugin")


class Case(NamedTuple):
    name: str  # unique: what the list of known differences names
    params: Dict[str, Any]  # StructuredOutputsParams(**params)
    outputs: List[str]
    oracle: Callable[[str], bool]
    tools: bool = False  # needs the tokenizer with the tool-call tokens


# ----------------------------------------------------------------------------- PyPI data

def _pip_download(args: List[str], dest: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *args, "-d", dest],
                   check=True, capture_output=True, timeout=300)


def suite_dir() -> str:
    """draft2020-12 of the JSON-Schema-Test-Suite (the layout of examples/benchmark/common.py)."""
    import jsonschema
    from importlib.metadata import version

    v = version("jsonschema")
    dest = os.path.join(CACHE, "json-schema-test-suite", f"jsonschema-{v}", "draft2020-12")
    if not glob.glob(os.path.join(dest, "*.json")):
        with tempfile.TemporaryDirectory() as tmp:
            _pip_download(["--no-binary", ":all:", f"jsonschema=={v}"], tmp)
            with tarfile.open(glob.glob(os.path.join(tmp, "jsonschema-*.tar.gz"))[0]) as tar:
                for m in tar.getmembers():
                    if "/json/tests/draft2020-12/" in m.name and m.isfile() and "/optional/" not in m.name:
                        target = os.path.join(dest, m.name.split("/json/tests/draft2020-12/", 1)[1])
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        with tar.extractfile(m) as src, open(target, "wb") as out:
                            out.write(src.read())
    assert jsonschema  # (the oracle; imported here so a missing one fails early)
    return dest


def bfcl_wheel() -> zipfile.ZipFile:
    wheels = glob.glob(os.path.join(CACHE, "bfcl_eval-*.whl"))
    if not wheels:
        os.makedirs(CACHE, exist_ok=True)
        _pip_download(["--only-binary", ":all:", "bfcl-eval"], CACHE)
        wheels = glob.glob(os.path.join(CACHE, "bfcl_eval-*.whl"))
    return zipfile.ZipFile(sorted(wheels)[-1])


# ----------------------------------------------------------------------------- oracles

_ARR_KEYS = ("maxItems", "minItems", "uniqueItems", "contains", "minContains", "maxContains", "prefixItems")
_OBJ_KEYS = ("properties", "required", "minProperties", "maxProperties", "dependentRequired",
             "dependentSchemas", "dependencies")


def strict(schema):
    """The schema as vLLM's JSON requests read it: XGrammar's strict_mode (what vLLM passes), made
    explicit -- a schema that says it is an array (object): "type" names it, or it declares
    "prefixItems" ("properties"), and that uses array (object) keywords without saying what other
    items (properties) may be, allows none (names in "required" count as declared)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("enum", "const") else strict(v)) for k, v in schema.items()}
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: strict(v) for k, v in schema["properties"].items()}
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if (("array" in kinds or "prefixItems" in schema) and any(k in schema for k in _ARR_KEYS)
            and not any(k in schema for k in ("items", "additionalItems", "unevaluatedItems"))):
        out["unevaluatedItems"] = False
    if (("object" in kinds or "properties" in schema) and any(k in schema for k in _OBJ_KEYS)
            and not any(k in schema for k in ("additionalProperties", "unevaluatedProperties",
                                              "patternProperties"))):
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        out["properties"] = {**{r: True for r in required}, **out.get("properties", {})}
        out["unevaluatedProperties"] = False
    return out


def schema_oracle(schema, strict_mode: bool = True) -> Callable[[str], bool]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(strict(schema) if strict_mode else schema)

    def check(text: str) -> bool:
        try:
            return validator.is_valid(json.loads(text))
        except ValueError:
            return False
    return check


def regex_oracle(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern, re.ASCII)  # ASCII: \d \w as the engines read them
    return lambda text: compiled.fullmatch(text) is not None


def tags_oracle(tags, triggers=None, at_least_one=False) -> Callable[[str], bool]:
    """Structural tags: `tags` = [(begin, schema, end)]. With `triggers`, free text in which each
    trigger starts a tag; without, tags back to back only (tags_with_separator, separator "")."""
    decoder = json.JSONDecoder()
    checks = [(b, schema_oracle(s), e) for b, s, e in tags]

    def one_tag(text: str, pos: int):
        for begin, valid, end in checks:
            if text.startswith(begin, pos):
                try:
                    _, stop = decoder.raw_decode(text, pos + len(begin))
                except ValueError:
                    continue
                if valid(text[pos + len(begin):stop]) and text.startswith(end, stop):
                    return stop + len(end)
        return None

    def check(text: str) -> bool:
        pos, count = 0, 0
        while pos < len(text):
            starts = [i for i in (text.find(t, pos) for t in triggers or ()) if i >= 0]
            if triggers is not None:
                if not starts:
                    break
                pos = min(starts)
            pos = one_tag(text, pos)
            if pos is None:
                return False
            count += 1
        return count >= 1 or not at_least_one
    return check


# ----------------------------------------------------------------------------- JSON schemas

# keywords both backends implement (or claim to); each file's groups, as the suite has them
SUITE_FILES = ["type", "enum", "const", "properties", "required", "additionalProperties", "items",
               "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum",
               "exclusiveMinimum", "exclusiveMaximum", "anyOf", "allOf", "oneOf", "pattern",
               "patternProperties", "minProperties", "maxProperties", "uniqueItems", "multipleOf",
               "boolean_schema", "defs"]
GROUPS_PER_FILE = 3


def _local_refs_only(node) -> bool:
    if isinstance(node, dict):
        if any(k in node for k in ("$id", "$dynamicRef", "$anchor")):
            return False
        if isinstance(node.get("$ref"), str) and not node["$ref"].startswith("#"):
            return False
        return all(_local_refs_only(v) for k, v in node.items() if k not in ("enum", "const"))
    if isinstance(node, list):
        return all(_local_refs_only(v) for v in node)
    return True


def suite_cases() -> List[Case]:
    base = suite_dir()
    out = []
    for name in SUITE_FILES:
        groups = json.load(open(os.path.join(base, f"{name}.json"), encoding="utf-8"))
        taken = [g for g in groups if _local_refs_only(g["schema"])][:GROUPS_PER_FILE]
        for i, g in enumerate(taken):
            outputs = [json.dumps(t["data"]) for t in g["tests"]]
            out.append(Case(f"jsts/{name}/{i}", {"json": g["schema"]}, outputs, schema_oracle(g["schema"])))
    return out


_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


def _bfcl_schema(node):
    if isinstance(node, list):
        return [_bfcl_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _bfcl_schema(v) for k, v in node.items() if k not in ("optional", "default")}
    if node.get("type") == "any":
        out.pop("type")
    elif node.get("type") in _BFCL_TYPES:
        out["type"] = _BFCL_TYPES[node["type"]]
    return out


def bfcl_cases(count: int = 15) -> List[Case]:
    """BFCL functions' parameter schemas; outputs: the ground-truth call and mutations of it."""
    z = bfcl_wheel()
    funcs = z.read("bfcl_eval/data/BFCL_v4_simple_python.json").decode().splitlines()
    answers = z.read("bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json").decode().splitlines()
    out = []
    for line, ans in list(zip(funcs, answers))[::7]:
        fn = json.loads(line)["function"][0]
        truth = json.loads(ans)["ground_truth"][0].get(fn["name"])
        if truth is None:
            continue
        schema = _bfcl_schema(fn["parameters"])
        args = {k: next(v for v in vs if v != "") for k, vs in truth.items() if any(v != "" for v in vs)}
        if not args:
            continue
        first = next(iter(args))
        mutants = [args, {k: v for k, v in args.items() if k != first}, {**args, first: [args[first]]},
                   {**args, first: None}, {**args, "zz_extra": 1}, {**args, first: "x" * 3}]
        outputs = [json.dumps(m) for m in mutants] + [json.dumps(args)[:-1], json.dumps(args, indent=1)]
        out.append(Case(f"bfcl/{fn['name']}", {"json": schema}, outputs, schema_oracle(schema)))
        if len(out) == count:
            break
    return out


# ----------------------------------------------------------------------------- other request types

def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


JSON_OBJECT = ['{"a": 1}', "{}", '{"k": [1, 2.5, null], "s": "x y", "n": {"t": true}}', '{"u": "\\u00e9\\n"}',
               "[1]", '"x"', "1", '{"a": }', '{"a": 1,}', '{"a": 1} x', "{'a': 1}", '{"a": NaN}',
               '{"a": 01}', '{"a": "\x01"}', '{"a": 1', ""]

CHOICES = ["red", "green", "blue", 'a"b', "x|y", "\u00e9t\u00e9", "a.b"]
CHOICE_OUTPUTS = CHOICES + ["re", "redd", "Red", "", "x", "y", "a\\\"b", "ab", "aXb", "\u00e9", "green "]

# (pattern, outputs); the oracle is Python's re, ASCII classes
REGEXES = [
    (r"[a-z]{2,5}-\d{3}", ["abc-123", "ab-000", "abcdef-123", "a-123", "abc-12", "ABC-123", "abc-1234"]),
    (r"(foo|bar)+baz?", ["foo", "foobarba", "barbaz", "foobaz", "fooba", "baz", "fo", "foobazz"]),
    (r"[^,\n]{1,4}(,[^,\n]{1,4})*", ["a,b", "abcd,\u00e9\u00e9", "\u4e2d\u6587,x", "abcde", ",a", "a,",
                                      "a\nb", "a,,b"]),
    (r"\w+@\w+\.(com|org)", ["a@b.com", "x_1@y2.org", "a@b.net", "@b.com", "a@.com", "a b@c.com"]),
    (r"a{2,}b?", ["aa", "aaaab", "a", "ab", "aabb", "b"]),
    (r"(ab|a)(c|bcd)", ["abc", "abcd", "ac", "abbcd", "a", "abd"]),
    (r"[\u03b1-\u03c9]+[0-9]?", ["\u03b1\u03b2", "\u03c9\u03c97", "\u03b1", "a", "\u03b1\u03b277", "\u0391"]),
    (r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", ["0", "-12.50", "1.0", "01", "-", "1.", ".5", "--1"]),
    (r"\.\*\+\?\(\)", [".*+?()", "a*+?()", ".*+?(", ""]),
    (r"x(?:yz)?\s[A-F0-9]{2}", ["x 0A", "xyz\tFF", "xy 0A", "x0A", "x 0a", "xyz  FF"]),
]

# (grammar, the same language as a Python regex, outputs)
GRAMMARS = [
    ('root ::= "(" expr ")"\nexpr ::= [0-9]+ ("+" [0-9]+)*', r"\([0-9]+(\+[0-9]+)*\)",
     ["(1)", "(1+23)", "(12+3+45)", "()", "(1+)", "1+2", "(+1)", "(1)(2)"]),
    ('root ::= item ("," item)*\nitem ::= "a" | "bc" | [x-z]{1,2}', r"(a|bc|[x-z]{1,2})(,(a|bc|[x-z]{1,2}))*",
     ["a", "a,bc,xy", "zz,a", "b", "a,", "xyz", "a,,a", ""]),
    ('root ::= [^"\\\\]* "!"', r'[^"\\]*!', ["!", "hello!", "\u00e9\u00e9!", 'a"b!', "a\\b!", "abc", "a!b!"]),
    ('root ::= "x"? "y"+ "z"*', r"x?y+z*", ["y", "xyyzz", "yz", "x", "xz", "yx", "xyzy"]),
    ('start: "x" NUMBER ("," NUMBER)*\nNUMBER: /[0-9]+/', r"x[0-9]+(,[0-9]+)*",
     ["x1", "x12,3", "x", "x1,", "y1", "x1,,2"]),
    ('start: greeting NAME\ngreeting: "hi " | "hello "\nNAME: /[A-Z][a-z]+/', r"(hi |hello )[A-Z][a-z]+",
     ["hi Bob", "hello Alice", "hi bob", "hey Bob", "hello  Bob", "hi B"]),
    ('start: (A | B)+\nA: "ab"\nB: /c+/', r"(ab|c+)+", ["ab", "ccab", "abcab", "a", "abb", "", "cba"]),
]

TAG_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
              "required": ["city", "days"], "additionalProperties": False}
CALL = '{"city": "Paris", "days": 2}'
TAG_OUTPUTS = [f"hi <f>{CALL}</f>", "plain text, no call", f"<f>{CALL}</f> and <f>{{\"city\": \"Oslo\", \"days\": 3}}</f>",
               '<f>{"city": "Paris"}</f>', f"<f>{CALL}", "a <f>x</f>", '<f>{"city": "Paris", "days": 2.5}</f>',
               '<f>{"days": 2, "city": "Paris"}</f>', f"<f>{CALL}</f>x", f"<f> {CALL}</f>", "a < f> b", "<"]


def grammar_cases() -> List[Case]:
    out = [Case("json_object", {"json_object": True}, JSON_OBJECT, _is_object),
           Case("choice", {"choice": CHOICES}, CHOICE_OUTPUTS, lambda t: t in CHOICES)]
    out += [Case(f"regex/{i}", {"regex": p}, texts, regex_oracle(p)) for i, (p, texts) in enumerate(REGEXES)]
    out += [Case(f"{'lark' if 'start:' in g else 'ebnf'}/{i}", {"grammar": g}, texts, regex_oracle(r))
            for i, (g, r, texts) in enumerate(GRAMMARS)]
    legacy = {"structures": [{"begin": "<f>", "schema": TAG_SCHEMA, "end": "</f>"}], "triggers": ["<f>"]}
    fmt = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f>"], "tags": [
        {"type": "tag", "begin": "<f>", "content": {"type": "json_schema", "json_schema": TAG_SCHEMA}, "end": "</f>"}]}}
    oracle = tags_oracle([("<f>", TAG_SCHEMA, "</f>")], triggers=["<f>"])
    out += [Case("stag/legacy", {"structural_tag": json.dumps(legacy)}, TAG_OUTPUTS, oracle),
            Case("stag/triggered_tags", {"structural_tag": json.dumps(fmt)}, TAG_OUTPUTS, oracle)]
    return out


def format_tag_oracle(tag_json: str) -> Callable[[str], bool]:
    """The oracle of a `{"format": triggered_tags | tags_with_separator ""}` tag of JSON contents."""
    fmt = json.loads(tag_json)["format"]
    assert fmt["type"] in ("triggered_tags", "tags_with_separator") and not fmt.get("separator")
    assert not fmt.get("stop_after_first")
    tags = [(t["begin"], t["content"]["json_schema"], t["end"]) for t in fmt["tags"]]
    return tags_oracle(tags, triggers=fmt.get("triggers"), at_least_one=fmt.get("at_least_one", False))
