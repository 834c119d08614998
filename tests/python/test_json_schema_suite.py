"""The official JSON-Schema-Test-Suite (draft 2020-12) against Grammar.from_json_schema.

The suite ships inside the jsonschema sdist (``json/tests/draft2020-12``); it is
downloaded once with ``pip download`` into pytest's cache directory (or read from
``$XG2_JSON_SCHEMA_SUITE`` when that names an extracted ``draft2020-12`` folder).

Each test group is compiled with ``strict_mode=False`` (the specification's
defaults).  A test passes when a valid instance is accepted to completion and an
invalid one is rejected; a schema that does not compile fails all its tests.
Groups whose schema needs a remote ``$ref`` (and ``refRemote.json``) are excluded,
not counted.  Asserted: at least 80% pass, and no schema that compiled without
``lenient`` ever accepts an invalid instance.  ``optional/format`` files of the
formats the converter enforces are run and reported separately (their expectations
follow the RFCs, where the converter follows Python's jsonschema checkers).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from urllib.parse import urldefrag, urljoin

import pytest

import xg2_plugin as xgr
from xg2_plugin.json_schema_formats import FORMAT_PATTERNS

SUITE_ENV = "XG2_JSON_SCHEMA_SUITE"
EXCLUDED_FILES = {"refRemote.json"}
MIN_PASS_RATE = 0.80


def _download(dest: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "jsonschema", "-d", tmp, "-q"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        sdists = glob.glob(os.path.join(tmp, "jsonschema-*.tar.gz"))
        if proc.returncode != 0 or not sdists:
            pytest.fail(
                "could not download the JSON-Schema-Test-Suite (pip download jsonschema sdist): "
                f"{proc.stderr.strip()[-500:]}; set ${SUITE_ENV} to an extracted draft2020-12 folder",
                pytrace=False)
        with tarfile.open(sdists[0]) as tar:
            members = [m for m in tar.getmembers() if "/json/tests/draft2020-12/" in m.name and m.isfile()]
            for m in members:
                rel = m.name.split("/json/tests/draft2020-12/", 1)[1]
                target = os.path.join(dest, rel)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with tar.extractfile(m) as src, open(target, "wb") as out:
                    out.write(src.read())
    return dest


@pytest.fixture(scope="module")
def suite_dir(request, tmp_path_factory):
    env = os.environ.get(SUITE_ENV)
    if env:
        if not os.path.isdir(env):
            pytest.fail(f"${SUITE_ENV}={env!r} is not a directory", pytrace=False)
        return env
    cache = getattr(request.config, "cache", None)  # absent with -p no:cacheprovider
    root = str(cache.mkdir("json-schema-test-suite") if cache is not None
               else tmp_path_factory.mktemp("json-schema-test-suite"))
    dest = os.path.join(root, "draft2020-12")
    if not glob.glob(os.path.join(dest, "*.json")):
        os.makedirs(dest, exist_ok=True)
        _download(dest)
    return dest


def _refs_and_ids(node, base, refs, ids):
    if isinstance(node, dict):
        if isinstance(node.get("$id"), str):
            base = urljoin(base, node["$id"])
            ids.add(urldefrag(base)[0])
        for k, v in node.items():
            if k in ("$ref", "$dynamicRef") and isinstance(v, str):
                refs.append(urljoin(base, v))
            elif k not in ("enum", "const"):
                _refs_and_ids(v, base, refs, ids)
    elif isinstance(node, list):
        for v in node:
            _refs_and_ids(v, base, refs, ids)


def needs_remote(schema) -> bool:
    base = "https://xg2.invalid/root.json"
    refs, ids = [], {base}
    _refs_and_ids(schema, base, refs, ids)
    return any(urldefrag(r)[0] not in ids for r in refs)


def _matcher_accepts(compiled, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return m.accept_string(text) and m.is_completed()


def run_file(compiler, path, stats, *, lenient=False, any_order=False):
    with open(path, encoding="utf-8") as f:
        groups = json.load(f)
    name = os.path.relpath(path, os.path.dirname(os.path.dirname(path)) if "optional" in path else os.path.dirname(path))
    for group in groups:
        schema = group["schema"]
        if needs_remote(schema):
            stats["excluded"] += len(group["tests"])
            continue
        compiled, err = None, None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                compiled = compiler.compile_json_schema(schema, strict_mode=False, lenient=lenient,
                                                        any_order=any_order)
            except xgr.GrammarError as e:
                err = str(e)
            except xgr.XG2Error as e:  # limits of the core
                err = f"core: {e}"
        if err is not None:
            m = re.search(r'keyword "([^"]+)"', err)
            stats["raise_by_keyword"][m.group(1) if m else err[:60]] += 1
            stats["raised_schemas"] += 1
            stats["files"][name]["fail"] += len(group["tests"])
            stats["fail"] += len(group["tests"])
            continue
        for test in group["tests"]:
            accepted = _matcher_accepts(compiled, json.dumps(test["data"]))
            ok = accepted == test["valid"]
            stats["files"][name]["pass" if ok else "fail"] += 1
            stats["pass" if ok else "fail"] += 1
            if not ok:
                kind = "invalid_accepted" if accepted else "valid_rejected"
                stats[kind].append((name, group["description"], test["description"]))


def _new_stats():
    return {"pass": 0, "fail": 0, "excluded": 0, "raised_schemas": 0, "files": defaultdict(Counter),
            "raise_by_keyword": Counter(), "invalid_accepted": [], "valid_rejected": []}


def _report(title, stats, elapsed):
    total = stats["pass"] + stats["fail"]
    rate = stats["pass"] / total if total else 0.0
    lines = [f"\n== {title}: {stats['pass']}/{total} passed ({rate:.1%}), {stats['excluded']} excluded "
             f"(remote refs), {stats['raised_schemas']} schemas raised, {elapsed:.1f}s"]
    for name in sorted(stats["files"]):
        c = stats["files"][name]
        lines.append(f"   {name:45s} {c['pass']:4d} pass {c['fail']:4d} fail")
    if stats["raise_by_keyword"]:
        lines.append("   raised, by keyword: " + ", ".join(f"{k}={v}" for k, v in stats["raise_by_keyword"].most_common()))
    for kind in ("invalid_accepted", "valid_rejected"):
        if stats[kind]:
            lines.append(f"   {kind}: {len(stats[kind])}")
            for item in stats[kind][:40]:
                lines.append("      " + " | ".join(item))
    print("\n".join(lines))
    return rate


@pytest.fixture(scope="module")
def compiler():
    info = xgr.TokenizerInfo([bytes([i]) for i in range(256)])
    return xgr.GrammarCompiler(info, cache_enabled=False)


@pytest.mark.parametrize("any_order", [False, True], ids=["declared_order", "any_order"])
def test_official_suite_draft2020_12(suite_dir, compiler, any_order):
    """any_order=False is the default (XGrammar's): properties in the schema's order,
    so instances listing them otherwise fail; any_order=True is the JSON semantics."""
    files = sorted(glob.glob(os.path.join(suite_dir, "*.json")))
    assert files, f"no test files in {suite_dir}"
    stats = _new_stats()
    t0 = time.time()
    for path in files:
        if os.path.basename(path) in EXCLUDED_FILES:
            with open(path, encoding="utf-8") as f:
                stats["excluded"] += sum(len(g["tests"]) for g in json.load(f))
            continue
        run_file(compiler, path, stats, any_order=any_order)
    rate = _report(f"draft2020-12 (any_order={any_order})", stats, time.time() - t0)
    assert not stats["invalid_accepted"], (
        f"{len(stats['invalid_accepted'])} invalid instances accepted: {stats['invalid_accepted'][:10]}")
    assert rate >= MIN_PASS_RATE, f"pass rate {rate:.1%} is below {MIN_PASS_RATE:.0%}"


def test_official_suite_formats(suite_dir, compiler):
    files = [p for p in sorted(glob.glob(os.path.join(suite_dir, "optional", "format", "*.json")))
             if os.path.splitext(os.path.basename(p))[0] in FORMAT_PATTERNS]
    assert files, "no optional/format files for the supported formats in the suite download"
    stats = _new_stats()
    t0 = time.time()
    for path in files:
        run_file(compiler, path, stats)
    _report("draft2020-12 optional/format (supported formats)", stats, time.time() - t0)
    assert stats["pass"] > 0
