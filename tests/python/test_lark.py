"""The Lark front end (xg2_plugin.lark): conversion, acceptance and errors.

Acceptance is checked on a raw byte vocabulary (one token per byte) with
``accept_string`` + ``is_completed``.  The ``lark`` package itself is the oracle: its
Earley parser with ``lexer="dynamic_complete"`` tries every split of the input into
terminals, which is the scannerless semantics the converted grammar has (see the
module docstring of xg2_plugin.lark).  Besides hand-written examples, strings are drawn
at random from the converted grammar (a walk over the byte masks) and mutated, and the
engine and lark must agree on every one of them.
"""

import random
import re

import numpy as np
import pytest

import xg2_plugin as xgr
from xg2_plugin.lark import COMMON_TERMINALS, lark_to_ebnf

lark = pytest.importorskip("lark")

BYTE_VOCAB = [bytes([i]) for i in range(256)]


@pytest.fixture(scope="module")
def compiler():
    return xgr.GrammarCompiler(xgr.TokenizerInfo(BYTE_VOCAB))


def matcher_accepts(compiled, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


class Oracle:
    """lark's Earley parser over every tokenization (dynamic_complete)."""

    def __init__(self, grammar: str) -> None:
        self.parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")

    def __call__(self, text: str) -> bool:
        try:
            self.parser.parse(text)
            return True
        except lark.exceptions.LarkError:
            return False


# --------------------------------------------------------------------------------------
# A dozen real-looking grammars, with strings that must be accepted / rejected
# --------------------------------------------------------------------------------------

CALCULATOR = r"""
?start: sum
?sum: product
    | sum "+" product   -> add
    | sum "-" product   -> sub
?product: atom
    | product "*" atom  -> mul
    | product "/" atom  -> div
?atom: NUMBER           -> number
     | "-" atom         -> neg
     | NAME             -> var
     | "(" sum ")"
NAME: /[a-zA-Z_]\w*/
%import common.NUMBER
%import common.WS
%ignore WS
"""

# vLLM's documentation example, as it is sent (no %ignore: spaces are in the literals).
SQL_VLLM = r"""
?start: select_statement
?select_statement: "SELECT " column_list " FROM " table_name
?column_list: column_name ("," column_name)*
?table_name: identifier
?column_name: identifier
?identifier: /[a-zA-Z_][a-zA-Z0-9_]*/
"""

SQL = r"""
start: select ";"?
select: "select"i columns "from"i NAME [where] [order] [limit]
columns: "*" | column ("," column)*
column: NAME ["as"i NAME]
where: "where"i condition (("and"i | "or"i) condition)*
condition: NAME OP value
OP: "=" | "!=" | "<" "="? | ">" "="?
value: SIGNED_NUMBER | STRING | NAME
STRING: "'" /[^']*/ "'"
order: "order"i "by"i NAME ("asc"i | "desc"i)?
limit: "limit"i INT
NAME: CNAME
%import common.CNAME
%import common.INT
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

JSON = r"""
?start: value
?value: object
      | array
      | string
      | SIGNED_NUMBER      -> number
      | "true"             -> true
      | "false"            -> false
      | "null"             -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

CSV = r"""
start: header _NL (row _NL)* row?
header: field ("," field)*
row: field ("," field)*
field: QUOTED | BARE |
QUOTED: "\"" /([^"]|"")*/ "\""
BARE: /[^,"\r\n]+/
_NL: /\r?\n/
"""

CONFIG = r"""
start: (_line)*
_line: assignment _NL | _NL
assignment: CNAME "=" value
?value: ESCAPED_STRING | SIGNED_NUMBER | CNAME | list
list: "[" [value ("," value)*] "]"
_NL: NEWLINE
%import common (CNAME, ESCAPED_STRING, SIGNED_NUMBER, NEWLINE)
%import common.WS_INLINE
%ignore WS_INLINE
"""

REGEX_TERMINALS = r"""
start: entry (";" entry)*
entry: DATE "T" TIME | HEX | VERSION | BLOB | CODE
DATE: /\d{4}-(0[1-9]|1[0-2])-\d{2}/
TIME: /[01]\d:[0-5]\d(:[0-5]\d(\.\d{1,3})?)?/
HEX: /0x[0-9a-f]{2,8}/i
VERSION: /v?\d+(\.\d+){0,2}(-(alpha|beta|rc)\d*)?/
BLOB: /a{2,3}b+c*/
CODE: /[A-Z]{3}\d{3}/
"""

OPTIONAL_INLINE = r"""
?start: call
call: NAME "(" [args] ")" [block]
args: arg ("," arg)*
?arg: NAME "=" expr -> kwarg
    | expr
?expr: call | NAME | INT | "[" [expr ("," expr)*] "]"
block: "{" call* "}"
NAME: /[a-z_]+/
%import common.INT
%ignore " "
"""

REPETITION = r"""
start: phone | serial | triple
phone: "+" DIGIT~1..3 " " DIGIT~3 "-" DIGIT~4
serial: SERIAL
SERIAL: ("A".."Z")~2 "-" HEXDIGIT~4..6
triple: word~3 | word~5..6
word: LETTER+ ","
%import common (DIGIT, HEXDIGIT, LETTER)
"""

BOOLEAN = r"""
?start: or_expr
?or_expr: and_expr ("or"i and_expr)*
?and_expr: not_expr ("and"i not_expr)*
?not_expr: "not"i not_expr | atom
?atom: "true"i | "false"i | VAR | "(" or_expr ")"
VAR: /[a-z]\w*/
%import common.WS_INLINE
%ignore WS_INLINE
"""

SEXPR = r"""
start: _item*
_item: atom | list | quoted
quoted: "'" _item
list: "(" _item* ")"
atom: SYMBOL | NUMBER | STRING
SYMBOL.2: /[a-zA-Z+\-*\/<>=!?_][a-zA-Z0-9+\-*\/<>=!?_]*/
STRING: /"(\\.|[^"\\])*"/
%import common.NUMBER
%ignore /\s+/
%ignore /;[^\n]*\n/
"""

MISC_SYNTAX = r"""
// comments in both styles, escapes, ranges, modifiers, priorities, aliases
# a hash comment
!start.2 : greeting " " target [punct] -> sentence
greeting : "hello"
         | "hi"  // an alternative on its own line
         | "h\x65y"
         | "caf\u00e9"
target: NAME | QUOTE
NAME.3: "a".."f" ("a".."z" | "0".."9")*
QUOTE: "\"" /[^"\\\t]+/ "\""
punct: "!" | "\t" | "\\" \
    | "?"
"""

UNICODE = r"""
start: WORD (SEP WORD)* (SEP TAIL)?
WORD: /[^\W\d_]+/
SEP: /[\s\u00b7]+/
TAIL: /(?i:ǅ|ß)\.x/s
"""

GRAMMARS = {
    "calculator": (
        CALCULATOR,
        ["1+2", " 1 + 2 * ( 3 - x1 ) ", "-(-3.5e-2)/y", "a_b*\t2\n", "2.*.5", "1e10-E1"],
        ["", "1+", "1 2", "((1)", "1.5.2", "1 ++ 2", "3x"],
    ),
    "sql_vllm": (
        SQL_VLLM,
        ["SELECT a FROM t", "SELECT a,b_1,_c FROM tbl9"],
        ["SELECT a FROM", "select a from t", "SELECT a, b FROM t", "SELECT  a FROM t", "SELECT 1a FROM t"],
    ),
    "sql": (
        SQL,
        ["select * from t", "SELECT a, b AS c FROM users WHERE a = 1 AND c != 'x y' ORDER BY a DESC LIMIT 10;",
         "Select x From y where z<=-2.5e3", "select a from b limit 3 ;"],
        ["select from t", "select * from t where", "select * from t limit -1", "select * from t;;",
         "select a as from t", "select * from t where a == 1"],
    ),
    "json": (
        JSON,
        ['{"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "d\\"e"}}', " [ ] ", '"x"', "-0.5",
         '{"k":{}}'],
        ['{"a" 1}', "[1,]", '{"a":1,}', "'x'", '"a\nb"', "tru", "{", '["\\"]'],
    ),
    "csv": (
        CSV,
        ["a,b,c\n1,2,3\n", 'name,"quoted, with comma"\n"x""y",\n', "h\n,,\n", "only\n", "a\r\nb"],
        ['a,"b\n', "a\r\r\n", 'a"b,c', "only"],
    ),
    "config": (
        CONFIG,
        ['name = "value"\n', "x=1\ny = [1, -2.5, z]\n\n", "\n\n", "", 'a=[ "s" , [ ] ]\n'],
        ["x=\n", "1x=1\n", 'x = "unterminated\n', "x = 1 y = 2\n"],
    ),
    "regex_terminals": (
        REGEX_TERMINALS,
        ["2024-02-29T13:59", "1999-12-01T00:00:00.5;0XdeadBEEF", "v1.2.3-rc1;1.0;aab;aaabbbccc;ABC123"],
        ["2024-13-01T10:00", "2024-02-29T24:00", "0x1", "v1.2.3.4", "ab", "AB123", "2024-02-29T12:00:00.1234"],
    ),
    "optional_inline": (
        OPTIONAL_INLINE,
        ["f()", "f(a, b=1, [1, g(x)]) {h() i()}", "f( x = [ ] )", "f() {}"],
        ["f(", "f(,)", "f(a=)", "F()", "f() {", "f()()"],
    ),
    "repetition": (
        REPETITION,
        ["+1 555-1234", "+123 000-0000", "AB-1f2e", "ZZ-abcdef", "a,b,c,", "a,bb,c,dd,e,ff,"],
        ["+1234 555-1234", "+1 55-1234", "A-1234", "AB-123", "AB-1234567", "a,b,", "a,b,c,d,"],
    ),
    "boolean": (
        BOOLEAN,
        ["true", "not x and (y or FALSE)", "NOT not a1 Or b", "(true)"],
        ["", "x y", "x and", "(x", "not (", "x or or y", "1"],
    ),
    "sexpr": (
        SEXPR,
        ["(define (sq x) (* x x))", "'(1 2.5 \"s\\\"q\") ; comment\n(+ 1 2)", "", "  ; only a comment\n"],
        ["(", ")", "(a b", '"unterminated', "(a . )", "(a) ; no newline"],
    ),
    "misc_syntax": (
        MISC_SYNTAX,
        ["hello abc!", "hi f9", "hey \"quo ted\"\t", "café a\\", "hi e?"],
        ["hello g", "hello", "hey \"a\"\"", "hi a!!", "hello a\\\\"],
    ),
    "unicode": (
        UNICODE,
        ["héllo wörld", "日本語\u00a0ДА", "a·b ǆ.x", "x ß.x", "Straße\u2028ok"],
        ["a1", "a_b", "a  ", "ǅ.x", "a ẞ.x."],
    ),
}


@pytest.fixture(scope="module")
def converted(compiler):
    cache = {}

    def get(name):
        if name not in cache:
            text = GRAMMARS[name][0]
            cache[name] = (compiler.compile_lark(text), Oracle(text))
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_examples(converted, name):
    compiled, oracle = converted(name)
    _, valid, invalid = GRAMMARS[name]
    for text in valid:
        assert oracle(text), f"lark rejects the example {text!r} (bad test)"
        assert matcher_accepts(compiled, text), f"{name}: {text!r} should be accepted"
    for text in invalid:
        assert not oracle(text), f"lark accepts the counter-example {text!r} (bad test)"
        assert not matcher_accepts(compiled, text), f"{name}: {text!r} should be rejected"


def random_string(compiled, rng, max_bytes=32, p_stop=0.25):
    """A random string of the converted grammar: a walk over the byte masks (readable
    ASCII bytes preferred), or None if the walk does not complete."""
    mask = np.zeros(8, dtype=np.int32)
    for _ in range(20):
        m = xgr.GrammarMatcher(compiled)
        out = bytearray()
        while len(out) < max_bytes:
            if m.is_completed() and rng.random() < p_stop:
                return out.decode("utf-8")
            m.fill_next_token_bitmask(mask)
            bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:256]
            allowed = np.flatnonzero(bits).tolist()
            if not allowed:
                break
            readable = [b for b in allowed if 32 <= b < 127 or b in (9, 10)]
            # punctuation now and then, so that words and numbers end
            punct = [b for b in readable if not chr(b).isalnum()]
            pool = punct if punct and rng.random() < 0.3 else readable if readable and rng.random() < 0.9 else allowed
            byte = rng.choice(pool)
            assert m.accept_token(byte)
            out.append(byte)
        if m.is_completed():
            return out.decode("utf-8")
    return None


