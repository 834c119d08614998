"""examples/benchmark/conformance.py end to end, on data made here (never ../shared).

A MaskBench-format directory of five small schemas is written to a temporary folder,
with a byte-level Hugging Face tokenizer (256 byte tokens and ``<eos>``, built with the
``tokenizers`` library) so every engine sees one token per byte.  Two test instances
are deliberately mislabelled, so a correct engine must show exactly one "valid
rejected" and one "invalid accepted"; one schema uses a backreference, which no engine
can compile.  The report's numbers are checked against these hand-computed counts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "examples", "benchmark")
SCRIPT = os.path.join(BENCH, "conformance.py")
sys.path.insert(0, BENCH)

import common  # noqa: E402
import conformance as cf  # noqa: E402

CASES = {
    # all valid instances list properties in schema order (engines emit that order)
    "person": (
        {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}, "age": {"type": "integer"}},
         "required": ["name", "age"], "additionalProperties": False},
        [({"name": "Al", "age": 3}, True), ({"name": "", "age": 0}, True), ({"name": "Al"}, False),
         ({"name": "Alexander", "age": 1}, False), ({"name": "Al", "age": 1, "x": 2}, False),
         ({"name": "Al", "age": 1.5}, False)],
    ),
    "code": (
        {"type": "string", "pattern": "^[a-z]+\\d{2}$"},
        [("ab12", True), ("ab1", False), ("AB12", False), (12, False),
         ("AB99", True),  # mislabelled: a correct engine rejects it ("valid rejected")
         ("xy34", False)],  # mislabelled: a correct engine accepts it ("invalid accepted")
    ),
    "list": (
        {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 1, "maxItems": 2},
        [(["x"], True), (["y", "x"], True), ([], False), (["x", "x", "y"], False), (["z"], False)],
    ),
    "numbered": (
        {"type": "object", "patternProperties": {"^[0-9]+$": {"type": "integer"}}, "additionalProperties": False},
        [({"12": 3}, True), ({}, True), ({"ab": 1}, False), ({"1": "x"}, False)],
    ),
    "backref": ({"type": "string", "pattern": "^(a)\\1$"}, [("aa", True), ("ab", False)]),  # compiles nowhere
}  # fmt: skip

EXPECTED = {
    "schemas": 5, "tests": 23, "tests_passed": 19, "schemas_passed": 3, "compile_failures": 1,
    "invalidation_errors": 1, "valid_rejections": 1, "timeouts": 0, "crashes": 0, "mismatches": 0,
}  # fmt: skip
EXPECTED_STATUS = {"person": "ok", "code": "ok", "list": "ok", "numbered": "ok", "backref": "compile_error"}


def make_byte_tokenizer(directory: str) -> None:
    """A byte-level BPE tokenizer without merges: token i is byte i, 256 is <eos>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    vocab = {chars[b]: b for b in range(256)}
    vocab["<eos>"] = 256
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<eos>"])
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<eos>", "tokenizer_class": "PreTrainedTokenizerFast"}, f)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("conformance")
    mb = root / "maskbench"
    mb.mkdir()
    for name, (schema, tests) in CASES.items():
        doc = {"schema": schema, "tests": [{"data": d, "valid": v, "description": ""} for d, v in tests]}
        (mb / f"{name}.json").write_text(json.dumps(doc))
    make_byte_tokenizer(str(root / "tok"))
    return root


def run_script(workdir, *args: str) -> dict:
    out = workdir / f"report-{abs(hash(args))}.md"
    cmd = [sys.executable, SCRIPT, "--corpus", "maskbench", "--maskbench", str(workdir / "maskbench"),
           "--tokenizer", str(workdir / "tok"), "--out", str(out), "--quiet", *args]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_text() in proc.stdout  # the report is printed too
    with open(str(out)[:-3] + ".json") as f:
        return {"md": out.read_text(), **json.load(f)}


def _check_engine(doc: dict, engine: str) -> None:
    summary = doc["summary"]["maskbench"][engine]
    got = {k: summary.get(k, 0) for k in EXPECTED}
    assert got == EXPECTED, engine
    results = doc["results"]["maskbench"]
    assert {cid: results[cid][engine]["status"] for cid in results} == EXPECTED_STATUS
    code = results["code"][engine]["tests"]
    assert [t["passed"] for t in code] == [True, True, True, True, False, False]
    assert code[4]["reason"] in ("masked", "rejected", "incomplete") and code[5]["reason"] == "accepted"
    assert all(t["reason"] == "compile_error" for t in results["backref"][engine]["tests"])
    assert results["person"][engine]["compile_s"] >= 0 and results["person"][engine]["tokens"] > 0


