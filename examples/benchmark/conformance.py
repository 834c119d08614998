#!/usr/bin/env python
"""JSON Schema conformance of xg2_plugin (and, side by side, XGrammar and LLGuidance).

Two corpora:

* the official JSON-Schema-Test-Suite, draft 2020-12 (fetched once from the
  ``jsonschema`` source distribution with pip and cached, see ``--cache-dir``); groups
  whose schema refers to a remote http(s) document, and the whole ``refRemote.json``
  file, are left out and counted;
* MaskBench: a directory of ``{"schema": ..., "tests": [{"data", "valid"}]}`` files
  (``--maskbench DIR``, by default ``../shared/data/maskbench-dev`` next to the repo).

Method, per schema and engine: compile it (``strict_mode=False``, any whitespace); a
schema that does not compile fails all its tests.  Each test instance is serialised
with ``json.dumps`` and tokenized (``add_special_tokens=False``); at every token the
engine fills its mask, the token's bit is checked, then the token is accepted.  A
valid instance passes if every token is allowed and accepted, the matcher is complete
at the end and the stop token is allowed there.  An invalid instance passes if some
token is refused (by the mask or by accept) or the matcher is not complete at the end;
an invalid instance that is accepted completely is an *invalidation error*.

Each (schema, engine) runs in a worker subprocess under a time limit (``--timeout``,
60 s by default); a timeout or a dead worker fails the schema's tests and is counted.

``--patterns`` runs a different check instead: every ``pattern`` (and
``patternProperties`` key) of the corpora is compiled with ``Grammar.from_regex``;
it must either compile or raise a clear error (``GrammarError`` or
``LimitExceededError`` with a message, within 10 s), and each compiled pattern must
agree with Python's ``re.fullmatch(pattern, s, re.ASCII)`` on generated strings
(samples of the pattern's syntax tree, their mutations and random strings), checked
with ``accept_string`` + ``is_completed`` on a byte-level vocabulary.

Examples::

    python examples/benchmark/conformance.py --engines xg2,xgrammar,llguidance \\
        --workers 2 --out conformance.md            # also writes conformance.json
    python examples/benchmark/conformance.py --corpus maskbench --limit 200 --seed 1
    python examples/benchmark/conformance.py --patterns --out patterns.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
import urllib.parse
from collections import Counter, defaultdict
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import SchemaCase, markdown_table, pct, percentile  # noqa: E402

ENGINES = ("xg2", "xgrammar", "llguidance")
ENGINE_TITLES = {"xg2": "xg2_plugin (ours)", "xgrammar": "XGrammar", "llguidance": "LLGuidance"}
CORPORA = ("jsts", "maskbench")
CORPUS_TITLES = {"jsts": "JSON-Schema-Test-Suite (draft 2020-12)", "maskbench": "MaskBench"}

# --------------------------------------------------------------------------------------
# JSON Schema structure: keywords and subschemas
# --------------------------------------------------------------------------------------

# Keywords whose value is one schema, an array of schemas, or a map of schemas.
SUBSCHEMA_ONE = (
    "not", "if", "then", "else", "contains", "propertyNames", "additionalProperties",
    "additionalItems", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "items",
)  # fmt: skip
SUBSCHEMA_ARRAY = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
SUBSCHEMA_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")

# Every keyword of drafts 4 to 2020-12 (core, applicator, unevaluated, validation,
# format, content, meta-data vocabularies, and the older drafts' spellings).
KEYWORDS = frozenset(
    """
    $schema $id id $ref $anchor $dynamicRef $dynamicAnchor $recursiveRef $recursiveAnchor
    $defs definitions $comment $vocabulary
    allOf anyOf oneOf not if then else dependentSchemas dependencies prefixItems items
    additionalItems contains properties patternProperties additionalProperties propertyNames
    unevaluatedItems unevaluatedProperties
    type enum const multipleOf maximum exclusiveMaximum minimum exclusiveMinimum maxLength
    minLength pattern maxItems minItems uniqueItems maxContains minContains maxProperties
    minProperties required dependentRequired
    format contentEncoding contentMediaType contentSchema
    title description default deprecated readOnly writeOnly examples
    """.split()
)


def _json_pointer(doc: Any, pointer: str) -> Any:
    node = doc
    for part in pointer.split("/")[1:] if pointer else []:
        part = urllib.parse.unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def walk_schema(root: Any, visit: Callable[[dict, str], None]) -> None:
    """Call ``visit(node, base_uri)`` for every (sub)schema object of ``root``, each once.

    Follows the applicator keywords, and local ``$ref`` JSON pointers (``#/...``) into
    places that are not subschema positions (``#/components/schemas/X`` and the like)."""
    seen: Set[int] = set()
    stack: List[Tuple[Any, str]] = [(root, "")]
    while stack:
        node, base = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        ident = node.get("$id", node.get("id"))
        if isinstance(ident, str) and ident and not ident.startswith("#"):
            base = urllib.parse.urljoin(base, ident)
        visit(node, base)
        for key in SUBSCHEMA_ONE:
            if isinstance(node.get(key), dict):
                stack.append((node[key], base))
        for key in SUBSCHEMA_ARRAY:
            if isinstance(node.get(key), list):
                stack.extend((s, base) for s in node[key])
        for key in SUBSCHEMA_MAP:
            if isinstance(node.get(key), dict):
                stack.extend((s, base) for s in node[key].values())
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target = _json_pointer(root, ref[1:])
            if isinstance(target, dict):
                stack.append((target, ""))


def schema_keywords(schema: Any) -> Set[str]:
    """The JSON Schema keywords a schema uses anywhere, with ``format:<name>`` for each
    format and ``items:array`` for the tuple form of ``items`` (drafts before 2020-12)."""
    found: Set[str] = set()

    def visit(node: dict, base: str) -> None:
        for key, value in node.items():
            if key in KEYWORDS:
                found.add(key)
        if isinstance(node.get("format"), str):
            found.add("format:" + node["format"])
        if isinstance(node.get("items"), list):
            found.add("items:array")

    walk_schema(schema, visit)
    return found


def schema_patterns(schema: Any) -> List[str]:
    """Every ``pattern`` value and ``patternProperties`` key of a schema."""
    out: List[str] = []

    def visit(node: dict, base: str) -> None:
        if isinstance(node.get("pattern"), str):
            out.append(node["pattern"])
        if isinstance(node.get("patternProperties"), dict):
            out.extend(k for k in node["patternProperties"] if isinstance(k, str))

    walk_schema(schema, visit)
    return out


def remote_refs(schema: Any) -> List[str]:
    """``$ref``/``$dynamicRef`` targets that resolve to an http(s) document other than
    one the schema itself declares with ``$id``."""
    ids: Set[str] = set()
    refs: List[Tuple[str, str]] = []

    def visit(node: dict, base: str) -> None:
        if base:
            ids.add(urllib.parse.urldefrag(base).url)
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):
            if isinstance(node.get(key), str):
                refs.append((node[key], base))

    walk_schema(schema, visit)
    out = []
    for ref, base in refs:
        target = urllib.parse.urldefrag(urllib.parse.urljoin(base, ref)).url
        if target.startswith(("http://", "https://")) and target not in ids:
            out.append(target)
    return out


# --------------------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------------------


def load_jsts(
    cache_dir: Optional[str], files: Optional[str] = None, version: str = common.JSONSCHEMA_SDIST_VERSION
) -> Tuple[List[SchemaCase], Dict[str, int]]:
    """The draft 2020-12 test groups as cases, and what was excluded (remote refs)."""
    import fnmatch
    import glob

    directory = common.json_schema_test_suite(cache_dir, version, quiet=False)
    cases: List[SchemaCase] = []
    excluded = {"groups": 0, "tests": 0, "files": 0}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        name = os.path.basename(path)
        if files and not fnmatch.fnmatch(name, files):
            continue
        with open(path, encoding="utf-8") as f:
            groups = json.load(f)
        if name == "refRemote.json":
            excluded["files"] += 1
            excluded["groups"] += len(groups)
            excluded["tests"] += sum(len(g["tests"]) for g in groups)
            continue
        for i, group in enumerate(groups):
            if remote_refs(group["schema"]):
                excluded["groups"] += 1
                excluded["tests"] += len(group["tests"])
                continue
            tests = [(t["data"], bool(t["valid"])) for t in group["tests"]]
            descs = [str(t.get("description", "")) for t in group["tests"]]
            case_id = f"{name[:-5]}#{i}: {group.get('description', '')}"
            cases.append(SchemaCase(case_id, name, group["schema"], tests, descs))
    return cases, excluded


def select_cases(cases: List[SchemaCase], limit: Optional[int], seed: int) -> List[SchemaCase]:
    """A seeded random sample of ``limit`` cases (all when no limit), in corpus order."""
    if limit is None or limit >= len(cases):
        return cases
    keep = set(random.Random(seed).sample(range(len(cases)), limit))
    return [c for i, c in enumerate(cases) if i in keep]


# --------------------------------------------------------------------------------------
# Engines (instantiated inside the worker processes)
# --------------------------------------------------------------------------------------


class CompileFailure(Exception):
    """The engine refused the schema (an error the engine raises for a bad/unsupported
    schema, as opposed to a crash)."""


class Engine:
    name = ""
    any_order = False  # --any-order: properties in any order (ours and XGrammar)
    vocab_size = 0
    stop_ids: List[int] = []

    def compile(self, schema_text: str, strict: bool, lenient: bool) -> Any: ...
    def matcher(self, compiled: Any) -> Any: ...
    def fill(self, matcher: Any) -> None: ...  # into self.mask (numpy int32 view)
    def accept(self, matcher: Any, token: int) -> bool: ...
    def completed(self, matcher: Any) -> bool: ...

    mask: Any = None


class OursEngine(Engine):
    name = "xg2"

    def __init__(self, tok) -> None:
        import numpy as np

        import xg2_plugin as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(tok)
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False)
        self.vocab_size = self.info.vocab_size
        self.stop_ids = list(self.info.stop_token_ids)
        self.mask = np.zeros((1, (self.vocab_size + 31) // 32), dtype=np.int32)
        self.refusals = (xgr.GrammarError, xgr.LimitExceededError, xgr.InvalidArgumentError)

    def compile(self, schema_text, strict, lenient):
        try:
            kwargs = {"any_order": True} if self.any_order else {}
            return self.compiler.compile_json_schema(
                schema_text, strict_mode=strict, any_whitespace=True, lenient=lenient, **kwargs
            )
        except self.refusals as e:
            raise CompileFailure(f"{type(e).__name__}: {e}") from None

    def set_cache_limit(self, limit: int) -> None:
        """A compiler whose token-mask cache holds at most ``limit`` bytes (a tiny
        limit forces evictions: every mask must stay exact all the same)."""
        if self.compiler.cache_limit_bytes != limit:
            self.compiler = self.xgr.GrammarCompiler(self.info, cache_enabled=False, cache_limit_bytes=limit)

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.mask)

    def accept(self, m, t):
        return m.accept_token(t)

    def completed(self, m):
        return m.is_completed()


class XGrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, tok) -> None:
        import xgrammar

        self.xg = xgrammar
        self.info = xgrammar.TokenizerInfo.from_huggingface(tok)
        self.compiler = xgrammar.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.vocab_size = self.info.vocab_size
        self.stop_ids = list(self.info.stop_token_ids)
        self.bitmask = xgrammar.allocate_token_bitmask(1, self.vocab_size)
        self.mask = self.bitmask.numpy()

    def compile(self, schema_text, strict, lenient):
        # XGrammar has no lenient option; any exception from its compiler is a refusal.
        try:
            return self.compiler.compile_json_schema(
                schema_text, any_whitespace=True, strict_mode=strict, any_order=self.any_order
            )
        except Exception as e:
            raise CompileFailure(f"{type(e).__name__}: {e}") from None

    def matcher(self, compiled):
        return self.xg.GrammarMatcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.bitmask)

    def accept(self, m, t):
        return m.accept_token(t)

    def completed(self, m):
        return m.is_completed()