def mutate(text: str, rng, alphabet: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 2)):
        op = rng.random()
        i = rng.randint(0, len(chars))
        if op < 0.4 or not chars:
            chars.insert(i, rng.choice(alphabet))
        elif op < 0.7:
            del chars[min(i, len(chars) - 1)]
        else:
            chars[min(i, len(chars) - 1)] = rng.choice(alphabet)
    return "".join(chars)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_random_strings_agree_with_lark(converted, name):
    compiled, oracle = converted(name)
    rng = random.Random(name)
    text, valid, invalid = GRAMMARS[name]
    literal_chars = "".join(sorted(set(re.findall(r'"([^"\\])"', text)) | set("".join(valid))))
    alphabet = literal_chars + " \n,()aZ09\"'\\é"
    samples = [s for s in (random_string(compiled, rng) for _ in range(16)) if s is not None]
    assert len(samples) >= 8, f"{name}: the random walk rarely completes"
    for s in samples:
        assert oracle(s), f"{name}: the engine produced {s!r}, which lark rejects"
    checked = 0
    for s in samples + valid + invalid:
        for _ in range(3):
            t = mutate(s, rng, alphabet)
            expected = oracle(t)
            assert matcher_accepts(compiled, t) == expected, f"{name}: {t!r}: lark says {expected}"
            checked += 1
    assert checked >= 40


