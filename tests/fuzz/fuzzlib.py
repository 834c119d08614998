"""What every atheris target shares: a small vocabulary, the exceptions that count as
a clean refusal, the compile budget, a short walk over a compiled grammar, and main().

A target module defines ``test_one_input(data: bytes)`` and ends with
``fuzzlib.main(test_one_input)``.  Run it as a script (``python tests/fuzz/fuzz_X.py
[libFuzzer flags] [corpus dirs]``); anything that escapes test_one_input -- any exception
but the library's refusals, or an AssertionError from a check -- is a find.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import atheris

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # the worktree's package, not an installed one
    sys.path.insert(0, ROOT)

with atheris.instrument_imports(include=["xg2_plugin"]):
    import numpy as np  # noqa: F401  (imported before instrumenting would matter)

    import xg2_plugin as xgr
    # the front-ends are imported on first use: import them here so they are instrumented
    from xg2_plugin import _budget, choice, json_schema, json_schema_formats, json_schema_fragments  # noqa: F401
    from xg2_plugin import json_schema_dfa, json_schema_regex, lark  # noqa: F401
    from xg2_plugin._errors import (
        GrammarError,
        InvalidArgumentError,
        LimitExceededError,
        MatcherStateError,
    )

# A clean refusal of bad input.  OutOfMemoryError, InternalError, RecursionError,
# bare ValueError/KeyError/... are finds.
EXPECTED = (GrammarError, InvalidArgumentError, LimitExceededError, MatcherStateError)

# Per compile: slow inputs end in LimitExceededError instead of timing the run out
# (the front-ends and the core read this budget as they gain checks; libFuzzer's
# -timeout catches whatever does not).
COMPILE_TIME_LIMIT_MS = 2000
COMPILE_MEMORY_LIMIT = 256 << 20


def _vocab_tokens(special=()):
    """All 256 bytes, then merges of JSON, regex and code text, then ``special``
    (texts of extra special tokens), then a stop token."""
    merges = [
        '{"', '"}', '":', '",', '":"', '", "', ' "', "\": ", "{}", "[]", "[{", "}]", "},",
        "true", "false", "null", "tr", "ue", "fal", "se", "nu", "ll",
        "00", "10", "12", "99", "-1", "0.", ".5", "e+", "e-", "E1", "1e",
        "\\n", "\\\"", "\\\\", "\\u", "\\u00", "ab", "abc", "ba", "aa", "xyz",
        "the", "ing", " a", " b", " the", "  ", "    ", "\n ", "\n  ", "\t", "\r\n",
        "name", "age", "id", "type", "value", "items", "key", "foo", "bar", "baz",
        "é", "日本", "😀", "\u00e9t\u00e9", "ß", "Ω",
        "int", "def", "return", "(", ")", "()", ";", "::=", "->", "=>",
    ]
    tokens = [bytes([b]) for b in range(256)]
    seen = set(tokens)
    for m in merges:
        b = m.encode("utf-8")
        if b not in seen:
            seen.add(b)
            tokens.append(b)
    tokens.extend(t.encode("utf-8") for t in special)
    tokens.append(b"</s>")
    return tokens


class Vocab:
    """A fuzz vocabulary: the tokens above plus the texts ``special`` as special tokens,
    its TokenizerInfo and a compiler without a grammar cache (a hit would hide the
    compile; a small mask cache so eviction paths run too)."""

    def __init__(self, special=()) -> None:
        self.tokens = _vocab_tokens(special)
        self.stop_id = len(self.tokens) - 1
        self.size = len(self.tokens) + 7  # a few padding ids past the tokenizer, as real models have
        self.words = (self.size + 31) // 32
        self.special_ids = list(range(self.stop_id - len(special), self.stop_id))
        self.info = xgr.TokenizerInfo(self.tokens, xgr.VocabType.RAW, vocab_size=self.size,
                                      stop_token_ids=[self.stop_id],
                                      special_token_ids=[self.stop_id, *self.special_ids])
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False, cache_limit_bytes=1 << 20)


DEFAULT = Vocab()
TOKENS, STOP_ID, VOCAB_SIZE, WORDS = DEFAULT.tokens, DEFAULT.stop_id, DEFAULT.size, DEFAULT.words
INFO, COMPILER = DEFAULT.info, DEFAULT.compiler


# The first fill in a process pays a one-time cost (~2-3 s of CPU with this vocabulary's
# non-ASCII single bytes): pay it here, outside libFuzzer's per-input timeout.
xgr.GrammarMatcher(COMPILER.compile_regex("[a-z]")).fill_next_token_bitmask(np.zeros((1, WORDS), dtype=np.int32))


@contextmanager
def budget():
    with _budget.compile_budget(time_limit_ms=COMPILE_TIME_LIMIT_MS, memory_limit_bytes=COMPILE_MEMORY_LIMIT):
        yield


def allowed(mask_row, vocab_size: int = VOCAB_SIZE) -> list:
    """The token ids whose bit is set in one int32 mask row."""
    bits = np.unpackbits(mask_row.view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits).tolist()


def walk(compiled, choices: bytes, steps: int = 8) -> None:
    """Fill and accept up to ``steps`` allowed tokens (picked by ``choices``), checking
    that every allowed token is accepted and that rollback undoes it."""
    m = xgr.GrammarMatcher(compiled)
    mask = np.zeros((1, WORDS), dtype=np.int32)
    for i in range(steps):
        if m.is_terminated():
            break
        m.fill_next_token_bitmask(mask)
        ok = allowed(mask[0])
        # an empty mask before termination is a dead end the grammar let the walk into
        assert ok, f"empty mask after {m.num_accepted_steps} steps, not terminated"
        pick = ok[choices[i % len(choices)] % len(ok)] if choices else ok[0]
        before = m.num_accepted_steps
        assert m.accept_token(pick), f"token {pick} {TOKENS[pick] if pick < len(TOKENS) else ''!r} " \
                                     "was in the mask but refused"
        assert m.num_accepted_steps == before + 1
    m.find_jump_forward_bytes()  # runs the jump-forward code path


def main(test_one_input) -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


# The matcher targets' fixed grammars: JSON, recursion, Unicode, a left-recursive rule,
# a regex with counted repetition, a schema, a Lark grammar with %ignore, and one that
# completes early (so stop tokens and termination come up).
FIXED_SOURCES = [
    ("builtin", None),
    ("grammar", 'root ::= item ("," item)*\nitem ::= [a-c]+ | "(" root ")" | "é" [0-9]?'),
    ("grammar", 'root ::= expr\nexpr ::= expr "+" term | term\nterm ::= "x" | "(" expr ")"'),
    ("grammar", 'root ::= "ab" | "a" | "abc" "d"*'),
    ("regex", r"(a|bc){2,5}[0-9]*(\.[0-9]+)?"),
    ("regex", "[^\"]{0,6}\u65e5?"),
    ("json_schema", '{"type":"object","properties":{"name":{"type":"string","maxLength":4},'
                    '"age":{"type":"integer","minimum":0,"maximum":120},'
                    '"items":{"type":"array","items":{"enum":[true,null,"x"]},"maxItems":3}},'
                    '"required":["name"]}'),
    ("lark", 'start: pair ("," pair)*\npair: KEY "=" VALUE\nKEY: /[a-z]+/\nVALUE: /[0-9]+/\n'
             '%import common.WS\n%ignore WS'),
]
_fixed = {}


def fixed_grammar(i: int):
    """The i-th fixed grammar (mod their number), compiled once."""
    i %= len(FIXED_SOURCES)
    if i not in _fixed:
        kind, src = FIXED_SOURCES[i]
        if kind == "builtin":
            _fixed[i] = COMPILER.compile_builtin_json_grammar()
        else:
            _fixed[i] = getattr(COMPILER, f"compile_{kind}")(src)
    return _fixed[i]


def warm_up() -> None:
    """Compile every fixed grammar now (at import), not inside the first input."""
    for i in range(len(FIXED_SOURCES)):
        fixed_grammar(i)


class Script:
    """Reads a fuzz input as a sequence of small integers (0 once it is used up)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def more(self) -> bool:
        return self.pos < len(self.data)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def u16(self) -> int:
        return self.byte() | (self.byte() << 8)

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out