class LLGuidanceEngine(Engine):
    name = "llguidance"

    def __init__(self, tok) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.tokenizer = llguidance.hf.from_tokenizer(tok)
        self.vocab_size = self.tokenizer.vocab_size
        self.stop_ids = [self.tokenizer.eos_token]
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, self.vocab_size)
        self.mask = self.bitmask.numpy()

    def compile(self, schema_text, strict, lenient):
        # Default options: flexible whitespace, (",", ":") separators; strict_mode has
        # no LLGuidance equivalent (additionalProperties follows the schema).
        options: Dict[str, Any] = {"whitespace_flexible": True}
        if lenient:
            options["lenient"] = True
        m = common.llguidance_matcher(self.llg, self.tokenizer, schema_text, options)
        if isinstance(m, str):
            raise CompileFailure(m)
        return m

    def matcher(self, compiled):
        return compiled.deep_copy()

    def fill(self, m):
        m.unsafe_compute_mask_ptr(self.bitmask.data_ptr(), self.bitmask.numel() * 4)

    def accept(self, m, t):
        return m.consume_token(t)

    def completed(self, m):
        return m.is_accepting()


_ENGINE_CLASSES = {"xg2": OursEngine, "xgrammar": XGrammarEngine, "llguidance": LLGuidanceEngine}
_WORKER_STATE: Dict[str, Any] = {}


def _get_engine(name: str, tokenizer_dir: str) -> Engine:
    key = (name, tokenizer_dir)
    if key not in _WORKER_STATE:
        tok_key = ("hf", tokenizer_dir)
        if tok_key not in _WORKER_STATE:
            _WORKER_STATE[tok_key] = common.load_hf_tokenizer(tokenizer_dir)
        _WORKER_STATE[key] = _ENGINE_CLASSES[name](_WORKER_STATE[tok_key])
    return _WORKER_STATE[key]


def engine_available(name: str) -> Optional[str]:
    """None if the engine can run here, else why not."""
    try:
        if name == "xg2":
            import xg2_plugin

            if not hasattr(xg2_plugin.GrammarCompiler, "compile_json_schema"):
                return "this xg2_plugin build has no GrammarCompiler.compile_json_schema"
        elif name == "xgrammar":
            import xgrammar  # noqa: F401
        elif name == "llguidance":
            import llguidance.hf  # noqa: F401
            import llguidance.torch  # noqa: F401
        else:
            return f"unknown engine {name!r} (choose from {', '.join(ENGINES)})"
    except ImportError as e:
        return f"cannot import it: {e}"
    return None


