"""A held-out schema set (outside MaskBench's development set), written in MaskBench format
so that ``speed.py --data DIR`` times it against the other engines.

* the ordinary schemas of the hardening issue: ``multipleOf: 1.0`` inside an object, an
  unanchored ``patternProperties`` key pattern with other keys free;
* real Kubernetes object schemas from the ``kubernetes-validate`` package (PyPI): each
  resource file made self-contained (its ``$ref``s into ``_definitions.json`` point at a
  ``$defs`` section holding every definition it reaches), with a valid minimal instance, a
  valid richer one where one is written here, and invalid ones (a wrong type, a missing
  required field), every verdict checked with ``jsonschema`` before it is written.

    pip install kubernetes-validate==1.37.0 --no-deps
    python examples/benchmark/heldout.py --out /tmp/heldout --kubernetes 40
    python examples/benchmark/speed.py --data /tmp/heldout --engines xg2,llguidance --repeat 3
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

KUBE_VERSION = "v1.37.0-local"

ORDINARY: Dict[str, Tuple[Any, List[Tuple[Any, bool]]]] = {
    "multipleof_1_0": (
        {"type": "object", "properties": {"count": {"type": "number", "multipleOf": 1.0},
                                          "name": {"type": "string"}},
         "required": ["count"]},
        [({"count": 3, "name": "a"}, True), ({"count": 1200}, True), ({"count": -7.0}, True),
         ({"count": 2.5}, False), ({"name": "x"}, False)],
    ),
    "pattern_properties_unanchored": (
        {"type": "object", "patternProperties": {"[0-9a-f]{32}": {"type": "null"}}},
        [({"0123456789abcdef0123456789abcdef": None, "other": 5}, True),
         ({"id-0123456789abcdef0123456789abcdef-x": None}, True),
         ({"plain": [1, 2, {"a": "b"}], "n": 1.5}, True),
         ({"0123456789abcdef0123456789abcdef": 1}, False),
         ({"x0123456789abcdef0123456789abcdefx": "s"}, False)],
    ),
}

# Richer valid instances for well-known kinds (the minimal ones say little about tokens).
RICH = {
    "deployment-apps-v1": {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "frontend"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                                       "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                                       "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                                                       "env": [{"name": "MODE", "value": "prod"}]}]}}},
    },
    "service-v1": {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
                 "type": "ClusterIP"},
    },
    "configmap-v1": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                     "data": {"a.conf": "x=1\ny=2\n", "mode": "fast"}},
    "pod-v1": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"k": "v"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "sleep 10"],
                                 "volumeMounts": [{"name": "d", "mountPath": "/data"}]}],
                 "volumes": [{"name": "d", "emptyDir": {}}], "restartPolicy": "Never"},
    },
}


def kube_archive():
    """The schema folder of kubernetes-validate, read from the installed package."""
    import importlib.util

    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("kubernetes-validate is not installed: pip install kubernetes-validate==1.37.0 --no-deps")
    return os.path.join(list(spec.submodule_search_locations)[0], "kubernetes-json-schema", KUBE_VERSION)


def self_contained(schema: Any, defs: Dict[str, Any]) -> Dict[str, Any]:
    """The schema with its external refs turned local and the definitions they reach."""
    prefix = "/api/_definitions.json#/$defs/"  # (inside the definitions: "#/$defs/NAME")

    def localise(node: Any, seen: set, todo: List[str]) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str) and v.startswith((prefix, "#/$defs/")):
                    name = v.split("/")[-1]
                    if name not in seen:
                        seen.add(name)
                        todo.append(name)
                    out[k] = "#/$defs/" + name
                elif k in ("$id", "x-kubernetes-group-version-kind"):
                    continue
                else:
                    out[k] = localise(v, seen, todo)
            return out
        if isinstance(node, list):
            return [localise(v, seen, todo) for v in node]
        return node

    seen: set = set()
    todo: List[str] = []
    root = localise(schema, seen, todo)
    out_defs = {}
    while todo:
        name = todo.pop()
        out_defs[name] = localise(defs[name], seen, todo)
    if out_defs:
        root["$defs"] = out_defs
    return root


def minimal(schema: Any, root: Dict[str, Any], depth: int = 0) -> Any:
    """A small instance: required properties only, the first enum value, short strings."""
    if depth > 30 or not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        return minimal(root["$defs"][schema["$ref"].split("/")[-1]], root, depth + 1)
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema and schema[key]:
            return minimal(schema[key][0], root, depth + 1)
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: minimal(props.get(k, {}), root, depth + 1) for k in schema.get("required", [])}
    if t == "array":
        return []
    if t == "string":
        return "x" * max(1, int(schema.get("minLength", 1)))
    if t in ("integer", "number"):
        return int(schema.get("minimum", 1))
    if t == "boolean":
        return True
    return None


def in_schema_order(inst: Any, schema: Any, root: Dict[str, Any], depth: int = 0) -> Any:
    """The instance with each object's keys in the order of its schema's ``properties``:
    the engines' default (as XGrammar's and MaskBench's) writes properties in that order."""
    while isinstance(schema, dict) and "$ref" in schema and depth < 60:
        schema, depth = root["$defs"][schema["$ref"].split("/")[-1]], depth + 1
    if not isinstance(schema, dict) or depth > 60:
        return inst
    if isinstance(inst, dict):
        props = schema.get("properties", {})
        order = {k: i for i, k in enumerate(props)}
        extra = schema.get("additionalProperties")
        keys = sorted(inst, key=lambda k: (order.get(k, len(order)), k))
        return {k: in_schema_order(inst[k], props.get(k, extra if isinstance(extra, dict) else {}), root, depth + 1)
                for k in keys}
    if isinstance(inst, list) and isinstance(schema.get("items"), dict):
        return [in_schema_order(x, schema["items"], root, depth + 1) for x in inst]
    return inst