def test_ours(workdir):
    doc = run_script(workdir)
    assert doc["engines"] == ["xg2"]
    _check_engine(doc, "xg2")
    md = doc["md"]
    assert "| xg2_plugin (ours) | 19/23 (82.6%) | 3/5 (60.0%) | 1 | 0 | 0 | 1 | 1 | 0 |" in md
    # per-keyword rows: schemas using it, fully passed
    assert "| `pattern` | 2 | 0 (0.0%) |" in md
    assert "| `patternProperties` | 1 | 1 (100.0%) |" in md
    assert "| `maxLength` | 1 | 1 (100.0%) |" in md
    assert "| `type` | 5 | 3 (60.0%) |" in md


def test_ours_with_a_tiny_mask_cache(workdir):
    # 4 KiB holds no vocabulary-wide mask: entries are evicted between fills; every
    # verdict must be what the default cache gives.
    doc = run_script(workdir, "--cache-limit-bytes", "4096")
    _check_engine(doc, "xg2")
    assert "cache_limit_bytes=4096" in doc["md"]


@pytest.mark.skipif(
    not (importlib.util.find_spec("xgrammar") and importlib.util.find_spec("llguidance")),
    reason="XGrammar and LLGuidance are optional comparison engines",
)
def test_all_engines_same_instances(workdir):
    doc = run_script(workdir, "--engines", "xg2,xgrammar,llguidance")
    assert doc["engines"] == ["xg2", "xgrammar", "llguidance"]
    for engine in doc["engines"]:
        _check_engine(doc, engine)
    # LLGuidance reports a refused schema through its matcher's error state
    assert "backreference" in doc["results"]["maskbench"]["backref"]["llguidance"]["error"]


def test_limit_and_files(workdir):
    opts = cf.parse_args(["--corpus", "maskbench", "--maskbench", str(workdir / "maskbench"),
                          "--files", "[cl]*", "--limit", "1", "--seed", "3"])  # fmt: skip
    corpora, excluded = cf.load_corpora(opts)
    assert excluded == {} and [c.id for c in corpora["maskbench"]] in (["code"], ["list"])
    assert len(cf.load_corpora(cf.parse_args(["--corpus", "maskbench", "--maskbench", str(workdir / "maskbench")]))[0]["maskbench"]) == 5


def test_patterns_mode(workdir):
    doc = run_script(workdir, "--patterns", "--pattern-samples", "10")
    results = doc["results"]
    assert sorted(results) == ["^(a)\\1$", "^[0-9]+$", "^[a-z]+\\d{2}$"]
    assert cf.classify_pattern(results["^[a-z]+\\d{2}$"]) == "compiled and agrees"
    assert cf.classify_pattern(results["^[0-9]+$"]) == "compiled and agrees"
    assert cf.classify_pattern(results["^(a)\\1$"]) == "clear error: unsupported feature (backreference)"
    checked = results["^[a-z]+\\d{2}$"]
    assert 0 < checked["matching"] < checked["strings"]
    assert "| compiled and agrees | 2 | 2 |" in doc["md"]


def test_task_pool_timeouts_and_deaths():
    tasks = [
        ("fast", ("sleep", 0.01), 30),
        ("hang", ("sleep", 60), 1),  # killed after 1 s
        ("died", ("exit", 3), 30),
        ("raised", ("raise", "boom"), 30),
        ("extended", ("phase", (60, 4)), 3),  # the task moves its own deadline
        ("after", ("sleep", 0.01), 30),
    ]
    with common.TaskPool(1) as pool:
        out = dict(pool.map(common.selftest_task, tasks))
        assert pool.restarts == 2
    assert out["fast"].status == "done" and out["fast"].value == 0.01
    assert out["hang"].status == "timeout" and out["hang"].wall_s < 30
    assert out["died"].status == "died" and "3" in out["died"].error
    assert out["raised"].status == "error" and "boom" in out["raised"].error
    assert out["extended"].status == "done" and out["extended"].phase == "extended"
    assert out["after"].status == "done"


def test_schema_walk_helpers():
    schema = {
        "$id": "http://example.com/root.json",
        "type": "object",
        "properties": {"a": {"$ref": "#/components/x"}, "pattern": {"type": "string", "pattern": "^p$"}},
        "components": {"x": {"format": "email", "items": [{"const": 1}]}},
        "allOf": [{"$ref": "http://example.com/root.json#/properties/a"}, {"$ref": "other.json"}],
    }
    kws = cf.schema_keywords(schema)
    assert {"type", "properties", "$ref", "format", "format:email", "items", "items:array", "const", "allOf",
            "pattern", "$id"} <= kws  # fmt: skip
    assert "components" not in kws and "a" not in kws
    assert cf.schema_patterns(schema) == ["^p$"]
    assert cf.remote_refs(schema) == ["http://example.com/other.json"]