# --------------------------------------------------------------------------------------
# Regular expressions: Python semantics (Unicode classes, flags) kept exactly
# --------------------------------------------------------------------------------------

REGEXES = [
    (r"\w+", ""), (r"\d+", ""), (r"\s+", ""), (r"[^\W\d_]+", ""), (r"[\S]+", ""),
    (r"(?a)\w+", ""), (r"[a-z]+", "i"), (r"k+s+", "i"), (r"[^a-z]+", "i"), (r"(?i:st)Ř", ""),
    (r"é[ǅß]", "i"), (r"a.b", ""), (r"a.b", "s"), (r"(?s:.)\.", ""),
    (r" a  b # comment \n  c ", "x"), (r"a.b", "m"), (r"a{2,}?b|c{0,2}", ""), (r"[\]\\\-^]+", ""),
    (r"\x41\u00e9\t", ""), (r"(ab|a)(c|bcd)(d*)", ""),
]
ALPHABET = "abcdkKsSßẞǅǄǆŘřéÉ \t\n\u00a0\u2028٣_1.\\]-^AxXİıſK\u212aω"


@pytest.mark.parametrize("pattern,flags", REGEXES)
def test_regex_terminal_matches_python(compiler, pattern, flags):
    from lark.load_grammar import eval_escaping

    grammar = f"start: /{pattern}/{flags}"
    compiled = compiler.compile_lark(grammar)
    # lark unescapes the body first (\n becomes a newline, ending a verbose comment)
    py = re.compile(eval_escaping(pattern), sum({"i": re.I, "s": re.S, "x": re.X, "m": re.M}[f] for f in flags))
    rng = random.Random(pattern)
    examples = set()
    for _ in range(250):
        examples.add("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 4))))
    for _ in range(60):  # strings the pattern matches, from the engine's random walk
        s = random_string(compiled, rng, max_bytes=12)
        if s is not None:
            examples.add(s)
    for s in sorted(examples):
        assert matcher_accepts(compiled, s) == bool(py.fullmatch(s)), f"/{pattern}/{flags} on {s!r}"


def test_case_insensitive_string_literal(compiler):
    compiled = compiler.compile_lark('start: "kiss"i "é"i "1"i')
    py = re.compile(re.escape("kissé1"), re.I)
    for s in ["KISSÉ1", "kiſſé1", "\u212aiSsÉ1", "KİSSé1", "kıssé1", "kissé2", "kisse1", "KISS1"]:
        assert matcher_accepts(compiled, s) == bool(py.fullmatch(s)), s
    assert "[Kk\\u212a]" in str(compiled.grammar)


def test_unescape_agrees_with_lark():
    """String and regex literals are unescaped exactly as lark does."""
    from lark.load_grammar import eval_escaping

    from xg2_plugin.lark import _unescape

    rng = random.Random(7)
    pieces = ["a", "\\\\", '\\"', "\\n", "\\t", "\\r", "\\f", "\\x41", "\\u00e9", "\\U0001F600", "\\d",
              "\\'", "'", "\\.", "\\/", "é", "\\N", "\\0", "\\a", "''", " "]
    for _ in range(2000):
        body = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        assert _unescape(body, '"', (1, 1)) == eval_escaping(body), body


# --------------------------------------------------------------------------------------
# %ignore, the start rule, imports, the API
# --------------------------------------------------------------------------------------


def test_ignore_placement(compiler):
    grammar = 'start: "a" b "c"\nb: "b"?\n%ignore " "\n%ignore "#"'
    compiled = compiler.compile_lark(grammar)
    oracle = Oracle(grammar)
    for s in ["abc", " a b c ", "a  #c", "# a#b #c#", "ac", "  ", "a b", "ab c d", "a bb c"]:
        assert matcher_accepts(compiled, s) == oracle(s), s
    ebnf, root = lark_to_ebnf(grammar)
    assert root == "lark.root"
    assert 'lark.ignore ::= (" " | "#")*' in ebnf
    # nothing is inserted inside terminal definitions
    ebnf, _ = lark_to_ebnf('start: A A\nA: "x" "y"\n%ignore " "')
    assert 'A ::= "x" "y"' in ebnf


def test_ignore_at_the_ends_of_an_empty_start(compiler):
    compiled = compiler.compile_lark('start: "x"*\n%ignore /\\s+/')
    for s in ["", "   ", "x", " x x ", "\nx\n"]:
        assert matcher_accepts(compiled, s), repr(s)
    assert not matcher_accepts(compiled, " y ")


def test_root_is_start_without_ignore():
    ebnf, root = lark_to_ebnf('start: a\na: "x"')
    assert root == "start"
    grammar = xgr.Grammar.from_lark('start: a\na: "x"')
    assert "start ::=" in str(grammar)


def test_other_start_rule(compiler):
    ebnf, root = lark_to_ebnf('main: "m"\nstart: "s"', start="main")
    compiled = compiler.compile_grammar(ebnf, root_rule_name=root)
    assert matcher_accepts(compiled, "m") and not matcher_accepts(compiled, "s")


def test_compile_lark_is_cached(compiler):
    a = compiler.compile_lark('start: "cached"')
    b = compiler.compile_lark('start: "cached"')
    assert a is b
    assert matcher_accepts(a, "cached")


def test_import_forms_and_aliases(compiler):
    grammar = r"""
start: N "," SN "," F "," INT
%import common.NUMBER -> N
%import common (SIGNED_NUMBER, FLOAT)
%import common.INT
SN: SIGNED_NUMBER
F: FLOAT
"""
    compiled = compiler.compile_lark(grammar)
    oracle = Oracle(grammar)
    for s in ["1,-2,3.0,4", "1.5e3,+7,.5,0", "1,2,3,4", "1,2,3.5,4.5", "a,1,1.0,1"]:
        assert matcher_accepts(compiled, s) == oracle(s), s


def test_imports_are_namespaced(compiler):
    # The user's INT does not change what common.NUMBER means, as in lark.
    grammar = 'start: NUMBER | INT\nINT: "int"\n%import common.NUMBER'
    compiled = compiler.compile_lark(grammar)
    for s, ok in [("12", True), ("int", True), ("1.5", True), ("in", False)]:
        assert matcher_accepts(compiled, s) == ok, s


@pytest.mark.parametrize("name", sorted(COMMON_TERMINALS))
def test_common_terminals_agree_with_lark(compiler, name):
    if name.startswith("_STRING"):  # zero-width alone, which lark's Earley refuses
        grammar = f"start: X\nX: \"'\" {name} \"'\"\n%import common.{name}"
    else:
        grammar = f"start: X\nX: {name}\n%import common.{name}"
    compiled = compiler.compile_lark(grammar)
    oracle = Oracle(grammar)
    rng = random.Random(name)
    alphabet = '0123456789+-.eExAfz_ \t\r\n\f"\\#/*\''
    strings = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(100)}
    strings |= {s for s in (random_string(compiled, rng, max_bytes=10) for _ in range(20)) if s}
    for s in sorted(strings):
        assert matcher_accepts(compiled, s) == oracle(s), f"{name}: {s!r}"