def kubernetes_cases(count: int, seed: int) -> Iterator[Tuple[str, Any, List[Tuple[Any, bool]]]]:
    import jsonschema

    folder = kube_archive()
    with open(os.path.join(folder, "_definitions.json"), encoding="utf-8") as f:
        defs = json.load(f)["$defs"]
    names = sorted(n[:-5] for n in os.listdir(folder) if n.endswith(".json") and not n.startswith(("_", "all")))
    # the resource kinds (objects with a spec or data), largest first after the named ones
    picked = [n for n in RICH if n in names]
    rest = [n for n in names if n not in picked]
    random.Random(seed).shuffle(rest)
    for name in picked + rest:
        if count <= 0:
            return
        with open(os.path.join(folder, name + ".json"), encoding="utf-8") as f:
            raw = json.load(f)
        if raw.get("type") != "object" or "kind" not in raw.get("properties", {}):
            continue  # sub-objects; the case is a whole object
        schema = self_contained(raw, defs)
        validator = jsonschema.Draft202012Validator(schema)
        tests: List[Tuple[Any, bool]] = []
        for inst in ([RICH[name]] if name in RICH else []) + [minimal(schema, schema)]:
            inst = in_schema_order(inst, schema, schema)
            if validator.is_valid(inst):
                tests.append((inst, True))
        if not tests:
            continue
        bad = copy.deepcopy(tests[0][0])
        bad["kind"] = 5
        if not validator.is_valid(bad):
            tests.append((bad, False))
        if schema.get("required"):
            missing = {k: v for k, v in tests[0][0].items() if k != schema["required"][0]}
            if not validator.is_valid(missing):
                tests.append((missing, False))
        count -= 1
        yield "kubernetes---" + name, schema, tests


def write_case(out: str, name: str, schema: Any, tests: List[Tuple[Any, bool]]) -> None:
    doc = {"description": name, "schema": schema,
           "tests": [{"data": d, "valid": v, "description": ""} for d, v in tests]}
    with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(doc, f)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory to write (MaskBench format)")
    ap.add_argument("--kubernetes", type=int, default=40, help="Kubernetes object schemas to take (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    opts = ap.parse_args(argv)
    os.makedirs(opts.out, exist_ok=True)
    import jsonschema

    n = 0
    for name, (schema, tests) in ORDINARY.items():
        validator = jsonschema.Draft202012Validator(schema)
        for inst, valid in tests:
            assert validator.is_valid(inst) == valid, (name, inst)
        write_case(opts.out, "ordinary---" + name, schema, tests)
        n += 1
    if opts.kubernetes:
        for name, schema, tests in kubernetes_cases(opts.kubernetes, opts.seed):
            write_case(opts.out, name, schema, tests)
            n += 1
    print(f"{n} schemas written to {opts.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