def _bit(mask, token: int) -> bool:
    return bool((int(mask[0, token >> 5]) >> (token & 31)) & 1)


def run_instance(eng: Engine, compiled: Any, tokens: Sequence[int], valid: bool, timing: List[float]) -> Dict[str, Any]:
    """Feed one instance's tokens; returns {"passed", "reason"[, "at"]}.

    Reasons: ``masked`` (a token not in the mask), ``rejected`` (in the mask but
    accept_token said no), ``incomplete`` (all accepted, grammar not complete),
    ``stop-masked`` (complete, but the stop token not in the mask), ``accepted``
    (complete with the stop token allowed).  ``mask_accept_mismatch`` marks a token the
    mask refused that accept_token nevertheless took, or one it allowed that
    accept_token refused -- an engine inconsistency whatever the instance."""
    m = eng.matcher(compiled)
    mask = eng.mask
    perf = time.perf_counter
    fill_s = 0.0
    fills = 0
    result: Dict[str, Any]
    try:
        for i, t in enumerate(tokens):
            t0 = perf()
            eng.fill(m)
            fill_s += perf() - t0
            fills += 1
            if not _bit(mask, t):
                result = {"reason": "masked", "at": i}
                if eng.accept(m, t):
                    result["mask_accept_mismatch"] = True
                break
            if not eng.accept(m, t):
                result = {"reason": "rejected", "at": i, "mask_accept_mismatch": True}
                break
        else:
            t0 = perf()
            eng.fill(m)
            fill_s += perf() - t0
            fills += 1
            if not eng.completed(m):
                result = {"reason": "incomplete"}
            elif not any(_bit(mask, s) for s in eng.stop_ids if s < eng.vocab_size):
                result = {"reason": "stop-masked"}
            else:
                result = {"reason": "accepted"}
    finally:
        timing[0] += fill_s
        timing[1] += fills
    accepted_all = result["reason"] in ("accepted", "stop-masked")
    if valid:
        result["passed"] = result["reason"] == "accepted"
    else:
        # complete (whatever the stop token) = the invalid instance got through
        result["passed"] = not accepted_all
    return result


def conformance_task(args: Dict[str, Any], ctx: common.TaskContext) -> Dict[str, Any]:
    """One engine on one schema (runs in a worker)."""
    ctx.phase("init", 1800)
    eng = _get_engine(args["engine"], args["tokenizer"])
    eng.any_order = bool(args.get("any_order"))
    if args.get("cache_limit_bytes") is not None:
        eng.set_cache_limit(int(args["cache_limit_bytes"]))
    budget = float(args["timeout"])
    ctx.phase("compile", budget)
    t_start = time.perf_counter()
    out: Dict[str, Any] = {"status": "ok", "error": "", "tests": []}
    try:
        compiled = eng.compile(args["schema_text"], args["strict"], args["lenient"])
    except CompileFailure as e:
        out.update(status="compile_error", error=str(e)[:500], compile_s=time.perf_counter() - t_start)
        return out
    except Exception as e:  # not a refusal: a crash of the compiler
        out.update(status="crash", error=f"{type(e).__name__}: {e}"[:500], compile_s=time.perf_counter() - t_start)
        return out
    out["compile_s"] = time.perf_counter() - t_start
    ctx.phase("match", max(0.0, budget - out["compile_s"]))
    timing = [0.0, 0]  # mask fill seconds, fills
    n_tokens = 0
    t_match = time.perf_counter()
    for tokens, valid in zip(args["tokens"], args["valid"]):
        n_tokens += len(tokens) + 1
        try:
            r = run_instance(eng, compiled, tokens, valid, timing)
        except Exception as e:
            r = {"passed": False, "reason": "crash", "error": f"{type(e).__name__}: {e}"[:300]}
        out["tests"].append(r)
    out["match_s"] = time.perf_counter() - t_match
    out["mask_s"], out["mask_calls"] = timing
    out["tokens"] = n_tokens
    return out


# --------------------------------------------------------------------------------------
# The conformance run and its report
# --------------------------------------------------------------------------------------