# --------------------------------------------------------------------------------------
# Documented differences from lark's lexer-based parsers
# --------------------------------------------------------------------------------------


def test_scannerless_split_is_accepted(compiler):
    grammar = 'start: WORD "s"\n%import common.WORD'
    assert matcher_accepts(compiler.compile_lark(grammar), "cats")
    assert Oracle(grammar)("cats")  # Earley, every tokenization
    with pytest.raises(lark.exceptions.LarkError):  # LALR cuts the longest WORD first
        lark.Lark(grammar, parser="lalr").parse("cats")


def test_string_inner_alone_matches_its_regex(compiler):
    # What the common.lark definitions mean as regexes (fullmatch), outside the idiom.
    rng = random.Random(3)
    strings = {"".join(rng.choice("ab\\\n'") for _ in range(rng.randint(0, 5))) for _ in range(300)}
    for name, pattern in [("_STRING_INNER", r".*?"), ("_STRING_ESC_INNER", r".*?(?<!\\)(\\\\)*?")]:
        compiled = compiler.compile_lark(f"start: X\nX: {name}\n%import common.{name}")
        for s in sorted(strings):
            assert matcher_accepts(compiled, s) == bool(re.fullmatch(pattern, s)), f"{name}: {s!r}"


def test_ignored_terminals_are_greedy_like_lark(compiler):
    """lark matches an ignored terminal greedily: a line comment runs to its newline, and
    ignored whitespace is never followed by a literal that starts with whitespace."""
    grammar = 'start: "x" (" y" | "z")+\n%ignore /#[^\\n]*/\n%ignore WS_INLINE\n%ignore NEWLINE\n' \
              "%import common (WS_INLINE, NEWLINE)"
    compiled = compiler.compile_lark(grammar)
    oracle = Oracle(grammar)
    for s in ["x y", "x  y", "x z", "x  z", "x #c z", "x #c\nz", "x #c\n y", "x # y", "x y # c", "x y #",
              "x\t\ty  ", "x y\n", "x\n y", "x z#\n#\n z", "#\nx z"]:
        assert matcher_accepts(compiled, s) == oracle(s), s
    ebnf, _ = lark_to_ebnf(grammar)
    assert "(= [\\n])" in ebnf and "lark.ignore.end" in ebnf


