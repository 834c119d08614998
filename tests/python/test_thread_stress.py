"""Thread stress (issue 23 item 5), in the normal build: everything a server does at
once, and masks compared to a single-threaded replay.

* walkers: threads on their own matchers (shared compiled grammars) doing seeded random
  walks with fills, accepts and rollbacks; every mask is compared to the one the same
  walk gave on one thread before the stress started;
* a batch thread: BatchGrammarMatcher fills of matchers at known positions, each row
  compared to its single-threaded mask;
* compile threads: new grammars compiled into the ONE GrammarCompiler the walkers' grammars
  came from, with a 64 KiB cache (so the shared mask cache evicts under the walkers all
  the time), each compiled grammar checked on a string it must accept and one it must not;
* one matcher misused by two threads: every call ends in the library's error or the
  right answer.

The C program tests/native/stress_threads.c does the same on the C ABI under TSan
(test_native_stress_under_tsan).  Bounds: each stress phase runs a fixed time (a few
seconds); what is asserted is deterministic (mask equality, verdicts), never a timing.
"""

import hashlib
import os
import random
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import native_build
import xg2_plugin as xgr
from xg2_plugin._errors import MatcherStateError

ROOT = Path(__file__).resolve().parents[2]
STRESS_SECONDS = float(os.environ.get("XG2_STRESS_SECONDS", "4"))
WALKERS = 4
WALK_STEPS = 40


def _vocab():
    """A synthetic vocabulary of ~2,000 tokens: every byte, every pair of 40 common
    characters, a few words, a stop token.  Its own TokenizerInfo: the tiny cache limit
    set here must not reach the session's other vocabularies."""
    alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789"{}:, '
    tokens = [bytes([b]) for b in range(256)]
    tokens += [(a + b).encode() for a in alphabet for b in alphabet]
    tokens += [w.encode() for w in ('"name"', '"age"', "true", "false", "null", '": "', '", "', "\u00e9t\u00e9")]
    tokens = list(dict.fromkeys(tokens)) + [b"</s>"]
    return xgr.TokenizerInfo(tokens, xgr.VocabType.RAW, stop_token_ids=[len(tokens) - 1],
                             special_token_ids=[len(tokens) - 1])


INFO = _vocab()
WORDS = (INFO.vocab_size + 31) // 32
SOURCES = [
    ("builtin", None),
    ("json_schema", '{"type":"object","properties":{"name":{"type":"string","maxLength":8},'
                    '"age":{"type":"integer","minimum":0}},"required":["name","age"]}'),
    ("regex", r"[a-z]{2,12}(,[0-9]{1,4})*"),
    ("grammar", 'root ::= item (", " item)*\nitem ::= [a-z]+ | "{" root "}" | "\u00e9t\u00e9"'),
]


def _compile_all(compiler):
    out = []
    for kind, src in SOURCES:
        if kind == "builtin":
            out.append(compiler.compile_builtin_json_grammar())
        else:
            out.append(getattr(compiler, f"compile_{kind}")(src))
    return out


def _allowed(row):
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[:INFO.vocab_size])


def walk(compiled, seed):
    """A seeded random walk; the digest of every mask it filled, in order."""
    rng = random.Random(seed)
    m = xgr.GrammarMatcher(compiled)
    mask = np.zeros((1, WORDS), dtype=np.int32)
    digests = []
    for _ in range(WALK_STEPS):
        if m.is_terminated():
            break
        m.fill_next_token_bitmask(mask)
        digests.append(hashlib.sha1(mask.tobytes()).hexdigest())
        ids = _allowed(mask[0])
        if m.num_accepted_steps and rng.random() < 0.15:
            m.rollback(rng.randint(1, min(3, m.num_accepted_steps)))
            continue
        assert m.accept_token(int(ids[rng.randrange(len(ids))]))
    return digests