def run_conformance(opts: argparse.Namespace, corpora: Dict[str, List[SchemaCase]], engines: List[str]):
    """Run every (case, engine) in the pool; returns results[corpus][case_id][engine]."""
    tok = common.load_hf_tokenizer(opts.tokenizer)
    tasks = []
    meta: Dict[Tuple[str, str], SchemaCase] = {}
    for corpus, cases in corpora.items():
        for case in cases:
            texts = [json.dumps(data) for data, _ in case.tests]
            token_lists = [tok.encode(t, add_special_tokens=False) for t in texts]
            meta[(corpus, case.id)] = case
            for engine in engines:
                args = {
                    "engine": engine,
                    "tokenizer": opts.tokenizer,
                    "schema_text": json.dumps(case.schema),
                    "tokens": token_lists,
                    "valid": [v for _, v in case.tests],
                    "strict": opts.strict,
                    "lenient": opts.lenient,
                    "any_order": opts.any_order,
                    "cache_limit_bytes": opts.cache_limit_bytes if engine == "xg2" else None,
                    "timeout": opts.timeout,
                }
                tasks.append(((corpus, case.id, engine), args, opts.timeout))
    # a seeded shuffle: an interrupted run holds a uniform sample, and slow schemas spread out
    random.Random(opts.seed).shuffle(tasks)
    results: Dict[str, Dict[str, Dict[str, Any]]] = {c: {} for c in corpora}
    checkpoint = None
    if opts.json:  # one line per finished (schema, engine): --resume picks up from it
        path = opts.json + ".partial.jsonl"
        if opts.resume and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        corpus, case_id, engine, res = json.loads(line)
                    except ValueError:  # a line cut short by a kill
                        continue
                    if corpus in results and (corpus, case_id) in meta and engine in engines:
                        results[corpus].setdefault(case_id, {})[engine] = res
            tasks = [t for t in tasks if t[0][2] not in results[t[0][0]].get(t[0][1], {})]
            print(f"resuming: {len(tasks)} (schema, engine) runs left", file=sys.stderr)
        checkpoint = open(path, "a" if opts.resume else "w", encoding="utf-8")
    total, done, t0 = len(tasks), 0, time.perf_counter()
    by_engine = {e: [t for t in tasks if t[0][2] == e] for e in engines}
    # one pool per engine, side by side: a killed worker reloads one engine only
    pools = common.map_pools(conformance_task, by_engine, opts.workers, memory_limit_gb=opts.memory_limit_gb)
    for (corpus, case_id, engine), outcome in pools:
        case = meta[(corpus, case_id)]
        if outcome.status != "done" and opts.progress:
            print(f"{engine} on {corpus}/{case_id}: {outcome.status} {outcome.error[:200]}", file=sys.stderr)
        if outcome.status == "done":
            res = outcome.value
        elif outcome.status == "timeout":
            res = {"status": "timeout", "error": f"over {opts.timeout:g} s ({outcome.error})", "tests": []}
        elif outcome.status == "died":
            res = {"status": "crash", "error": f"worker died: {outcome.error}", "tests": []}
        else:
            res = {"status": "crash", "error": outcome.error, "tests": []}
        res["wall_s"] = outcome.wall_s
        if len(res["tests"]) != len(case.tests):  # failed as a whole: every test fails
            res["tests"] = [{"passed": False, "reason": res["status"]} for _ in case.tests]
        for r, (_, valid) in zip(res["tests"], case.tests):
            r["valid"] = valid
        results[corpus].setdefault(case_id, {})[engine] = res
        if checkpoint:
            checkpoint.write(json.dumps([corpus, case_id, engine, res]) + "\n")
            checkpoint.flush()
        done += 1
        if opts.progress and (done % max(1, total // 50) == 0 or done == total):
            el = time.perf_counter() - t0
            print(f"[{done}/{total}] {el:.0f} s elapsed, ~{el / done * (total - done):.0f} s left",
                  file=sys.stderr, flush=True)  # fmt: skip
    if checkpoint:
        checkpoint.close()
    return results


def merge_partials(paths: Sequence[str], corpora: Dict[str, List[SchemaCase]], engines: List[str]):
    """Results read back from ``*.partial.jsonl`` files (later files win), restricted to
    the schemas that have a result for every engine; also returns how many were dropped."""
    wanted = {(c, case.id) for c, cases in corpora.items() for case in cases}
    found: Dict[Tuple[str, str], Dict[str, Any]] = defaultdict(dict)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    corpus, case_id, engine, res = json.loads(line)
                except ValueError:
                    continue
                if (corpus, case_id) in wanted and engine in engines:
                    found[(corpus, case_id)][engine] = res
    results: Dict[str, Dict[str, Dict[str, Any]]] = {c: {} for c in corpora}
    for (corpus, case_id), per in found.items():
        if all(e in per for e in engines):
            results[corpus][case_id] = per
    dropped = {c: len(corpora[c]) - len(results[c]) for c in corpora}
    return results, dropped


def summarize(results: Dict[str, Dict[str, Any]], engine: str) -> Dict[str, Any]:
    s = Counter()
    compile_ms, schema_ms, mask_s, mask_calls, per_token_us = [], [], 0.0, 0, []
    errors = Counter()
    for case_id, per_engine in results.items():
        res = per_engine[engine]
        tests = res["tests"]
        s["schemas"] += 1
        s["tests"] += len(tests)
        passed = sum(t["passed"] for t in tests)
        s["tests_passed"] += passed
        s["schemas_passed"] += passed == len(tests)
        status = res["status"]
        if status == "compile_error":
            s["compile_failures"] += 1
            errors[_normalize_error(res["error"])] += 1
        elif status == "timeout":
            s["timeouts"] += 1
        elif status == "crash":
            s["crashes"] += 1
            errors["crash: " + _normalize_error(res["error"])] += 1
        else:
            if any(t["reason"] == "crash" for t in tests):
                s["crashes"] += 1
            s["invalidation_errors"] += sum(1 for t in tests if not t["valid"] and not t["passed"])
            s["valid_rejections"] += sum(1 for t in tests if t["valid"] and not t["passed"])
            s["mismatches"] += sum(1 for t in tests if t.get("mask_accept_mismatch"))
            compile_ms.append(1e3 * res["compile_s"])
            schema_ms.append(1e3 * (res["compile_s"] + res["match_s"]))
            mask_s += res["mask_s"]
            mask_calls += res["mask_calls"]
            if res["mask_calls"]:
                per_token_us.append(1e6 * res["mask_s"] / res["mask_calls"])
    s = dict(s)
    s["compile_ms"] = compile_ms
    s["schema_ms"] = schema_ms
    s["mask_us"] = 1e6 * mask_s / mask_calls if mask_calls else float("nan")
    s["mask_us_p50"] = percentile(per_token_us, 50)
    s["errors"] = errors
    return s


def _normalize_error(msg: str) -> str:
    msg = msg.splitlines()[0] if msg else ""
    msg = re.sub(r" at /[^:]*:", " at …:", msg)  # our errors name the schema location
    msg = re.sub(r"\d+", "N", msg)
    return msg[:120]


def _fmt_ms(xs: List[float], q: float) -> str:
    return "n/a" if not xs else f"{percentile(xs, q):.1f}"


def corpus_report(corpus: str, results: Dict[str, Dict[str, Any]], cases: List[SchemaCase], engines: List[str],
                  excluded: Optional[Dict[str, int]] = None) -> str:  # fmt: skip
    n_tests = sum(len(c.tests) for c in cases)
    lines = [f"### {CORPUS_TITLES[corpus]}: {len(cases)} schemas, {n_tests} tests", ""]
    if excluded:
        lines += [
            f"Excluded (remote `$ref`s, which need network access): {excluded['groups']} groups with "
            f"{excluded['tests']} tests" + (", including all of `refRemote.json`." if excluded["files"] else "."),
            "",
        ]
    sums = {e: summarize(results, e) for e in engines}
    g = lambda e, k: sums[e].get(k, 0)  # noqa: E731
    rows = []
    for e in engines:
        rows.append([
            ENGINE_TITLES[e],
            f"{g(e, 'tests_passed')}/{g(e, 'tests')} ({pct(g(e, 'tests_passed'), g(e, 'tests'))})",
            f"{g(e, 'schemas_passed')}/{g(e, 'schemas')} ({pct(g(e, 'schemas_passed'), g(e, 'schemas'))})",
            g(e, "compile_failures"), g(e, "timeouts"), g(e, "crashes"),
            g(e, "invalidation_errors"), g(e, "valid_rejections"), g(e, "mismatches"),
        ])  # fmt: skip
    lines.append(markdown_table(
        ["engine", "tests passed", "schemas fully passed", "compile failures", "timeouts", "crashes",
         "invalid accepted", "valid rejected", "mask/accept mismatches"], rows))  # fmt: skip
    lines += ["", "Time per schema (compiled schemas only; ms):", ""]
    rows = []
    for e in engines:
        s = sums[e]
        rows.append([
            ENGINE_TITLES[e], _fmt_ms(s["compile_ms"], 50), _fmt_ms(s["compile_ms"], 95),
            "n/a" if not s["compile_ms"] else f"{max(s['compile_ms']):.0f}",
            _fmt_ms(s["schema_ms"], 50), _fmt_ms(s["schema_ms"], 95),
            "n/a" if s["mask_us"] != s["mask_us"] else f"{s['mask_us_p50']:.0f} / {s['mask_us']:.0f}",
        ])  # fmt: skip
    lines.append(markdown_table(
        ["engine", "compile p50", "compile p95", "compile max", "compile+match p50", "compile+match p95",
         "mask fill µs/token (p50 of schemas / mean)"], rows))  # fmt: skip
    # per keyword
    uses: Dict[str, List[str]] = defaultdict(list)
    by_id = {c.id: c for c in cases}
    for case_id in results:
        for kw in schema_keywords(by_id[case_id].schema):
            uses[kw].append(case_id)
    lines += ["", "Per keyword: schemas using it, and how many of those each engine passes fully:", ""]
    rows = []
    for kw in sorted(uses, key=lambda k: (-len(uses[k]), k)):
        ids = uses[kw]
        row = [f"`{kw}`", len(ids)]
        for e in engines:
            ok = sum(all(t["passed"] for t in results[i][e]["tests"]) for i in ids)
            row.append(f"{ok} ({pct(ok, len(ids))})")
        rows.append(row)
    lines.append(markdown_table(["keyword", "schemas"] + [ENGINE_TITLES[e] for e in engines], rows))
    if corpus == "jsts":
        lines += ["", "Per file (tests passed):", ""]
        files: Dict[str, List[str]] = defaultdict(list)
        for case_id in results:
            files[by_id[case_id].file].append(case_id)
        rows = []
        for f in sorted(files):
            ids = files[f]
            n = sum(len(results[i][engines[0]]["tests"]) for i in ids)
            row = [f, len(ids), n]
            for e in engines:
                ok = sum(t["passed"] for i in ids for t in results[i][e]["tests"])
                row.append(f"{ok} ({pct(ok, n)})")
            rows.append(row)
        lines.append(markdown_table(["file", "groups", "tests"] + [ENGINE_TITLES[e] for e in engines], rows))
    for e in engines:
        errs = sums[e]["errors"]
        if errs:
            lines += ["", f"Most common compile errors and crashes, {ENGINE_TITLES[e]}:", ""]
            lines.append(markdown_table(["schemas", "message"], [[n, f"`{m}`"] for m, n in errs.most_common(8)],
                                        "rl"))  # fmt: skip
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Pattern agreement: a random string generator over Python's regex syntax tree
# --------------------------------------------------------------------------------------

try:  # Python 3.11+
    import re._constants as _C
    import re._parser as _P
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as _C  # type: ignore
    import sre_parse as _P  # type: ignore

_ASCII_DIGIT = "0123456789"
_ASCII_SPACE = " \t\n\r\f\v"
_ASCII_WORD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
# Characters drawn where anything may go: ASCII, controls, and non-ASCII that Unicode
# (but not re.ASCII) counts as digits, spaces or word characters.
EXTRA_CHARS = "\n\t\r\x0b\x0c\x00\x7f é ß Ω 日 本 € 😀 \u00a0 \u2028 \u0660 ǅ 𝟘 ٣ Ä".replace(" ", "") + " "
CHAR_POOL = [chr(c) for c in range(32, 127)] + list(EXTRA_CHARS)


def _category_has(cat, ch: str) -> bool:
    name = str(cat)
    if "DIGIT" in name:
        inside = ch in _ASCII_DIGIT
    elif "SPACE" in name:
        inside = ch in _ASCII_SPACE
    elif "WORD" in name:
        inside = ch in _ASCII_WORD
    else:  # linebreak categories (not produced by the parser for str patterns)
        inside = ch == "\n"
    return (not inside) if "NOT" in name else inside


def _class_has(items, ch: str) -> bool:
    negate = False
    hit = False
    code = ord(ch)
    for op, av in items:
        if op is _C.NEGATE:
            negate = True
        elif op is _C.LITERAL:
            hit = hit or code == av
        elif op is _C.RANGE:
            hit = hit or av[0] <= code <= av[1]
        elif op is _C.CATEGORY:
            hit = hit or _category_has(av, ch)
        else:  # case-insensitive variants: only under (?i), which is unsupported
            return False
    return hit != negate


class RegexSampler:
    """Random strings derived from a regex's syntax tree (``re._parser.parse``).

    Honours literals, classes (with ``re.ASCII`` categories), ``.``, alternation,
    groups and repeats (unbounded ones capped at ``max_extra`` above their minimum);
    assertions and backreferences produce nothing, so the result may not match -- the
    labels always come from ``re.fullmatch``."""

    def __init__(self, pattern: str, rng: random.Random, max_extra: int = 6, max_len: int = 3000) -> None:
        self.tree = _P.parse(pattern, re.ASCII)
        self.rng = rng
        self.max_extra = max_extra
        self.max_len = max_len

    def sample(self) -> str:
        out: List[str] = []
        self._seq(self.tree, out)
        return "".join(out)

    def _char_not(self, pred: Callable[[str], bool]) -> str:
        for _ in range(200):
            ch = self.rng.choice(CHAR_POOL)
            if not pred(ch):
                return ch
        return "\x01"

    def _class_char(self, items) -> str:
        if any(op is _C.NEGATE for op, _ in items):
            return self._char_not(lambda ch: not _class_has(items, ch))
        op, av = self.rng.choice(items)
        if op is _C.LITERAL:
            return chr(av)
        if op is _C.RANGE:
            lo, hi = av
            for _ in range(20):
                r = self.rng.random()
                code = lo if r < 0.2 else hi if r < 0.4 else self.rng.randint(lo, hi)
                if not 0xD800 <= code <= 0xDFFF:
                    return chr(code)
            return chr(lo)
        if op is _C.CATEGORY:
            return self._char_not(lambda ch: not _category_has(av, ch))
        return "a"

    def _count(self, lo: int, hi) -> int:
        unbounded = hi is _C.MAXREPEAT or hi >= 2**31
        r = self.rng.random()
        if r < 0.25:
            return lo
        if r < 0.4 and not unbounded:
            return hi
        if r < 0.5 and not unbounded and hi > lo:
            return self.rng.choice([lo + 1, hi - 1])
        top = lo + self.max_extra if unbounded else min(hi, lo + self.max_extra)
        return self.rng.randint(lo, top)

    def _seq(self, seq, out: List[str]) -> None:
        for op, av in seq:
            if op is _C.LITERAL:
                out.append(chr(av))
            elif op is _C.NOT_LITERAL:
                out.append(self._char_not(lambda ch: ord(ch) == av))
            elif op is _C.ANY:
                out.append(self._char_not(lambda ch: ch == "\n"))
            elif op is _C.IN:
                out.append(self._class_char(av))
            elif op is _C.BRANCH:
                self._seq(self.rng.choice(av[1]), out)
            elif op is _C.SUBPATTERN:
                self._seq(av[-1], out)
            elif op is getattr(_C, "ATOMIC_GROUP", None):
                self._seq(av, out)
            elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT, getattr(_C, "POSSESSIVE_REPEAT", None)):
                lo, hi, sub = av
                n = self._count(lo, hi)
                if sum(map(len, out)) > self.max_len:
                    n = lo
                for _ in range(n):
                    self._seq(sub, out)
            elif op is _C.GROUPREF_EXISTS:
                self._seq(av[1] if (av[2] is None or self.rng.random() < 0.5) else av[2], out)
            elif op is _C.CATEGORY:
                out.append(self._char_not(lambda ch: not _category_has(av, ch)))
            # AT, ASSERT, ASSERT_NOT, GROUPREF: nothing


def mutate(s: str, rng: random.Random) -> str:
    """A random edit of ``s``: insert, delete, replace, truncate, append, duplicate, swap."""
    kind = rng.randrange(7)
    pos = rng.randint(0, len(s))
    ch = rng.choice(CHAR_POOL if rng.random() < 0.7 else (s or "a"))
    if kind == 0:
        return s[:pos] + ch + s[pos:]
    if kind == 1 and s:
        pos = rng.randrange(len(s))
        return s[:pos] + s[pos + 1 :]
    if kind == 2 and s:
        pos = rng.randrange(len(s))
        return s[:pos] + ch + s[pos + 1 :]
    if kind == 3:
        return s[:pos]
    if kind == 4:
        return s + ch
    if kind == 5 and s:
        a = rng.randrange(len(s))
        b = rng.randint(a + 1, len(s))
        return s[:b] + s[a:b] + s[b:]
    if kind == 6 and len(s) > 1:
        pos = rng.randrange(len(s) - 1)
        return s[:pos] + s[pos + 1] + s[pos] + s[pos + 2 :]
    return s + ch


def random_string(rng: random.Random, max_len: int = 12) -> str:
    return "".join(rng.choice(CHAR_POOL) for _ in range(rng.randint(0, max_len)))


def generate_strings(pattern: str, rng: random.Random, n_pos: int = 40, n_neg: int = 80) -> List[str]:
    """Samples of the pattern, mutations of them and random strings (deduplicated)."""
    sampler = RegexSampler(pattern, rng)
    pos = [sampler.sample() for _ in range(n_pos)]
    out = list(dict.fromkeys(pos))
    base = out or [""]
    negs = [""]
    for i in range(n_neg):
        if i % 4 == 3:
            negs.append(random_string(rng))
        else:
            s = rng.choice(base)
            for _ in range(1 + (rng.random() < 0.3)):
                s = mutate(s, rng)
            negs.append(s)
    seen = set(out)
    out += [s for s in dict.fromkeys(negs) if s not in seen]
    return out


def unsupported_features(pattern: str) -> List[str]:
    """Features of the pattern that we reject by design (Python parses them): lookaround,
    backreferences, ``\\b``/``\\B``, inline flags, and anchors other than a ``^``/``\\A``
    that starts the whole pattern or a ``$``/``\\Z`` that ends it.  Anchors at the
    edges of groups or alternation branches (``^a$|^b$``) are reported apart from
    anchors in the middle (``a^b``), as the former are still regular."""
    tree = _P.parse(pattern, re.ASCII)
    found: Set[str] = set()
    if tree.state.flags & ~(re.ASCII | re.UNICODE):
        found.add("inline flags")
    begin = (_C.AT_BEGINNING, _C.AT_BEGINNING_STRING)
    end = (_C.AT_END, _C.AT_END_STRING)

    def edges(seq, at_start: bool, at_end: bool, top: bool) -> None:
        items = list(seq)
        for i, (op, av) in enumerate(items):
            first = at_start and all(o is _C.AT and a in begin for o, a in items[:i])
            last = at_end and all(o is _C.AT and a in end for o, a in items[i + 1 :])
            if op is _C.AT:
                if av in (_C.AT_BOUNDARY, _C.AT_NON_BOUNDARY):
                    found.add("\\b/\\B")
                elif (av in begin and not first) or (av in end and not last):
                    found.add("anchor inside")
                elif av in begin + end and not top:
                    found.add("anchor at group/branch edge")
            elif op in (_C.ASSERT, _C.ASSERT_NOT):
                found.add("lookaround")
                edges(av[1], False, False, False)
            elif op in (_C.GROUPREF, _C.GROUPREF_EXISTS):
                found.add("backreference")
                if op is _C.GROUPREF_EXISTS:
                    edges(av[1], False, False, False)
                    if av[2] is not None:
                        edges(av[2], False, False, False)
            elif op is _C.BRANCH:
                for b in av[1]:
                    edges(b, first, last, False)
            elif op is _C.SUBPATTERN:
                if av[1] or av[2]:
                    found.add("inline flags")
                edges(av[-1], first, last, False)
            elif op is getattr(_C, "ATOMIC_GROUP", None):
                edges(av, first, last, False)
            elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT, getattr(_C, "POSSESSIVE_REPEAT", None)):
                edges(av[2], False, False, False)

    edges(tree, True, True, True)
    return sorted(found)


