"""A pool of real tool definitions with ground-truth arguments, from the Berkeley Function
Calling Leaderboard's data (the `bfcl-eval` package: `pip install --no-deps bfcl-eval`; its
dependencies are not needed, only its data files are read, and the package is never imported).

BFCL writes parameters in its own dialect of JSON Schema ("dict", "float", "tuple", "any");
`to_json_schema` turns them into standard JSON Schema, as an engine receives them through the
OpenAI API. A function enters the pool when its ground-truth call (the first acceptable value of
each argument) validates against its converted schema.
"""

from __future__ import annotations

import importlib.util
import json
import os
from typing import Any, Dict, List

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "int": "integer", "bool": "boolean",
          "str": "string", "list": "array"}


def data_dir() -> str:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the BFCL data is missing: pip install --no-deps bfcl-eval")
    return os.path.join(list(spec.submodule_search_locations)[0], "data")


def to_json_schema(node: Any) -> Any:
    """BFCL's parameter dialect to standard JSON Schema (descriptions kept)."""
    if isinstance(node, list):
        return [to_json_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: Dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            out[key] = _TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = to_json_schema(value)
        elif key in ("default", "optional"):
            continue  # BFCL's defaults are Python values, sometimes of another type
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" in out and "required" in out:
        out["required"] = [r for r in out["required"] if r in out["properties"]]
    return out


def _ground_truth_args(answer: Dict[str, List[Any]]) -> Dict[str, Any]:
    args = {}
    for name, values in answer.items():
        value = next((v for v in values if v != ""), "")
        if value != "":
            args[name] = value
    return args


def load_pool(size: int = 100, category: str = "simple_python") -> List[Dict[str, Any]]:
    """The first `size` functions of a BFCL category whose ground-truth call is valid:
    `{"name", "description", "parameters", "arguments"}` (OpenAI function shape + a call)."""
    import jsonschema

    base = data_dir()
    questions = [json.loads(line) for line in open(os.path.join(base, f"BFCL_v4_{category}.json"))]
    answers = {a["id"]: a for a in
               (json.loads(line) for line in open(os.path.join(base, "possible_answer", f"BFCL_v4_{category}.json")))}
    pool, seen = [], set()
    for q in questions:
        if q["id"] not in answers or len(q["function"]) != 1:
            continue
        fn = q["function"][0]
        (name, answer), = answers[q["id"]]["ground_truth"][0].items()
        if name != fn["name"] or name in seen:
            continue
        params = to_json_schema(fn["parameters"])
        args = _ground_truth_args(answer)
        try:
            jsonschema.validate(args, params)
        except jsonschema.ValidationError:
            continue
        seen.add(name)
        pool.append({"name": name, "description": fn.get("description", ""), "parameters": params,
                     "arguments": args})
        if len(pool) == size:
            break
    return pool


if __name__ == "__main__":
    p = load_pool()
    print(len(p), "functions;", sum(len(json.dumps(f["parameters"])) for f in p), "bytes of schemas")
