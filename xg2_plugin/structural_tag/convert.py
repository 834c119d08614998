"""A structural tag as EBNF text for the core, in XGrammar 0.2.8's dialect.

Free text with triggers becomes ``TagDispatch(("trigger", rule), ...,
loop_after_dispatch=..., excludes=(...))``; token-level formats become
``Token(...)`` / ``ExcludeToken(...)`` / ``TokenTagDispatch(...)``.  A JSON schema
goes through our own front-end; its rules are named after a hash of the canonical
schema and options, and the conversion is cached by that content, so a tool's
argument grammar is the same text (and the same rule automata in the core's
content-keyed cache) whatever tool set it arrives in.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import re
import threading
import weakref
from collections import OrderedDict
from typing import Dict, Iterator, List, Optional, Tuple

from .._errors import GrammarError, InvalidArgumentError, LimitExceededError, XG2Error
from ..grammar import ebnf_string_literal
from ..linking import Piece, follow_of_strings, link, rename_rules
from ..tokenizer import text_ids
from . import formats as F
from .sample_arguments import sample_arguments

ANY_CHAR = "[\\0-\\U0010FFFF]"
_MAX_NODES = 100_000  # formats in one tag (each is a few rules)
_MAX_EXCLUDES = 10_000

# ---- the content-keyed cache of converted pieces (JSON schemas, grammars) ----

_CACHE: "OrderedDict[tuple, Tuple[object, int]]" = OrderedDict()  # key -> (piece, its characters)
_CACHE_LOCK = threading.Lock()
_CACHE_ENTRIES = 4096
# Bounded in characters too (keys and rules' text; a compiled piece's bytes, room for two
# follow sets), process-wide: a hostile schema's grammar can run to megabytes, and 4,096 of
# them were gigabytes (a structural_tag fuzz campaign).  A piece larger than _PIECE_MAX_CHARS
# is not kept: the tools that recur across requests are small (a BFCL function's arguments:
# ~700 characters, ~34 KB compiled).
_CACHE_CHARS = 64 << 20
_PIECE_MAX_CHARS = 1 << 20
_cache_chars = 0


def _piece_chars(key: tuple, value) -> int:
    n = sum(len(k) for k in key if isinstance(k, (str, bytes)))
    if isinstance(value, Piece):  # (its text, twice if written out; its compiled grammars, room for a second)
        return n + len(value.raw) + 2 * value.memory_bytes() + 64
    if isinstance(value, tuple) and value and isinstance(value[0], dict):
        n += sum(len(name) + len(body) for name, body in value[0].items())
    return n + 64


# A piece by its grammar text while some entry above holds it: schemas that differ only
# where the grammar does not (descriptions, titles: 7 of the 100 BFCL functions) share
# one piece, its core builds and its place in linked grammars.
_PIECE_BY_TEXT: "weakref.WeakValueDictionary[str, Piece]" = weakref.WeakValueDictionary()


def _cached_piece(key: tuple, make):
    hit = _cache_get(key)
    return hit if hit is not None else _cache_put(key, make())


def _cache_get(key: tuple):
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit[0]
    return None


def _cache_put(key: tuple, value):
    global _cache_chars
    size = _piece_chars(key, value)
    if size > _PIECE_MAX_CHARS:
        return value
    with _CACHE_LOCK:
        old = _CACHE.pop(key, None)
        if old is not None:
            _cache_chars -= old[1]
        _CACHE[key] = (value, size)
        _cache_chars += size
        while _CACHE and (len(_CACHE) > _CACHE_ENTRIES or _cache_chars > _CACHE_CHARS):
            _cache_chars -= _CACHE.popitem(last=False)[1][1]
    return value


def piece_cache_info() -> Dict[str, int]:
    """The process-wide cache of converted pieces: entries and characters held, and
    its bounds."""
    with _CACHE_LOCK:
        return {"entries": len(_CACHE), "chars": _cache_chars, "max_entries": _CACHE_ENTRIES,
                "max_chars": _CACHE_CHARS, "max_piece_chars": _PIECE_MAX_CHARS}


def _digest(*parts) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


def canonical_schema(schema, path: str) -> str:
    """Compact JSON of the schema, its key order kept (an object's properties are
    written in declared order)."""
    try:
        return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    except RecursionError:
        raise GrammarError(f"{path}: the schema nests too deeply") from None
    except (TypeError, ValueError) as e:
        raise GrammarError(f"{path}: the schema is not JSON-serialisable: {e}") from None


def _json_ebnf(schema, opts: tuple, path: str) -> str:
    """A schema's EBNF through our front-end (``schema``: JSON text or the value); its
    errors name ``path``."""
    from ..json_schema import json_schema_to_ebnf

    try:
        return json_schema_to_ebnf(schema, any_whitespace=True, strict_mode=True,
                                   max_whitespace_cnt=opts[1], any_order=opts[0])
    except XG2Error as e:
        raise type(e)(f"{path}: {e}") from None


def _json_rules(canon: str, opts: tuple, path: str) -> Tuple[Dict[str, str], str]:
    return rename_rules(_json_ebnf(canon, opts, path), f"js{_digest(canon, opts)}_")


def json_schema_piece(schema, path: str, *, any_order=False, max_whitespace_cnt=None):
    """(rules, root name) of a JSON schema through our front-end, cached by content."""
    canon = canonical_schema(schema, path)
    opts = (bool(any_order), max_whitespace_cnt)
    return _cached_piece(("json", canon, opts), lambda: _json_rules(canon, opts, path))


def _content_key(value, path: str):
    """A key equal only for equal JSON values, types and key order included: marshal's
    version 2 (no back-references; loads inverts it, so equal keys mean equal values --
    whether a string is interned shows too, which at worst makes a second entry).  A
    third of repr's cost and a fifth of json.dumps', for each of a request's tools.
    Values marshal cannot write (or too deep for it) fall back to repr."""
    try:
        return marshal.dumps(value, 2)
    except ValueError:
        pass
    try:
        return repr(value)
    except RecursionError:
        raise GrammarError(f"{path}: the schema nests too deeply") from None


def json_schema_linked_piece(schema, path: str, follow: bytes, *, any_order=False, max_whitespace_cnt=None,
                             pending: Optional[dict] = None) -> Piece:
    """A JSON schema's grammar as a :class:`~xg2_plugin.linking.Piece`, cached by
    content, compiled on first sight for the follow set ``follow``: at once, or, with
    ``pending`` (a dict), by :func:`build_pending` with the other new pieces."""
    opts = (bool(any_order), max_whitespace_cnt)
    key = ("json-linked", _content_key(schema, path), opts)
    hit = _cache_get(key)
    if hit is None and pending is not None:
        held = pending.get(key)
        hit = held[0] if held is not None else None
    if hit is not None:
        return hit
    # (the value itself, not a canonical text of it written and read back: ~25 µs of a new
    # tool's ~220; the front-end takes any Python value and checks its depth)
    text = _json_ebnf(schema, opts, path)
    with _CACHE_LOCK:
        piece = _PIECE_BY_TEXT.get(text)
        if piece is None:
            piece = _PIECE_BY_TEXT[text] = Piece(text, f"js{hashlib.sha1(text.encode()).hexdigest()[:12]}_")
            piece.sampler = lambda: sample_arguments_of(schema)
    if pending is not None:
        pending[key] = (piece, path, follow)
        return piece
    _check_piece(path, lambda: piece.handle(follow))
    return _cache_put(key, piece)


def sample_arguments_of(schema) -> Tuple[bytes, ...]:
    """Sample calls of a tool whose schema is ``schema`` (the value or its JSON text;
    see :mod:`.sample_arguments`); none if the schema has none to give."""
    try:
        return sample_arguments(json.loads(schema) if isinstance(schema, (str, bytes)) else schema)
    except Exception:  # (best effort on any schema: 10**400 as a bound overflows a float, ...)
        return ()


def build_pending(pending: dict) -> None:
    """Compile the pieces a conversion met for the first time, then cache them: the
    core's builds in a row, after all the front-end's conversions, not each after its
    own (~10% less per new tool: each stays in the caches of the one before)."""
    for key, (piece, path, follow) in pending.items():
        _check_piece(path, lambda: piece.handle(follow))
        _cache_put(key, piece)
    pending.clear()


def _check_piece(path: str, make_grammar) -> None:
    try:
        make_grammar()
    except XG2Error as e:
        raise type(e)(f"{path}: {e}") from None


# ---- special tokens of the vocabulary ----

_TOKEN_MAPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Vocab:
    """The special tokens' texts (the TokenizerInfo's map) and a finder of them, and on first use
    the text of every token (a token format given by its text: decoding all of a large
    vocabulary costs a few hundred ms, too much for every cold process's first tag)."""

    def __init__(self, info) -> None:
        self.info = info
        self.size = info.vocab_size
        self.special: Dict[str, int] = info._special_by_text  # (read only)
        self._by_text: Optional[Dict[str, int]] = None
        self.literals: Dict[str, str] = {}  # lit()'s results: text -> EBNF
        words = [t for t in self.special if len(t) > 1]
        self.pattern = _SpecialTexts(words) if words else None

    @property
    def by_text(self) -> Dict[str, int]:
        if self._by_text is None:
            by_text = text_ids(enumerate(self.info.decoded_vocab))
            by_text.update(self.special)
            self._by_text = by_text
        return self._by_text


class _SpecialTexts:
    """Finds the special tokens' texts in a string, leftmost then longest (what a
    regex alternation of them, longest first, finds), without compiling one: the
    regex of Llama-3's 256 special tokens took 0.1 s to compile, in every cold
    process's first structural tag.  At each place where a text may begin, a
    slice per distinct length is looked up (o200k_harmony's 3,090 special tokens,
    tried one by one at each "<", cost 1 ms a tag)."""

    def __init__(self, words: List[str]) -> None:
        self.words = set(words)
        self.lengths: Dict[str, List[int]] = {}  # first character -> lengths, longest first
        for w in words:
            self.lengths.setdefault(w[0], []).append(len(w))
        for k, v in self.lengths.items():
            self.lengths[k] = sorted(set(v), reverse=True)
        self.firsts = re.compile("[" + "".join(map(re.escape, self.lengths)) + "]")

    def finditer(self, text: str) -> Iterator[Tuple[int, int, str]]:
        """(start, end, text) of each match, left to right, not overlapping."""
        at = 0
        while True:
            m = self.firsts.search(text, at)
            if m is None:
                return
            s = m.start()
            at = s + 1
            for n in self.lengths[text[s]]:
                w = text[s:s + n]
                if len(w) == n and w in self.words:  # (a slice past the end is shorter)
                    yield s, s + n, w
                    at = s + n
                    break

    def search(self, text: str) -> Optional[Tuple[int, int, str]]:
        return next(self.finditer(text), None)


def _vocab_of(info) -> Optional[_Vocab]:
    if info is None:
        return None
    try:
        v = _TOKEN_MAPS.get(info)
    except TypeError:
        return _Vocab(info)
    if v is None:
        v = _Vocab(info)
        _TOKEN_MAPS[info] = v
    return v


# ---- the converter ----


class _Converter:
    def __init__(self, tokenizer_info=None) -> None:
        self.rules: Dict[str, str] = {}
        self.count = 0
        self.vocab = _vocab_of(tokenizer_info)
        self.nodes = 0
        self.attrs: Dict[str, str] = {}  # rule -> its attributes ("[max_tokens=3]")
        self.linked: Dict[str, Tuple[Piece, bytes]] = {}  # root -> piece linked in, its likely follow set
        self.follows: Dict[Tuple[str, ...], bytes] = {}  # a tag's end strings -> their first bytes
        self.pending: dict = {}  # pieces met for the first time, compiled after the conversion

    def rule(self, hint: str, body: str) -> str:
        self.count += 1
        name = f"st_{hint}_{self.count}"
        self.rules[name] = body
        return name

    def add_piece(self, piece) -> str:
        rules, root = piece
        for k, v in rules.items():
            self.rules.setdefault(k, v)
        return root

    # -- strings and tokens --

    def lit(self, text: str) -> str:
        """A literal; with a vocabulary, a special token's text in it is that token."""
        if not text:
            return '""'
        if self.vocab is None or self.vocab.pattern is None:
            return ebnf_string_literal(text)
        hit = self.vocab.literals.get(text)
        if hit is None:
            hit = self._lit(text)
            if len(text) <= 256 and len(self.vocab.literals) < 65536:  # (tool names and markers recur)
                self.vocab.literals[text] = hit
        return hit

    def _lit(self, text: str) -> str:
        parts, at = [], 0
        for start, end, special in self.vocab.pattern.finditer(text):
            if start > at:
                parts.append(ebnf_string_literal(text[at:start]))
            parts.append(f"Token({self.vocab.special[special]})")
            at = end
        if at < len(text):
            parts.append(ebnf_string_literal(text[at:]))
        return " ".join(parts)

    def special_id(self, text: str) -> Optional[int]:
        return None if self.vocab is None else self.vocab.special.get(text)

    def token_id(self, token, path: str) -> int:
        if isinstance(token, bool):
            raise GrammarError(f"{path}: a token is an id or a token's text, got {token!r}")
        if isinstance(token, int):
            if token < 0:
                raise GrammarError(f"{path}: token id {token} is negative")
            if self.vocab is not None and token >= self.vocab.size:
                raise GrammarError(f"{path}: token id {token} is beyond the vocabulary")
            return token
        if self.vocab is None:
            raise GrammarError(f"{path}: the token {token!r} is given by its text, which needs a "
                               "tokenizer (use GrammarCompiler.compile_structural_tag)")
        tid = self.vocab.by_text.get(token)
        if tid is None:
            raise GrammarError(f"{path}: no token of the vocabulary is {token!r}")
        return tid

    def token_list(self, tokens, path: str) -> List[int]:
        return sorted({self.token_id(t, f"{path}[{i}]") for i, t in enumerate(tokens)})

    def text_excludes(self, words, path: str, keep_special: bool = False) -> List[str]:
        seen: Dict[str, None] = {}  # (ordered, and a set: 10,000 words are checked in linear time)
        for i, w in enumerate(words):
            if not isinstance(w, str) or not w:
                raise GrammarError(f"{path}[{i}]: an excluded string must be a non-empty string")
            # (a special token is never free text; in a JSON string its spelling is text)
            if (keep_special or self.special_id(w) is None) and w not in seen:
                seen[w] = None
        out = list(seen)
        if len(out) > _MAX_EXCLUDES:
            raise LimitExceededError(f"{path}: more than {_MAX_EXCLUDES} excluded strings")
        return out

    # -- formats --

    def emit(self, f, path: str, ends: Tuple[str, ...] = ()) -> str:
        """The EBNF expression of format ``f``; ``ends``: the end strings of the
        enclosing tag, which free text at the end of ``f`` must not contain."""
        self.nodes += 1
        if self.nodes > _MAX_NODES:
            raise LimitExceededError(f"{path}: the structural tag has more than {_MAX_NODES} formats")
        method = getattr(self, "f_" + f.type)
        return method(f, path, ends)

    def f_const_string(self, f, path, ends):
        return self.lit(f.value)

    def f_json_schema(self, f, path, ends):
        if f.max_whitespace_cnt is not None and f.max_whitespace_cnt < 0:
            raise GrammarError(f"{path}.max_whitespace_cnt: must be a non-negative int or null")
        if f.style != "json":
            from .xml_styles import xml_schema_piece

            return self.add_piece(xml_schema_piece(self, f, path))
        schema = f.json_schema
        if f.excludes:
            from .json_excludes import exclude_words

            words = self.text_excludes(f.excludes, f"{path}.excludes", keep_special=True)
            schema = exclude_words(schema, words, f"{path}.json_schema", f"{path}.excludes")
        follow = self.follows.get(ends)
        if follow is None:  # (the same ends for every tool of a tag list)
            follow = self.follows[ends] = follow_of_strings([e for e in ends if not self.lit(e).startswith("Token(")])
        piece = json_schema_linked_piece(schema, f"{path}.json_schema", follow, any_order=f.any_order,
                                         max_whitespace_cnt=f.max_whitespace_cnt, pending=self.pending)
        self.linked.setdefault(piece.root, (piece, follow))
        return piece.root

    def f_qwen_xml_parameter(self, f, path, ends):
        return self.f_json_schema(F.JSONSchemaFormat(json_schema=f.json_schema, style="qwen_xml"), path, ends)

    def f_grammar(self, f, path, ends):
        from ..grammar import Grammar

        text = f.grammar
        _cached_piece(("check-ebnf", text), lambda: _check_piece(f"{path}.grammar", lambda: Grammar.from_ebnf(text)))
        return self.add_piece(_cached_piece(("ebnf", text), lambda: rename_rules(text, f"g{_digest(text)}_")))

    def f_regex(self, f, path, ends):
        from ..grammar import Grammar

        pat = f.pattern
        _cached_piece(("check-regex", pat), lambda: _check_piece(f"{path}.pattern", lambda: Grammar.from_regex(pat)))
        return f"Regex({ebnf_string_literal(pat)})"

    def f_any_text(self, f, path, ends):
        excludes = self.text_excludes(list(f.excludes) + [e for e in ends if e not in f.excludes], f"{path}.excludes")
        if not excludes and f.max_tokens is None:
            if f.max_chars is None:
                return f"{ANY_CHAR}*"
            return f"{ANY_CHAR}{{0,{f.max_chars}}}"
        attrs = []
        if f.max_tokens is not None:
            attrs.append(f"max_tokens={f.max_tokens}")
        if f.max_chars is not None:
            attrs.append(f"max_chars={f.max_chars}")
        name = self.rule("text", self.dispatch_body([], False, excludes))
        if attrs:  # XGrammar's rule attributes, on the definition only: TagDispatch counts them
            self.attrs[name] = f"[{', '.join(attrs)}]"
        return name

    def dispatch_body(self, pairs, loop: bool, excludes, token_level: bool = False) -> str:
        lines = [f"  ({trig}, {rule})," for trig, rule in pairs]
        ex = ", ".join(str(e) if token_level else ebnf_string_literal(e) for e in excludes)
        lines.append(f"  loop_after_dispatch={'true' if loop else 'false'},")
        lines.append(f"  excludes=({ex})")
        return ("TokenTagDispatch(\n" if token_level else "TagDispatch(\n") + "\n".join(lines) + "\n)"

    def end_strings(self, end, path) -> Tuple[str, ...]:
        if isinstance(end, F.TokenFormat):
            return ()
        if isinstance(end, str):
            return (end,) if end else ()
        if not end:
            raise GrammarError(f"{path}: a list of end strings must not be empty")
        return tuple(e for e in end if e)

    def edge(self, x, path) -> str:
        if isinstance(x, F.TokenFormat):
            return f"Token({self.token_id(x.token, path + '.token')})"
        if isinstance(x, str):
            return self.lit(x)
        return "(" + " | ".join(self.lit(e) for e in x) + ")"

    def f_tag(self, f, path, ends):
        body = self.emit(f.content, f"{path}.content", self.end_strings(f.end, f"{path}.end"))
        return f"({self.edge(f.begin, path + '.begin')} {body} {self.edge(f.end, path + '.end')})"

    def f_sequence(self, f, path, ends):
        if not f.elements:
            raise GrammarError(f"{path}.elements: a sequence needs at least one element")
        n = len(f.elements)
        parts = [self.emit(e, f"{path}.elements[{i}]", ends if i == n - 1 else ()) for i, e in enumerate(f.elements)]
        return "(" + " ".join(parts) + ")"

    def f_or(self, f, path, ends):
        if not f.elements:
            raise GrammarError(f"{path}.elements: an or needs at least one element")
        return "(" + " | ".join(self.emit(e, f"{path}.elements[{i}]", ends) for i, e in enumerate(f.elements)) + ")"

    def f_optional(self, f, path, ends):
        return f"({self.emit(f.content, path + '.content', ends)})?"

    def f_plus(self, f, path, ends):
        return f"({self.emit(f.content, path + '.content', ends)})+"

    def f_star(self, f, path, ends):
        return f"({self.emit(f.content, path + '.content', ends)})*"

    def f_repeat(self, f, path, ends):
        if f.min < 0 or (f.max != -1 and f.max < f.min):
            raise GrammarError(f"{path}: repeat needs 0 <= min <= max (max -1: unbounded), got {f.min}..{f.max}")
        inner = self.emit(f.content, path + ".content", ends)
        return f"({inner}){{{f.min},}}" if f.max == -1 else f"({inner}){{{f.min},{f.max}}}"

    def tag_list(self, tags, path, ends=()) -> List[str]:
        if not tags:
            raise GrammarError(f"{path}: at least one tag is needed")
        return [self.f_tag(t, f"{path}[{i}]", ends) for i, t in enumerate(tags)]

    def f_tags_with_separator(self, f, path, ends):
        one = self.rule("tags", " | ".join(self.tag_list(f.tags, path + ".tags")))
        sep = self.lit(f.separator)
        if f.stop_after_first:
            seq = one
        else:
            seq = f"({one} ({sep} {one})*)" if f.separator else f"({one})+"
        return seq if f.at_least_one else f"({seq})?"

    def f_triggered_tags(self, f, path, ends):
        triggers = list(f.triggers)
        if not triggers:
            raise GrammarError(f"{path}.triggers: at least one trigger is needed")
        for i, t in enumerate(triggers):
            if not t:
                raise GrammarError(f"{path}.triggers[{i}]: a trigger must be a non-empty string")
            if t in triggers[:i]:
                raise GrammarError(f"{path}.triggers[{i}]: the trigger {t!r} is given twice")
        groups: Dict[str, List[str]] = {t: [] for t in triggers}
        full = []
        for i, tag in enumerate(f.tags):
            tpath = f"{path}.tags[{i}]"
            if not isinstance(tag.begin, str):
                raise GrammarError(f"{tpath}.begin: triggered tags begin with a string "
                                   "(token_triggered_tags for a token)")
            hits = [t for t in triggers if tag.begin.startswith(t)]
            if not hits:
                raise GrammarError(f"{tpath}.begin: {tag.begin!r} begins with none of the triggers")
            if len(hits) > 1:
                raise GrammarError(f"{tpath}.begin: {tag.begin!r} begins with more than one trigger {hits}")
            content = self.emit(tag.content, f"{tpath}.content", self.end_strings(tag.end, f"{tpath}.end"))
            end = self.edge(tag.end, f"{tpath}.end")
            groups[hits[0]].append((f"{self.lit(tag.begin[len(hits[0]):])} {content}", end))
            if f.at_least_one:  # (the tags whole, for the first one: only then)
                full.append(f"({self.lit(tag.begin)} {content} {end})")
        if not f.tags:
            raise GrammarError(f"{path}.tags: at least one tag is needed")
        for i, t in enumerate(triggers):
            if not groups[t]:
                raise GrammarError(f"{path}.triggers[{i}]: the trigger {t!r} begins none of the tags")
        excludes = self.text_excludes(list(f.excludes) + [e for e in ends if e not in f.excludes],
                                      f"{path}.excludes")
        if f.at_least_one and f.stop_after_first:
            return "(" + " | ".join(full) + ")"
        token_ids = [self.special_id(t) for t in triggers]
        if any(x is not None for x in token_ids):
            if not all(x is not None for x in token_ids):
                raise GrammarError(f"{path}.triggers: some triggers are special tokens of the vocabulary "
                                   "and some are text; they cannot share one dispatch")
            pairs = [(tid, self.rule("group", _group_body(groups[t]))) for tid, t in zip(token_ids, triggers)]
            body = self.dispatch_body(pairs, not f.stop_after_first, [], token_level=True)
        else:
            for i, t in enumerate(triggers):
                self.check_text_trigger(t, f"{path}.triggers[{i}]")
            pairs = [(ebnf_string_literal(t), self.rule("group", _group_body(groups[t]))) for t in triggers]
            body = self.dispatch_body(pairs, not f.stop_after_first, excludes)
        dispatch = self.rule("dispatch", body)
        if f.at_least_one:  # the first tag at the start, then free text and more tags
            return f"(({' | '.join(full)}) {dispatch})"
        return dispatch

    f_tag_and_text = f_triggered_tags

    def check_text_trigger(self, trigger: str, path: str) -> None:
        """A text trigger holding a special token's text could never be written
        (special tokens are never text): refuse it rather than never dispatch."""
        if self.vocab is not None and self.vocab.pattern is not None:
            m = self.vocab.pattern.search(trigger)
            if m:
                raise GrammarError(f"{path}: the trigger {trigger!r} holds the special token {m[2]!r}; a "
                                   "trigger is either plain text or exactly one special token")

    def f_dispatch(self, f, path, ends):
        pairs = []
        for i, (pat, fmt) in enumerate(f.rules):
            if not isinstance(pat, str) or not pat:
                raise GrammarError(f"{path}.rules[{i}][0]: a pattern must be a non-empty string")
            self.check_text_trigger(pat, f"{path}.rules[{i}][0]")
            if pat in [p for p, _ in f.rules[:i]]:
                raise GrammarError(f"{path}.rules[{i}][0]: the pattern {pat!r} is given twice")
            pairs.append((ebnf_string_literal(pat), self.rule("case", self.emit(fmt, f"{path}.rules[{i}][1]"))))
        excludes = self.text_excludes(list(f.excludes) + [e for e in ends if e not in f.excludes], f"{path}.excludes")
        return self.rule("dispatch", self.dispatch_body(pairs, f.loop, excludes))

    def f_token(self, f, path, ends):
        return f"Token({self.token_id(f.token, path + '.token')})"

    def f_exclude_token(self, f, path, ends):
        ids = self.token_list(f.exclude_tokens, path + ".exclude_tokens")
        return f"ExcludeToken({', '.join(map(str, ids))})"

    def f_any_tokens(self, f, path, ends):
        one = f"ExcludeToken({', '.join(map(str, self.token_list(f.exclude_tokens, path + '.exclude_tokens')))})"
        return f"({one})*" if f.max_tokens is None else f"({one}){{0,{f.max_tokens}}}"

    def token_dispatch(self, pairs, loop, excludes, path):
        seen = set()
        for i, (tid, _) in enumerate(pairs):
            if tid in seen:
                raise GrammarError(f"{path}[{i}]: the trigger token {tid} is given twice")
            seen.add(tid)
        return self.rule("dispatch", self.dispatch_body(pairs, loop, excludes, token_level=True))

    def f_token_triggered_tags(self, f, path, ends):
        triggers = [self.token_id(t, f"{path}.trigger_tokens[{i}]") for i, t in enumerate(f.trigger_tokens)]
        if not triggers:
            raise GrammarError(f"{path}.trigger_tokens: at least one trigger is needed")
        groups: Dict[int, List[str]] = {t: [] for t in triggers}
        full = []
        for i, tag in enumerate(f.tags):
            tpath = f"{path}.tags[{i}]"
            if not isinstance(tag.begin, F.TokenFormat):
                raise GrammarError(f"{tpath}.begin: token triggered tags begin with a token")
            tid = self.token_id(tag.begin.token, tpath + ".begin.token")
            if tid not in groups:
                raise GrammarError(f"{tpath}.begin: token {tid} is none of the trigger tokens")
            content = self.emit(tag.content, f"{tpath}.content", self.end_strings(tag.end, f"{tpath}.end"))
            end = self.edge(tag.end, f"{tpath}.end")
            groups[tid].append(f"({content} {end})")
            full.append(f"(Token({tid}) {content} {end})")
        if not f.tags:
            raise GrammarError(f"{path}.tags: at least one tag is needed")
        for i, t in enumerate(triggers):
            if not groups[t]:
                raise GrammarError(f"{path}.trigger_tokens[{i}]: token {t} begins none of the tags")
        if f.at_least_one and f.stop_after_first:
            return "(" + " | ".join(full) + ")"
        excl = self.token_list(f.exclude_tokens, path + ".exclude_tokens")
        pairs = [(t, self.rule("group", " | ".join(groups[t]))) for t in triggers]
        d = self.token_dispatch(pairs, not f.stop_after_first, excl, path + ".trigger_tokens")
        return f"(({' | '.join(full)}) {d})" if f.at_least_one else d

    def f_token_dispatch(self, f, path, ends):
        pairs = []
        for i, (tok, fmt) in enumerate(f.rules):
            tid = self.token_id(tok, f"{path}.rules[{i}][0]")
            pairs.append((tid, self.rule("case", self.emit(fmt, f"{path}.rules[{i}][1]"))))
        excl = self.token_list(f.exclude_tokens, path + ".exclude_tokens")
        return self.token_dispatch(pairs, f.loop, excl, path + ".rules")


def _group_body(tags: List[Tuple[str, str]]) -> str:
    """The tags a trigger starts, as (begin and content, end) pairs: one choice, its
    common end after it when they share one (the choice, new in each request's
    grammar, is then determinised without an end per tag)."""
    if len({end for _, end in tags}) == 1:
        return "(" + " | ".join(f"({x})" for x, _ in tags) + f") {tags[0][1]}"
    return " | ".join(f"({x} {end})" for x, end in tags)


def _convert(value, tokenizer_info) -> Tuple[str, _Converter]:
    """The tag's own rules as EBNF text, and the converter (its linked pieces)."""
    st = F.parse_structural_tag(value)
    conv = _Converter(tokenizer_info)
    try:
        root = conv.emit(st.format, "format")
    except RecursionError:
        raise GrammarError("the structural tag nests too deeply") from None
    build_pending(conv.pending)
    lines = [f"root ::= {root}"] + [f"{k}{conv.attrs.get(k, '')} ::= {v}" for k, v in conv.rules.items()]
    return "\n".join(lines) + "\n", conv


def structural_tag_to_ebnf(value, tokenizer_info=None) -> str:
    """The EBNF text (root rule ``root``) of a structural tag given as a model,
    a dict or JSON text.  With ``tokenizer_info``, tokens given by their text are
    resolved, and a special token's text in a literal is that token."""
    text, conv = _convert(value, tokenizer_info)
    return text + "".join(piece.text for piece, _ in conv.linked.values())


def structural_tag_to_grammar(value, tokenizer_info=None):
    """The :class:`~xg2_plugin.grammar.Grammar` of a structural tag (the grammar of
    :func:`structural_tag_to_ebnf`'s text), its JSON schemas linked in as pieces
    compiled once per process (:mod:`xg2_plugin.linking`)."""
    from ..grammar import Grammar

    text, conv = _convert(value, tokenizer_info)
    if not conv.linked:
        return Grammar.from_ebnf(text)
    pieces = list(conv.linked.values())
    return link(text, [p for p, _ in pieces], [f for _, f in pieces])


__all__ = ["structural_tag_to_ebnf", "structural_tag_to_grammar", "rename_rules", "json_schema_piece", "piece_cache_info"]