def python_labels(pattern: str, strings: Sequence[str], oracle: str = "re") -> Tuple[List[str], List[bool]]:
    """``re.fullmatch(pattern, s, re.ASCII)`` for each string.

    With ``oracle="regex"`` the third-party ``regex`` module (``V0``: ``re``'s
    semantics) answers instead, under a 1 s timeout per string, and strings it times out
    on are left out: the fallback for patterns on which ``re`` backtracks for minutes."""
    if oracle == "regex":
        import regex  # type: ignore

        rx2 = regex.compile(pattern, regex.ASCII | regex.V0)
        kept, labels = [], []
        for s in strings:
            try:
                labels.append(rx2.fullmatch(s, timeout=1.0) is not None)
                kept.append(s)
            except TimeoutError:
                pass
        return kept, labels
    rx = re.compile(pattern, re.ASCII)
    return list(strings), [rx.fullmatch(s) is not None for s in strings]


class _RawVocab:
    """A byte-level RAW vocabulary (token i = byte i) and a compiler for it."""

    def __init__(self) -> None:
        import numpy as np

        import xg2_plugin as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo([bytes([i]) for i in range(256)])
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False)
        self.mask = np.zeros((1, 8), dtype=np.int32)


def ours_fullmatch(compiled, s: str, xgr) -> bool:
    m = xgr.GrammarMatcher(compiled)
    return bool(m.accept_string(s)) and m.is_completed()


