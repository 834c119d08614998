"""The mask oracle on JSON Schema grammars, with real tool schemas and real vocabularies.

Schemas are the parameter schemas of BFCL's "simple" Python functions (the ``bfcl-eval``
wheel, downloaded from PyPI on first use and cached); instances are their ground-truth
arguments.  At every step of each instance, tokenized by the real tokenizer, every
allowed token must be accepted, a sample of disallowed ones rejected, and the stop token
allowed exactly when the text so far is a complete instance; at the end the instance is
valid per ``jsonschema`` and the matcher is complete.
"""

import glob
import json
import os
import subprocess
import sys
import zipfile

import jsonschema
import numpy as np
import pytest

import xg2_plugin as xgr
from vocabs import bits_of_row, fill

N_FUNCTIONS = 10
N_DISALLOWED = 2000
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "xg2_plugin")

_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def _load_bfcl_wheel() -> zipfile.ZipFile:
    os.makedirs(CACHE, exist_ok=True)
    wheels = glob.glob(os.path.join(CACHE, "bfcl_eval-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "bfcl-eval", "-d", CACHE],
            check=True,
            capture_output=True,
        )
        wheels = glob.glob(os.path.join(CACHE, "bfcl_eval-*.whl"))
    assert wheels, "could not download the bfcl-eval wheel from PyPI"
    return zipfile.ZipFile(sorted(wheels)[-1])


def _to_json_schema(s):
    """BFCL writes Python type names ("dict", "float", "tuple", "any")."""
    if isinstance(s, dict):
        out = {k: _to_json_schema(v) for k, v in s.items() if k not in ("optional",)}
        t = s.get("type")
        if isinstance(t, str) and t in _BFCL_TYPES:
            if _BFCL_TYPES[t] is None:
                out.pop("type")
            else:
                out["type"] = _BFCL_TYPES[t]
        return out
    if isinstance(s, list):
        return [_to_json_schema(x) for x in s]
    return s


def _instance(args: dict) -> dict:
    """First acceptable value of each argument ("" marks an omittable one)."""
    out = {}
    for name, values in args.items():
        chosen = [v for v in values if v != ""]
        if chosen:
            out[name] = chosen[0]
    return out


def _cases():
    z = _load_bfcl_wheel()
    funcs = z.read("bfcl_eval/data/BFCL_v4_simple_python.json").decode().splitlines()
    answers = z.read("bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json").decode().splitlines()
    cases = []
    for line, ans in zip(funcs, answers):
        fn = json.loads(line)["function"][0]
        truth = json.loads(ans)["ground_truth"][0]
        schema = _to_json_schema(fn["parameters"])
        inst = _instance(truth[fn["name"]])
        try:
            valid = jsonschema.Draft202012Validator(schema).is_valid(inst)
        except jsonschema.exceptions.SchemaError:
            continue
        if valid and inst:
            cases.append((fn["name"], schema, inst))
    # A spread: every 17th function (deterministic), with nested ones preferred first.
    nested = [c for c in cases if '"type": "object"' in json.dumps(c[1]["properties"])]
    rest = cases[::17]
    return (nested[:3] + rest)[:N_FUNCTIONS]


CASES = None


def _get_cases():
    global CASES
    if CASES is None:
        CASES = _cases()
    return CASES


def test_bfcl_cases_loaded():
    cases = _get_cases()
    assert len(cases) >= N_FUNCTIONS // 2, f"only {len(cases)} BFCL functions usable"


@pytest.mark.parametrize("index", range(N_FUNCTIONS))
def test_json_schema_mask_matches_matcher(deepseek, index):
    cases = _get_cases()
    assert index < len(cases), f"only {len(cases)} BFCL functions usable"
    name, schema, inst = cases[index]
    check_instance(deepseek, schema, inst, [99, index], name)


# Bounded strings: short bounds unroll into plain automata, long ones run as
# counted loops; near the bound their masks come from length-bounded slices.
BOUNDED = [
    ({"type": "string", "maxLength": 5}, ["abcde", "ab", "", "\u00e9t\u00e9"]),
    ({"type": "string", "maxLength": 32}, ["my_redshift_database", "x" * 31 + "y", "naïve café — ünïcødé ✓ 日本語"]),
    ({"type": "string", "minLength": 3, "maxLength": 40}, ["abc", "hello world, this is forty characters!!", "tab\there"]),
    ({"type": "string", "maxLength": 64, "minLength": 1}, ["localhost", "a" * 64, "quote \" inside"]),
    ({"type": "string", "maxLength": 100}, ["words " * 16, "emoji 😀😀😀 and more"]),
    ({"type": "string", "maxLength": 200}, ["long " * 39, "x" * 200, "word " * 14 + " " * 70 + "end"]),
    ({"type": "string", "minLength": 150}, ["x" * 150, "many words " * 14 + "end."]),  # (near the minimum)
    ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "id": {"type": "integer"}},
      "required": ["name"]}, [{"name": "ab cd ef gh", "id": 3}, {"name": "twelve chars"}]),
]