def _run_threads(targets, errors):
    threads = [threading.Thread(target=_guard(t, errors), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=STRESS_SECONDS + 120)
    assert not any(t.is_alive() for t in threads), "a stress thread hung"


def _guard(fn, errors):
    def run():
        try:
            fn()
        except BaseException as e:  # noqa: B036 -- reported by the main thread
            errors.append(f"{fn.__name__}: {type(e).__name__}: {e}")
    return run


def test_threads_give_single_threaded_masks():
    compiler = xgr.GrammarCompiler(INFO, cache_limit_bytes=64 << 10)
    grammars = _compile_all(compiler)
    seeds = [(g, s) for g in range(len(grammars)) for s in range(6)]
    reference = {key: walk(grammars[key[0]], key[1]) for key in seeds}  # one thread first

    # positions for the batch thread: (grammar, prefix) -> the single-threaded mask
    positions = []
    for g, compiled in enumerate(grammars):
        for seed in range(3):
            rng, m = random.Random(100 + seed), xgr.GrammarMatcher(compiled)
            mask = np.zeros((1, WORDS), dtype=np.int32)
            prefix = []
            for _ in range(rng.randint(0, 12)):
                m.fill_next_token_bitmask(mask)
                ids = _allowed(mask[0])
                if m.is_terminated() or not len(ids):
                    break
                prefix.append(int(ids[rng.randrange(len(ids))]))
                m.accept_token(prefix[-1])
            m.fill_next_token_bitmask(mask)
            positions.append((g, prefix, mask[0].copy()))

    # fill the 64 KiB mask cache up first: from here on every new mask evicts another
    mask = np.zeros((1, WORDS), dtype=np.int32)
    for n in range(400):
        xgr.GrammarMatcher(compiler.compile_regex(f"{n:04d}z")).fill_next_token_bitmask(mask)
    evictions_before = compiler.get_mask_cache_stats()["evictions"]

    deadline = time.monotonic() + STRESS_SECONDS
    errors, counts = [], {"walks": 0, "batches": 0, "compiles": 0}

    def walker(i):
        def walker():
            rng = random.Random(i)
            while time.monotonic() < deadline:
                key = seeds[rng.randrange(len(seeds))]
                got = walk(grammars[key[0]], key[1])
                assert got == reference[key], f"walk {key}: masks differ from the single-threaded run"
                counts["walks"] += 1
        return walker

    def batcher():
        batch = xgr.BatchGrammarMatcher(max_threads=4)
        while time.monotonic() < deadline:
            matchers = []
            for g, prefix, _ in positions:
                m = xgr.GrammarMatcher(grammars[g])
                for t in prefix:
                    assert m.accept_token(t)
                matchers.append(m)
            rows = np.zeros((len(matchers), WORDS), dtype=np.int32)
            batch.batch_fill_next_token_bitmask(matchers, rows)
            for k, (g, prefix, expected) in enumerate(positions):
                assert (rows[k] == expected).all(), f"batch row {k} (grammar {g}, {len(prefix)} tokens) differs"
            counts["batches"] += 1

    def compiler_thread(j):
        def compiler_thread():
            n = 0
            while time.monotonic() < deadline:
                n += 1
                width = 1 + (n * 7 + j) % 23
                if n % 2:  # a new word each time: new masks, so the 64 KiB cache must evict
                    word = "".join(chr(97 + (n * k + j) % 26) for k in range(1, 5))
                    c = compiler.compile_regex(f"{word}[a-c]{{{width}}}x{j}")
                    good, bad = word + "a" * width + f"x{j}", word + "a" * (width + 1) + f"x{j}"
                else:
                    c = compiler.compile_json_schema({"type": "string", "maxLength": width + 2, "pattern": f"^q{j}"})
                    good, bad = f'"q{j}"', '"' + f"q{j}" + "z" * (width + 1) + '"'
                m = xgr.GrammarMatcher(c)
                assert m.accept_string(good) and m.is_completed(), f"{good!r} refused"
                assert not xgr.GrammarMatcher(c).accept_string(bad), f"{bad!r} accepted"
                counts["compiles"] += 1
        return compiler_thread

    targets = [walker(i) for i in range(WALKERS)] + [batcher, compiler_thread(1), compiler_thread(2)]
    _run_threads(targets, errors)
    assert not errors, "\n".join(errors[:10])
    assert counts["walks"] >= WALKERS and counts["batches"] >= 1 and counts["compiles"] >= 2, counts
    assert compiler.get_mask_cache_stats()["evictions"] > evictions_before, "no eviction under the stress"


def test_one_matcher_two_threads_ends_in_error_or_right_answer():
    """Two threads on one matcher (a misuse): each call raises MatcherStateError (the core
    refused the overlap) or gives the right answer.  Under [a-z]* a letter is always
    accepted and a digit never, whatever the other thread did."""
    compiled = xgr.GrammarCompiler(INFO).compile_regex("[a-z]*")
    m = xgr.GrammarMatcher(compiled)
    letter, digit = INFO.decoded_vocab.index(b"a"), INFO.decoded_vocab.index(b"7")
    expected = np.zeros((1, WORDS), dtype=np.int32)
    xgr.GrammarMatcher(compiled).fill_next_token_bitmask(expected)
    deadline = time.monotonic() + STRESS_SECONDS / 2
    errors, wrong, refused = [], [], [0]

    def user(seed):
        def user():
            rng = random.Random(seed)
            mask = np.zeros((1, WORDS), dtype=np.int32)
            while time.monotonic() < deadline:
                try:
                    op = rng.randrange(3)
                    if op == 0:
                        if m.accept_token(letter) is not True:
                            wrong.append("a letter refused")
                        else:
                            try:
                                m.rollback(1)
                            except MatcherStateError:
                                refused[0] += 1
                    elif op == 1:
                        if m.accept_token(digit) is not False:
                            wrong.append("a digit accepted")
                    else:
                        m.fill_next_token_bitmask(mask)
                        if not (mask == expected).all():
                            wrong.append("a wrong mask")
                except MatcherStateError:
                    refused[0] += 1
        return user

    _run_threads([user(1), user(2)], errors)
    assert not errors, "\n".join(errors[:10])
    assert not wrong, f"{len(wrong)} wrong answers, e.g. {wrong[:3]} ({refused[0]} calls refused)"


def test_native_stress_under_tsan(tmp_path):
    """tests/native/stress_threads.c under ThreadSanitizer: a race report or a wrong mask fails."""
    exe = native_build.build(tmp_path, "stress_threads", [ROOT / "tests" / "native" / "stress_threads.c"],
                             native_build.TSAN)
    env = {**os.environ, **native_build.TSAN_ENV}
    r = native_build.run([str(exe), str(STRESS_SECONDS)], env=env, timeout=600, cwd=tmp_path)
    if "FATAL: ThreadSanitizer: unexpected memory mapping" in r.stdout:
        # kernels with high mmap randomisation (vm.mmap_rnd_bits > 28): run without ASLR
        r = native_build.run(["setarch", os.uname().machine, "-R", str(exe), str(STRESS_SECONDS)],
                             env=env, timeout=600, cwd=tmp_path)
    assert "WARNING: ThreadSanitizer" not in r.stdout and r.returncode == 0, r.stdout[-8000:]
    assert "stress_threads: ok" in r.stdout, r.stdout[-4000:]