def ours_mask_walk(compiled, s: str, raw: _RawVocab) -> Optional[int]:
    """Feed ``s`` byte by byte through the mask; the index of the first byte the mask
    (or accept_token) refuses, len(bytes) if it ends incomplete, None if all fine."""
    m = raw.xgr.GrammarMatcher(compiled)
    data = s.encode("utf-8")
    for i, b in enumerate(data):
        m.fill_next_token_bitmask(raw.mask)
        if not _bit(raw.mask, b) or not m.accept_token(b):
            return i
    return None if m.is_completed() else len(data)


def check_agreement(pattern: str, compiled, raw: _RawVocab, strings: Iterable[str],
                    expected: Optional[Sequence[bool]] = None) -> Dict[str, Any]:  # fmt: skip
    """Compare ours with ``re.fullmatch`` on each string; returns counts and examples."""
    strings = list(strings)
    if expected is None:
        rx = re.compile(pattern, re.ASCII)
        expected = [rx.fullmatch(s) is not None for s in strings]
    out = {"strings": len(strings), "matching": sum(expected), "mismatches": [], "mask_mismatches": []}
    for s, want in zip(strings, expected):
        try:
            got = ours_fullmatch(compiled, s, raw.xgr)
        except Exception as e:  # the matcher raised: never acceptable
            out["mismatches"].append({"string": s, "python": want, "ours": f"{type(e).__name__}: {e}"})
            continue
        if got != want:
            out["mismatches"].append({"string": s, "python": want, "ours": got})
        elif got:
            at = ours_mask_walk(compiled, s, raw)
            if at is not None:
                out["mask_mismatches"].append({"string": s, "refused_at_byte": at})
    return out