@pytest.mark.parametrize("case", range(len(BOUNDED)))
def test_bounded_string_masks_match_matcher(deepseek, mistral, case):
    schema, instances = BOUNDED[case]
    for vocab in (deepseek, mistral):
        for j, inst in enumerate(instances):
            if isinstance(inst, str):
                inst = json.loads(json.dumps(inst).replace("\\\\", "\\"))  # keep the escapes written above
            check_instance(vocab, schema, inst, [7, case, j], f"bounded {case}.{j}")


# Dense string states that take a token slice: a pattern's "." (no line
# terminators: the JSON and text slices leave U+2028/U+2029 out for it), an
# identifier class (the ASCII letters-and-digits slice), a URL-like path class
# (no slice fits; the trie walk), a plain string holding U+2028 (the slice
# applies; the few tokens with that character are walked), "\S" (the visible
# slice), letters, digits and space (their slice), and lower-case classes no
# slice fits (the walk takes whole trie subtrees whose bytes the state loops on).
PATTERNS = [
    ({"type": "string", "pattern": "^https://example.org/api/.*$"},
     ["https://example.org/api/organisations/organisation_1", "https://example.org/api/ünï cødé, \"q\""]),
    ({"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, ["my_identifier2", "X"]),
    ({"type": "string", "pattern": "^(https?://)?[a-z0-9.-]+\\.[a-z]{2,6}[/\\w .-]*$"},
     ["https://en.wikipedia.org/wiki/Color", "example.com/a b/c.d"]),
    ({"type": "object", "properties": {"s": {"type": "string"}, "p": {"type": "string", "pattern": "^.*$"}}},
     [{"s": "line\u2028sep\u2029end", "p": "any text but newlines"}]),
    ({"type": "string", "pattern": "^\\S+$"}, ["no_spaces-here/ünïcødé,\"q\"", "a"]),
    ({"type": "string", "pattern": "^[a-zA-Z0-9 ]+$"}, ["Hello World 42", "x"]),
    ({"type": "string", "pattern": "^[a-z\\d.+-]+$"}, ["pkg.name+v1-2", "z"]),
    ({"type": "object", "properties": {"k": {"type": "string", "pattern": "^([a-z]|[ ])*$"}}},
     [{"k": "lower case words only"}, {"k": ""}]),
]


@pytest.mark.parametrize("case", range(len(PATTERNS)))
def test_sliced_string_masks_match_matcher(deepseek, mistral, case):
    schema, instances = PATTERNS[case]
    for vocab in (deepseek, mistral):
        for j, inst in enumerate(instances):
            check_instance(vocab, schema, inst, [8, case, j], f"pattern {case}.{j}")


# String constraints the front-end intersects into one automaton, written one rule
# per state (merged by the core into one right-linear region): a searched pattern
# with a minimum length, keys that match a pattern but are not a declared name (a
# state that only calls the key's automaton, nested in mask walks from the start,
# handing over to the parser at the closing quote), a URL with a length bound; and
# a "+" class (the slice's loop state is entered after one character).
REGIONS = [
    ({"type": "string", "pattern": "\\d+-[A-Fa-f0-9]*-[a-f0-9]{4}", "minLength": 12},
     ["1-60f6f7e7-0123", "x 12-ab-cdef tail"]),
    ({"type": "object", "properties": {"basic": {"type": "string"}},
      "patternProperties": {"^[a-z]+$": {"type": ["integer", "string"]}}},
     [{"basic": "x", "ab": 1, "basics": 2}, {"zz": 3}]),
    ({"type": "string", "pattern": "^https?://[a-z0-9.-]+(/[\\w.-]*)*$", "maxLength": 40},
     ["https://example.com/image/a.png", "http://x.io"]),
    ({"type": "string", "pattern": "^[\\w\\s-]+$"}, ["image-123 large", "a"]),
]


def _check_valid_instances(vocabs, group, case, tag, label):
    """Every instance of group[case] (all valid per ``jsonschema``) through the oracle."""
    schema, instances = group[case]
    assert all(jsonschema.Draft202012Validator(schema).is_valid(x) for x in instances)
    for vocab in vocabs:
        for j, inst in enumerate(instances):
            check_instance(vocab, schema, inst, [tag, case, j], f"{label} {case}.{j}")


@pytest.mark.parametrize("case", range(len(REGIONS)))
def test_right_linear_string_masks_match_matcher(deepseek, mistral, case):
    _check_valid_instances((deepseek, mistral), REGIONS, case, 9, "region")


# Key states that both scan bytes and call rules: declared names beside free extra
# keys (any string but those names); keys of two long patterns beside a declared
# name.  Their masks come from one walk per way in (the state's own bytes, then
# each callee from its start), merged; the parser, based at the key state, takes
# over where they meet.  The last: keys matching a counted class (a repetition of
# a one-character rule, iterated by the walk with its count) beside every other key
# (the pattern's complement).
SPLITS = [
    ({"type": "object", "properties": {"concurrent": {"type": "boolean"}, "chunkSize": {"type": "number"}},
      "additionalProperties": {"type": ["string", "array"]}},
     [{"concurrent": True, "chunkSize": 3, "*.js": "eslint --fix", "c": ["x"], "concurrently": "a b"}]),
    ({"type": "object", "properties": {"ID": {"type": "integer"}},
      "patternProperties": {"^[a-z][a-z0-9_]{1,80}$": {"type": "string"}, "^[0-9][0-9a-f]{1,80}$": {"type": "boolean"}},
      "additionalProperties": False},
     [{"ID": 1, "ids": "x", "42": True, "0ff": False}, {"007": False, "i_d": "y"}]),
    ({"type": "object", "minProperties": 1,
      "patternProperties": {"^[a-zA-Z0-9_-]{0,210}$": {"anyOf": [{"type": "integer"}, {"type": "array"}]}},
      "additionalProperties": {"type": "string"}},
     [{"key1": 1, "a-b_c": [2], "": 3, "has space": "t", "Counted_Key-With_Many-Iterations": 5}]),
]


@pytest.mark.parametrize("case", range(len(SPLITS)))
def test_split_key_masks_match_matcher(deepseek, mistral, case):
    _check_valid_instances((deepseek, mistral), SPLITS, case, 10, "split")


def test_whitespace_runs_at_chain_key_starts_match_matcher(deepseek, mistral):
    # The key start after a comma in a chain of optional properties loops on
    # whitespace and calls the next link, which calls the next: its tokens are
    # walked as one set of configurations per byte, and a whitespace byte gives
    # that set back (its copy is reused down every run of whitespace).  Pretty-
    # printed instances put those states behind every kind of whitespace run;
    # there, every token that starts with whitespace or a quote is checked
    # against the matcher, allowed or not.
    props = {f"k{i:02d}": [{"type": "integer"}, {"type": "string"}, {"type": "boolean"}][i % 3] for i in range(40)}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    inst = {k: (7 if i % 3 == 0 else "v" if i % 3 == 1 else True) for i, k in enumerate(props) if i % 4 != 1}
    assert jsonschema.Draft202012Validator(schema).is_valid(inst)
    for vocab in (deepseek, mistral):
        V = vocab.vocab_size
        compiled = vocab.compiler.compile_json_schema(schema, strict_mode=False)
        watched = [t for t, b in enumerate(vocab.token_bytes[:V]) if b and b[:1] in (b" ", b"\n", b"\t", b"\r", b'"')]
        for indent in (2, "\t", "\n  "):
            text = json.dumps(inst, indent=indent)
            m = xgr.GrammarMatcher(compiled)
            so_far, checked = b"", 0
            for t in vocab.encode(text):
                bits = bits_of_row(fill(m, V), V)
                if so_far.rstrip(b" \n\t").endswith((b",", b"{")):  # a key start, maybe inside whitespace
                    f = m.fork()
                    for x in watched:
                        ok = f.accept_token(x)
                        if ok:
                            f.rollback(1)
                        assert bool(bits[x]) == ok, (indent, so_far[-20:], vocab.token_bytes[x])
                    checked += 1
                assert m.accept_token(t)
                so_far += vocab.token_bytes[t]
            assert m.is_completed() and checked >= len(inst), checked


def test_value_shared_by_many_properties_is_one_rule_and_exact(deepseek):
    # 120 integer properties (every 10th required): the integer value's text is
    # written once as a rule, and the core calls it from each link of the chain of
    # properties instead of copying it into every link's automaton -- 16 states a
    # property, not 81.  Masks must stay exact at the calls (key, colon, value,
    # comma), and wrong instances must be refused.
    props = {f"p{i:03d}": {"type": "integer"} for i in range(120)}
    required = [f"p{i:03d}" for i in range(0, 120, 10)]
    schema = {"type": "object", "properties": props, "required": required}
    grammar = xgr.Grammar.from_json_schema(schema, strict_mode=False)
    assert grammar.num_states < 30 * len(props)
    inst = {k: (i * 7919) % 100003 - 50000 for i, k in enumerate(props) if k in required or i % 7 == 3}
    check_instance(deepseek, schema, inst, [8, 1], "shared integer value")
    compiled = deepseek.compiler.compile_json_schema(schema, strict_mode=False)
    for bad in ({**inst, "p013": 1.5}, {k: v for k, v in inst.items() if k != "p050"}):
        assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
        m = xgr.GrammarMatcher(compiled)
        ok = all(m.accept_token(t) for t in deepseek.encode(json.dumps(bad)))
        assert not (ok and m.is_completed()), bad


def test_masks_hold_when_the_cache_evicts(deepseek):
    # A 32 KiB limit holds about one vocabulary-wide mask: entries are evicted and
    # recomputed between fills, and every mask must stay exact.
    tiny = xgr.GrammarCompiler(deepseek.compiler.tokenizer_info, cache_limit_bytes=1 << 15)
    try:
        evictions = tiny.get_mask_cache_stats()["evictions"]
        cases = _get_cases()
        for index in range(3):
            name, schema, inst = cases[index]
            check_instance(deepseek, schema, inst, [5, index], f"tiny cache {name}", compiler=tiny)
        for case, (schema, instances) in enumerate(BOUNDED[:4]):
            check_instance(deepseek, schema, instances[0], [6, case], f"tiny cache bounded {case}", compiler=tiny)
        assert tiny.get_mask_cache_stats()["evictions"] > evictions + 10, "the tiny limit forced no evictions"
    finally:
        xgr.GrammarCompiler(deepseek.compiler.tokenizer_info)  # the default limit again


def test_precomputed_masks_are_exact_and_used(deepseek):
    # The compiler's background precompute runs while the matcher fills (the pool
    # is shared by both threads); every mask must stay exact, the precomputed
    # entries must be what the fills find, and precomputing again finds them all.
    info = deepseek.compiler.tokenizer_info
    comp = xgr.GrammarCompiler(info, precompute_states=64)
    try:
        comp.clear_cache()
        name, schema, inst = _get_cases()[1]
        compiled = comp.compile_json_schema(schema, strict_mode=False)
        assert compiled.precompute_future is None  # (not before a first mask: that fill goes first)
        check_instance(deepseek, schema, inst, [7, 1], f"precompute {name}", compiler=comp)
        future = compiled.precompute_future
        assert future is not None
        done = future.result(timeout=120)
        assert 0 < done <= 64
        before = comp.get_mask_cache_stats()
        assert before["entries"] >= done and before["hits"] > 0
        again = compiled.precompute(done)
        after = comp.get_mask_cache_stats()
        assert again == done and after["misses"] == before["misses"], (before, after)
        assert after["hits"] == before["hits"] + done
        everything = compiled.precompute()
        assert done <= everything <= compiled.grammar.num_states
        for bad in (-1, 1.5, True, "3"):
            with pytest.raises(xgr.InvalidArgumentError):
                compiled.precompute(bad)
        for bad in (-1, True, "3", float("nan")):
            with pytest.raises(xgr.InvalidArgumentError):
                compiled.precompute(max_ms=bad)
            with pytest.raises(xgr.InvalidArgumentError):
                xgr.GrammarCompiler(info, precompute_states=8, precompute_ms=bad)
        with pytest.raises(xgr.InvalidArgumentError):
            xgr.GrammarCompiler(info, precompute_states=-2)
        assert xgr.GrammarCompiler(info).compile_json_schema(schema).precompute_future is None
    finally:
        xgr.GrammarCompiler(info)  # the default limit again


def test_precompute_stops_at_its_time_budget(deepseek):
    # The budget is the prefill an engine overlaps the work with: none left, no
    # state is computed; a budget cut short leaves states for a later call; with
    # time enough it goes as far as the state count.
    info = deepseek.compiler.tokenizer_info
    comp = xgr.GrammarCompiler(info)
    comp.clear_cache()
    schema = {"type": "object", "properties": {f"k{i}": {"type": ["string", "integer", "boolean"][i % 3]}
                                               for i in range(40)}}
    compiled = comp.compile_json_schema(schema)
    misses = comp.get_mask_cache_stats()["misses"]  # (counted since the pool was made)
    assert compiled.precompute(max_ms=0) == 0
    assert comp.get_mask_cache_stats()["misses"] == misses
    first = compiled.precompute(max_ms=0.05)  # the state in progress finishes: at least one
    total = compiled.precompute(max_ms=60_000)
    assert 1 <= first < total == compiled.precompute() == compiled.precompute(max_ms=float("inf"))
    assert comp.get_mask_cache_stats()["misses"] == misses + total  # each state computed once in all
    background = xgr.GrammarCompiler(info, precompute_states=10_000, precompute_ms=60_000)
    background.clear_cache()
    compiled = background.compile_json_schema(schema, any_whitespace=False)
    fill(xgr.GrammarMatcher(compiled), info.vocab_size)  # (the first mask starts it)
    assert compiled.precompute_future.result(timeout=120) > 0



def _accepts_then_undoes(matcher, token) -> bool:
    """Whether the matcher accepts the token; if it does, the step is rolled back."""
    if not matcher.accept_token(token):
        return False
    matcher.rollback(1)
    return True

def check_instance(vocab, schema, inst, seed, name, compiler=None):
    """At every step of json.dumps(inst): allowed tokens are accepted, a sample of the
    others rejected, the stop token allowed exactly when complete (per jsonschema)."""
    V = vocab.vocab_size
    validator = jsonschema.Draft202012Validator(schema)
    compiled = (compiler or vocab.compiler).compile_json_schema(schema, strict_mode=False)
    text = json.dumps(inst)
    ids = vocab.encode(text)
    rng = np.random.default_rng(seed)
    m = xgr.GrammarMatcher(compiled)
    so_far = b""
    for k, t in enumerate(ids + [vocab.stop_id]):
        where = f"{name} step {k} after {so_far[-40:]!r}"
        bits = bits_of_row(fill(m, V), V)
        # Completion agrees with jsonschema on the text so far.
        try:
            complete = validator.is_valid(json.loads(so_far))
        except (json.JSONDecodeError, UnicodeDecodeError):
            complete = False
        assert m.is_completed() == complete, f"{where}: is_completed {m.is_completed()}, jsonschema says {complete}"
        assert bool(bits[vocab.stop_id]) == complete, f"{where}: stop bit"
        assert bits[t], f"{where}: the instance's next token {vocab.token_bytes[t]!r} is masked"
        allowed = np.flatnonzero(bits)
        f = m.fork()
        bad = [x for x in allowed.tolist() if not _accepts_then_undoes(f, x)]
        assert not bad, f"{where}: allowed tokens rejected: {[vocab.token_bytes[x] for x in bad[:5]]}"
        disallowed = np.flatnonzero(bits == 0)
        sample = rng.choice(disallowed, size=min(N_DISALLOWED, len(disallowed)), replace=False)
        # in a dense state, every refused token of 8 bytes or more too: near a length
        # bound those are decided apart from the rest (the others come from a
        # roomier mask)
        dense = len(allowed) > V // 2
        longs = [x for x in disallowed.tolist() if dense and len(vocab.token_bytes[x] or b"") >= 8]
        wrong = [x for x in sorted(set(sample.tolist()) | set(longs)) if m.fork().accept_token(x)]
        assert not wrong, f"{where}: disallowed tokens accepted: {[vocab.token_bytes[x] for x in wrong[:5]]}"
        assert m.accept_token(t), f"{where}: token rejected"
        if t != vocab.stop_id:
            so_far += vocab.token_bytes[t]
    assert m.is_terminated()
    assert validator.is_valid(json.loads(so_far))