def test_ignored_alternation_is_not_greedy(compiler):
    """Where the greedy end of an ignored pattern is not a run of one class (here an
    alternation inside one regex), it may end early: a superset of lark's language."""
    grammar = 'start: "x" "y"\n%ignore /#[^\\n]*| +/'
    compiled = compiler.compile_lark(grammar)
    assert matcher_accepts(compiled, "x #y") and not Oracle(grammar)("x #y")
    assert not matcher_accepts(compiled, "x #\ny")  # the newline itself is not ignored


def test_lazy_quantifier_stops_at_first_delimiter(compiler):
    compiled = compiler.compile_lark('start: S ("," S)*\nS: /".*?"/')
    assert matcher_accepts(compiled, '"a","b"')
    assert not matcher_accepts(compiled, '"a"b"')  # lark's lexer stops at the first quote
    # elsewhere a lazy quantifier is as greedy as any other
    compiled = compiler.compile_lark('start: /a+?/ "b"')
    assert matcher_accepts(compiled, "aaab")


# --------------------------------------------------------------------------------------
# Errors: GrammarError with the line and column in the Lark source
# --------------------------------------------------------------------------------------

ERRORS = [
    ('start: a\n', 1, 8, "Rule 'a' is used but not defined"),
    ('start: "x"\n  | FOO', 2, 5, "Terminal 'FOO' is used but not defined"),
    ('start: "x"\nstart: "y"', 2, 1, "defined more than once"),
    ('start: _sep{"a", ","}\n_sep{x, sep}: x (sep x)*', 1, 8, "templates"),
    ('start: "a"\n_sep{x, sep}: x (sep x)*', 2, 1, "templates"),
    ('start: A\n%declare A', 2, 1, "%declare is not supported"),
    ('start: "a"\n%override start: "b"', 2, 1, "%override is not supported"),
    ('start: "a"\n%extend start: "b"', 2, 1, "%extend is not supported"),
    ('start: X\n%import mygrammar.X', 2, 9, "only Lark's common.lark"),
    ('start: X\n%import common.NOPE', 2, 16, "common.lark has no terminal 'NOPE'"),
    ('start: X\n%import .local.X', 2, 9, "relative imports"),
    ('start: "a"\n%frobnicate', 2, 1, "unknown directive"),
    ('start: /(?=a)a/', 1, 8, "lookahead or lookbehind"),
    ('start: /(a)\\1/', 1, 8, "backreference"),
    ('start: /^a$/', 1, 8, "anchor"),
    ('start: /a\\b/', 1, 8, "anchor or word boundary"),
    ('start: /a*+/', 1, 8, "possessive"),
    ('start: /(?>a)/', 1, 8, "atomic group"),
    ('start: /a/l', 1, 8, "LOCALE"),
    ('start: /a(/', 1, 8, "invalid regular expression"),
    ('start: /a{4294967296}/', 1, 8, "repetition number is too large"),  # (sre's OverflowError: a fuzz find)
    ('start: A\nA: "a" B\nB: A', 2, 1, "recursion in terminal"),
    ('start: A\nA: "a" b\nb: "b"', 2, 8, "rules are not allowed inside terminals"),
    ('start: "a" ~ 3..2', 1, 12, "bad repetition range"),
    ('start: ""', 1, 8, "empty string literals"),
    ('begin: "a"', 1, 1, "no start rule 'start'"),
    ('start: "abc', 1, 8, "unterminated string"),
    ('start: /abc', 1, 8, "unterminated regular expression"),
    ('start: "a"+?', 1, 12, "misplaced operator"),
    ('start: "a" Foo', 1, 12, "invalid name 'Foo'"),
    ('start: ("a" -> x | "b")', 1, 13, "aliases"),
    ('start: "a" start', 1, 1, "matches no string"),
    ('start: "a"\n\n  bad: ("x"', 3, 12, "expected ')'"),
    ('start: "z".."a"', 1, 8, "reversed"),
    ('start: "ab".."z"', 1, 8, "single characters"),
    ('start: "\\x4"', 1, 8, "hex digits"),
    ('start: a\n%ignore a\na: "x"', 2, 9, "%ignore takes terminals"),
    ('?X: "a"', 1, 1, "apply to rules"),
    ('start: "a" @', 1, 12, "expected a named grammar's name after '@'"),
    ('start: "a" @x', 1, 12, "@x is not a named grammar (named_grammars gives: none)"),
    ('start: "a" `', 1, 12, "unexpected character"),
]


@pytest.mark.parametrize("grammar,line,column,message", ERRORS)
def test_errors(grammar, line, column, message):
    with pytest.raises(xgr.GrammarError) as info:
        xgr.Grammar.from_lark(grammar)
    err = info.value
    assert isinstance(err, ValueError)
    assert message in str(err), str(err)
    assert (err.line, err.column) == (line, column), str(err)
    assert f"line {line}, column {column}" in str(err)


def test_lark_also_rejects_the_invalid_grammars():
    """The grammar errors are errors for lark too (unsupported constructs aside)."""
    unsupported = ("templates", "%declare", "%override", "%extend", "common.lark", "relative",
                   "lookahead", "backreference", "anchor", "possessive", "atomic", "aliases")
    for grammar, _, _, message in ERRORS:
        if any(word in message for word in unsupported) or "matches no string" in message:
            continue
        with pytest.raises(Exception):
            lark.Lark(grammar, parser="earley")


def test_argument_types():
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.Grammar.from_lark(b'start: "a"')
    with pytest.raises(xgr.InvalidArgumentError):
        lark_to_ebnf('start: "a"', start="Start")