def pattern_task(args: Dict[str, Any], ctx: common.TaskContext) -> Dict[str, Any]:
    """Compile one pattern and compare it with Python (runs in a worker)."""
    ctx.phase("init", 600)
    if "raw" not in _WORKER_STATE:
        _WORKER_STATE["raw"] = _RawVocab()
    raw: _RawVocab = _WORKER_STATE["raw"]
    xgr = raw.xgr
    pattern = args["pattern"]
    out: Dict[str, Any] = {"pattern": pattern}
    try:
        rx = re.compile(pattern, re.ASCII)
        out["python_error"] = None
        out["unsupported"] = unsupported_features(pattern)
    except (re.error, OverflowError, RecursionError) as e:
        rx = None
        out["python_error"] = f"{type(e).__name__}: {e}"
        out["unsupported"] = []
    ctx.phase("compile", args["compile_timeout"])
    t0 = time.perf_counter()
    try:
        compiled = raw.compiler.compile_grammar(xgr.Grammar.from_regex(pattern))
        out["ours"] = "compiled"
    except (xgr.GrammarError, xgr.LimitExceededError) as e:
        compiled = None
        msg = str(e)
        out["ours"] = "clear_error" if msg.strip() else "bad_error"
        out["error"] = f"{type(e).__name__}: {msg}"[:300]
    except Exception as e:
        compiled = None
        out["ours"] = "bad_error"
        out["error"] = f"{type(e).__name__}: {e}"[:300]
    out["compile_s"] = time.perf_counter() - t0
    if compiled is None or rx is None:
        return out
    ctx.phase("generate", 30)
    rng = random.Random(f"{args['seed']}:{pattern}")
    strings = generate_strings(pattern, rng, args["n_pos"], args["n_neg"])
    ctx.phase("python-oracle", 30)  # catastrophic backtracking lands here
    kept, expected = python_labels(pattern, strings, args.get("oracle", "re"))
    out["oracle"] = args.get("oracle", "re")
    out["dropped_slow"] = len(strings) - len(kept)
    ctx.phase("check", args["check_timeout"])
    out.update(check_agreement(pattern, compiled, raw, kept, expected))
    out["mismatches"] = out["mismatches"][:5]
    out["mask_mismatches"] = out["mask_mismatches"][:5]
    return out


def collect_patterns(corpora: Dict[str, List[SchemaCase]]) -> Dict[str, List[str]]:
    """pattern -> the corpora it appears in (sorted by pattern)."""
    where: Dict[str, Set[str]] = defaultdict(set)
    for corpus, cases in corpora.items():
        for case in cases:
            for p in schema_patterns(case.schema):
                where[p].add(corpus)
    return {p: sorted(where[p]) for p in sorted(where)}


def run_patterns(opts: argparse.Namespace, corpora: Dict[str, List[SchemaCase]]) -> Tuple[str, Dict[str, Any]]:
    patterns = collect_patterns(corpora)
    tasks = []
    for p in patterns:
        args = {"pattern": p, "seed": opts.seed, "n_pos": opts.pattern_samples, "n_neg": 2 * opts.pattern_samples,
                "compile_timeout": opts.pattern_timeout, "check_timeout": 120}  # fmt: skip
        tasks.append((p, args, 600))
    results: Dict[str, Dict[str, Any]] = {}
    with common.TaskPool(opts.workers, memory_limit_gb=opts.memory_limit_gb) as pool:
        outcomes = dict(pool.map(pattern_task, tasks))
        # re.fullmatch backtracks for ages on some generated strings: ask `regex` instead
        args_of = {p: a for p, a, _ in tasks}
        retry = [(p, dict(args_of[p], oracle="regex"), 600) for p, o in outcomes.items()
                 if o.status == "timeout" and o.phase == "python-oracle"]  # fmt: skip
        outcomes.update(pool.map(pattern_task, retry))
        for p in patterns:
            outcome = outcomes[p]
            if outcome.status == "done":
                r = outcome.value
            elif outcome.status == "timeout":
                r = {"pattern": p, "ours": "hang" if outcome.phase == "compile" else f"timeout in {outcome.phase}"}
            elif outcome.status == "died":
                r = {"pattern": p, "ours": "died", "error": outcome.error}
            else:  # the harness itself raised (ours' errors are caught inside the task)
                r = {"pattern": p, "ours": "harness_error", "error": outcome.error}
            r["corpora"] = patterns[p]
            results[p] = r
    return pattern_report(results), results


def classify_pattern(r: Dict[str, Any]) -> str:
    ours = r["ours"]
    if ours == "compiled":
        if r.get("python_error"):
            return "compiled, Python rejects (not compared)"
        if "strings" not in r:
            return "failure: not checked"
        if r["mismatches"]:
            return "FAILURE: disagrees with re.fullmatch"
        if r["mask_mismatches"]:
            return "FAILURE: mask refuses an accepted string"
        if r.get("unsupported"):
            return "compiled and agrees (with " + "/".join(r["unsupported"]) + ")"
        return "compiled and agrees"
    if ours == "clear_error":
        if r.get("python_error"):
            return "clear error (Python rejects it too)"
        if r.get("unsupported"):
            return "clear error: unsupported feature (" + "/".join(r["unsupported"]) + ")"
        return "clear error: regular pattern refused"
    if ours.startswith("timeout in python") or ours.startswith("timeout in generate"):
        return "not checked: Python/generator too slow"
    if ours == "hang":
        return "FAILURE: compile hangs (> 10 s)"
    if ours.startswith("timeout"):
        return f"FAILURE: {ours}"
    if ours == "harness_error":
        return "not checked: harness error"
    if ours == "died":
        return "FAILURE: crash (worker died)"
    return "FAILURE: unclear error"


def pattern_report(results: Dict[str, Dict[str, Any]]) -> str:
    by_corpus: Dict[str, Counter] = defaultdict(Counter)
    for r in results.values():
        cls = classify_pattern(r)
        by_corpus["all"][cls] += 1
        for c in r["corpora"]:
            by_corpus[c][cls] += 1
    cols = ["all"] + [c for c in CORPORA if c in by_corpus]
    classes = sorted(by_corpus["all"], key=lambda k: (k.startswith("FAILURE"), -by_corpus["all"][k]))
    n_strings = sum(r.get("strings", 0) for r in results.values())
    n_match = sum(r.get("matching", 0) for r in results.values())
    compared = sum(1 for r in results.values() if "strings" in r)
    n_dropped = sum(r.get("dropped_slow", 0) for r in results.values())
    n_regex = sum(r.get("oracle") == "regex" for r in results.values())
    lines = [
        f"### Pattern agreement: {len(results)} distinct patterns",
        "",
        f"Compared with `re.fullmatch(p, s, re.ASCII)`: {compared} patterns on {n_strings} strings "
        f"({n_match} matching, {n_strings - n_match} not).  For {n_regex} patterns `re` backtracked too long "
        f"and the `regex` module (V0, same semantics) answered instead, leaving out {n_dropped} strings "
        "it took over 1 s on.",
        "",
        markdown_table(["outcome"] + [("patterns" if c == "all" else CORPUS_TITLES[c]) for c in cols],
                       [[k] + [by_corpus[c].get(k, 0) for c in cols] for k in classes]),  # fmt: skip
    ]
    failures = [r for r in results.values() if classify_pattern(r).startswith("FAILURE")]
    if failures:
        lines += ["", "Failures (first 30):", ""]
        rows = []
        for r in failures[:30]:
            ex = (r.get("mismatches") or r.get("mask_mismatches") or [{}])[0]
            rows.append([f"`{r['pattern'][:80]}`", classify_pattern(r), f"`{json.dumps(ex)[:120]}`" if ex else r.get("error", "")])
        lines.append(markdown_table(["pattern", "outcome", "example"], rows, "lll"))
    refused = [r for r in results.values() if classify_pattern(r) == "clear error: regular pattern refused"]
    if refused:
        lines += ["", "Regular patterns refused with an error (first 20):", ""]
        lines.append(markdown_table(["pattern", "error"], [[f"`{r['pattern'][:80]}`", r.get("error", "")[:150]]
                                                            for r in refused[:20]], "ll"))  # fmt: skip
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="xg2", help="comma-separated: xg2 (always run), xgrammar, llguidance")
    ap.add_argument("--corpus", default="jsts,maskbench", help="comma-separated: jsts, maskbench")
    ap.add_argument("--maskbench", default=common.shared_path("data", "maskbench-dev"), help="MaskBench directory")
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"), help="HF tokenizer directory")
    ap.add_argument("--cache-dir", default=None, help="where the JSON-Schema-Test-Suite is cached (~/.cache/xg2_plugin)")
    ap.add_argument("--suite-version", default=common.JSONSCHEMA_SDIST_VERSION, help="jsonschema sdist version")
    ap.add_argument("--strict", action="store_true", help="strict_mode=True (no extra properties/items)")
    ap.add_argument("--lenient", action="store_true", help="lenient=True (ignore unsupported keywords)")
    ap.add_argument("--any-order", action="store_true", help="any_order=True: properties in any order "
                    "(ours and XGrammar; by default both follow the schema's order, as XGrammar does)")
    ap.add_argument("--cache-limit-bytes", type=int, default=None,
                    help="ours: the token-mask cache limit (a tiny one, say 65536, forces evictions)")
    ap.add_argument("--limit", type=int, default=None, help="a random sample of N schemas per corpus (--seed)")
    ap.add_argument("--files", default=None, help="only files whose base name matches this glob")
    ap.add_argument("--workers", type=int, default=1, help="worker processes per engine (engines run side by side; default 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of --limit sampling and of pattern strings")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema and engine (default 60)")
    ap.add_argument("--memory-limit-gb", type=float, default=None, help="address-space limit per worker")
    ap.add_argument("--out", default=None, help="write the Markdown report here (also printed)")
    ap.add_argument("--json", default=None, help="per-schema results (default: --out with .json)")
    ap.add_argument("--resume", action="store_true", help="skip the runs recorded in <json>.partial.jsonl")
    ap.add_argument("--merge", nargs="+", metavar="PARTIAL", default=None,
                    help="run nothing: report from these *.partial.jsonl files (later ones win), on the schemas "
                         "with a result for every engine")  # fmt: skip
    ap.add_argument("--patterns", action="store_true", help="run the regex pattern agreement check instead")
    ap.add_argument("--pattern-samples", type=int, default=40, help="generated positives per pattern (2x negatives)")
    ap.add_argument("--pattern-timeout", type=float, default=10.0, help="compile limit per pattern (default 10 s)")
    ap.add_argument("--quiet", dest="progress", action="store_false", help="no progress lines on stderr")
    opts = ap.parse_args(argv)
    if opts.json is None and opts.out:
        opts.json = os.path.splitext(opts.out)[0] + ".json"
    return opts


def load_corpora(opts: argparse.Namespace) -> Tuple[Dict[str, List[SchemaCase]], Dict[str, Dict[str, int]]]:
    corpora: Dict[str, List[SchemaCase]] = {}
    excluded: Dict[str, Dict[str, int]] = {}
    for corpus in [c.strip() for c in opts.corpus.split(",") if c.strip()]:
        if corpus == "jsts":
            cases, excluded["jsts"] = load_jsts(opts.cache_dir, opts.files, opts.suite_version)
        elif corpus == "maskbench":
            cases = common.load_maskbench(opts.maskbench, opts.files)
        else:
            raise SystemExit(f"unknown corpus {corpus!r} (choose from {', '.join(CORPORA)})")
        corpora[corpus] = select_cases(cases, opts.limit, opts.seed)
    return corpora, excluded


def main(argv: Optional[Sequence[str]] = None) -> int:
    opts = parse_args(argv)
    corpora, excluded = load_corpora(opts)
    env = common.environment_summary()
    header = [
        "## Conformance" if not opts.patterns else "## Regex pattern agreement",
        "",
        "Run: `conformance.py " + " ".join(sys.argv[1:] if argv is None else argv) + "`  ",
        "Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()),
        "",
    ]
    if opts.patterns:
        report, results = run_patterns(opts, corpora)
        doc = {"mode": "patterns", "environment": env, "results": results}
    else:
        engines = ["xg2"] + [e.strip() for e in opts.engines.split(",") if e.strip() and e.strip() != "xg2"]
        for e in list(engines):
            why = engine_available(e)
            if why:
                print(f"engine {e} skipped: {why}", file=sys.stderr)
                header.append(f"Engine `{e}` not run: {why}.  ")
                engines.remove(e)
        if not engines:
            print("no engine can run", file=sys.stderr)
            return 2
        header += [
            f"Options: strict_mode={opts.strict}, lenient={opts.lenient}, any_order={opts.any_order}, "
            f"cache_limit_bytes={opts.cache_limit_bytes or 'default'}, any whitespace, "
            f"timeout {opts.timeout:g} s per schema, tokenizer `{os.path.basename(opts.tokenizer.rstrip('/'))}`.",
            "",
        ]
        t0 = time.perf_counter()
        if opts.merge:
            results, dropped = merge_partials(opts.merge, corpora, engines)
            for c, n in dropped.items():
                if n:
                    header.append(f"{CORPUS_TITLES[c]}: {n} schemas left out (no result for every engine in the "
                                  "merged runs).  ")  # fmt: skip
            corpora = {c: [case for case in corpora[c] if case.id in results[c]] for c in corpora}
            tail = "Merged from: " + ", ".join(f"`{os.path.basename(p)}`" for p in opts.merge) + "."
        else:
            results = run_conformance(opts, corpora, engines)
            tail = f"Wall time {time.perf_counter() - t0:.0f} s with {opts.workers} worker(s) per engine."
        parts = [corpus_report(c, results[c], corpora[c], engines, excluded.get(c)) for c in corpora]
        report = "\n\n".join(parts) + "\n\n" + tail
        doc = {
            "mode": "conformance",
            "environment": env,
            "options": {k: v for k, v in vars(opts).items()},
            "engines": engines,
            "excluded": excluded,
            "summary": {c: {e: {k: v for k, v in summarize(results[c], e).items()
                                if k not in ("compile_ms", "schema_ms", "errors")}
                            for e in engines} for c in corpora},  # fmt: skip
            "results": results,
        }
    text = "\n".join(header) + "\n" + report + "\n"
    print(text)
    if opts.out:
        with open(opts.out, "w", encoding="utf-8") as f:
            f.write(text)
    if opts.json:
        with open(opts.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
