"""Grammar: an EBNF grammar parsed and normalised by the native core.

The dialect is XGrammar's (GBNF compatible); see the README for a summary.
"""

from __future__ import annotations

from ._errors import GrammarError, InvalidArgumentError, LimitExceededError, check
from ._native import ffi, lib

__all__ = ["Grammar", "ebnf_string_literal"]


def ebnf_string_literal(text: str) -> str:
    """``text`` as an EBNF string literal (quoted, with escapes)."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'  # nothing to escape (the common case)
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise InvalidArgumentError(f"lone surrogate U+{code:04X} cannot be encoded")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)

# Any JSON object or array at the top level (as XGrammar's builtin grammar), with
# free whitespace between tokens.
_BUILTIN_JSON_EBNF = r"""
root ::= object | array
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* ws )? "}"
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
value ::= object | array | string | number | "true" | "false" | "null"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" escape )* "\""
escape ::= ["\\/bfnrt] | "u" [0-9a-fA-F]{4}
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+-]? [0-9]+ )?
ws ::= [ \t\n\r]*
"""


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(
            f"{what} holds the lone surrogate U+{ord(text[e.start]):04X} at offset {e.start}, which UTF-8 cannot encode"
        ) from None


class Grammar:
    """A parsed, normalised grammar.  Build one with :meth:`from_ebnf`."""

    def __init__(self, handle, source: str, root_rule_name: str) -> None:
        # Internal: use the from_* constructors.
        self._handle = handle
        self._source = source
        self._root = root_rule_name

    @staticmethod
    def from_ebnf(ebnf_string: str, *, root_rule_name: str = "root") -> "Grammar":
        """Parse an EBNF grammar.

        Raises ``GrammarError`` (a ``ValueError``) naming line and column for syntax
        errors, undefined rules, and grammars that match nothing; ``LimitExceededError``
        when a size limit (repetition bounds, automaton size, nesting) is exceeded.
        """
        if not isinstance(ebnf_string, str):
            raise InvalidArgumentError(f"ebnf_string must be a str, got {type(ebnf_string).__name__}")
        if not isinstance(root_rule_name, str) or not root_rule_name:
            raise InvalidArgumentError("root_rule_name must be a non-empty str")
        text, root = _utf8(ebnf_string, "ebnf_string"), _utf8(root_rule_name, "root_rule_name")
        out = ffi.new("xg2_grammar **")
        check(lib.xg2_grammar_from_ebnf(text, len(text), root, out))
        handle = ffi.gc(out[0], lib.xg2_grammar_free, size=64 * len(text) + 1024)
        return Grammar(handle, ebnf_string, root_rule_name)

    @staticmethod
    def from_regex(regex_string: str, *, print_converted_ebnf: bool = False) -> "Grammar":
        """A grammar matching exactly the strings the regex fully matches.

        Semantics are Python's ``re.fullmatch`` with ``re.ASCII``; ``^``/``$`` may only
        anchor the ends.  Lookaround, backreferences, ``\\b`` and inline flags raise
        ``GrammarError`` naming the position."""
        if not isinstance(regex_string, str):
            raise InvalidArgumentError(f"regex_string must be a str, got {type(regex_string).__name__}")
        try:
            grammar = Grammar.from_ebnf(f"root ::= Regex({ebnf_string_literal(regex_string)})")
        except (GrammarError, LimitExceededError) as e:
            # The EBNF wrapper's line and column mean nothing here: keep the regex's position.
            message = str(e)
            cut = message.find("invalid regex")
            raise type(e)(message[cut:] if cut >= 0 else message) from None
        if print_converted_ebnf:
            print(grammar)
        return grammar

    @staticmethod
    def from_json_schema(
        schema,
        *,
        any_whitespace: bool = True,
        indent=None,
        separators=None,
        strict_mode: bool = True,
        max_whitespace_cnt=None,
        print_converted_ebnf: bool = False,
        any_order: bool = False,
        lenient: bool = False,
    ) -> "Grammar":
        """A grammar of the JSON texts valid under a JSON Schema (a JSON string, a dict,
        or a pydantic model class).  Exact, or ``GrammarError`` naming the keyword and
        its path; ``lenient=True`` drops what cannot be enforced, with a warning.  See
        :mod:`xg2_plugin.json_schema` for the semantics."""
        from .json_schema import json_schema_to_ebnf

        ebnf = json_schema_to_ebnf(
            schema,
            any_whitespace=any_whitespace,
            indent=indent,
            separators=separators,
            strict_mode=strict_mode,
            max_whitespace_cnt=max_whitespace_cnt,
            any_order=any_order,
            lenient=lenient,
        )
        if print_converted_ebnf:
            print(ebnf)
        return Grammar.from_ebnf(ebnf)

    @staticmethod
    def from_structural_tag(*args, **kwargs) -> "Grammar":
        """A grammar from a structural tag: ``from_structural_tag(structural_tag)``
        (a ``StructuralTag``, a dict or JSON text) or, legacy,
        ``from_structural_tag(tags, triggers)``.  A bad tag is a ``GrammarError``
        naming its JSON path.  Tokens given by their text need a tokenizer: use
        ``GrammarCompiler.compile_structural_tag``."""
        from .structural_tag import structural_tag_from_args, structural_tag_to_grammar

        value = structural_tag_from_args(args, kwargs)
        return structural_tag_to_grammar(value)

    @staticmethod
    def builtin_json_grammar() -> "Grammar":
        """Any JSON object or array (the grammar of OpenAI's ``json_object`` mode)."""
        return Grammar.from_ebnf(_BUILTIN_JSON_EBNF)

    @staticmethod
    def from_lark(lark_string: str, *, tokenizer_info=None, named_grammars=None) -> "Grammar":
        """A grammar from Lark syntax (the subset vLLM passes as a ``grammar`` request);
        the start rule is ``start``.  Raises ``GrammarError`` with the line and column in
        the Lark source (also as its ``line`` and ``column`` attributes) for invalid
        grammars and unsupported constructs.  See :mod:`xg2_plugin.lark` for the subset
        and how ``%ignore`` is treated.

        ``named_grammars`` (as XGrammar's): ``{name: Grammar or Lark text}``, used in
        rules as ``@name`` (see :func:`xg2_plugin.grammar_ops.lark_with_named`).
        ``tokenizer_info`` is accepted for XGrammar's signature: it only serves
        XGrammar's special-token syntax, which xg2's Lark subset does not have."""
        from ._errors import XG2Error
        from .grammar_ops import lark_with_named

        if not isinstance(lark_string, str):
            raise InvalidArgumentError(f"lark_string must be a str, got {type(lark_string).__name__}")
        from .tokenizer import TokenizerInfo

        if tokenizer_info is not None and not isinstance(tokenizer_info, TokenizerInfo):
            raise InvalidArgumentError(f"tokenizer_info must be a TokenizerInfo or None, got {type(tokenizer_info).__name__}")
        ebnf, root = lark_with_named(lark_string, named_grammars)
        try:
            return Grammar.from_ebnf(ebnf, root_rule_name=root)
        except XG2Error as e:  # a limit of the core, say; its position is in the EBNF
            raise type(e)(f"{e} (in the EBNF converted from the Lark grammar)") from e

    @staticmethod
    def from_choices(choices) -> "Grammar":
        """A grammar whose strings are exactly the given strings (vLLM's ``choice``
        request).  ``InvalidArgumentError`` for an empty list or a non-string item."""
        from .choice import choices_to_ebnf

        return Grammar.from_ebnf(choices_to_ebnf(choices))

    @staticmethod
    def concat(*grammars: "Grammar") -> "Grammar":
        """The strings made of a string of each grammar in turn (XGrammar's ``concat``)."""
        from .grammar_ops import combine

        return combine(grammars, "concat")

    @staticmethod
    def union(*grammars: "Grammar") -> "Grammar":
        """The strings of any of the grammars (XGrammar's ``union``)."""
        from .grammar_ops import combine

        return combine(grammars, "union")

    def _serial_body(self) -> dict:
        return {"ebnf": self._source, "root_rule_name": self._root}

    def serialize_json(self) -> str:
        """This grammar as JSON text: its EBNF source and root (see
        :mod:`xg2_plugin.serialization`)."""
        from .serialization import dump

        return dump("Grammar", self._serial_body())

    @staticmethod
    def deserialize_json(json_string: str) -> "Grammar":
        """The grammar :meth:`serialize_json` wrote, parsed again by the core."""
        from .serialization import load

        return Grammar._from_serial_body(load(json_string, "Grammar"), "Grammar")

    @staticmethod
    def _from_serial_body(body: dict, kind: str) -> "Grammar":
        from .serialization import check_keys, field

        check_keys(body, kind, ("ebnf", "root_rule_name"))
        ebnf = field(body, "ebnf", kind, (str,), "EBNF text")
        root = field(body, "root_rule_name", kind, (str,), "a rule name")
        return Grammar.from_ebnf(ebnf, root_rule_name=root)

    @property
    def num_rules(self) -> int:
        return int(lib.xg2_grammar_num_rules(self._handle))

    @property
    def num_states(self) -> int:
        """Automaton states of all rules, after inlining and minimisation."""
        return int(lib.xg2_grammar_num_states(self._handle))

    def __str__(self) -> str:
        """The normalised grammar as EBNF text (it parses back to the same grammar)."""
        length = ffi.new("size_t *")
        check(lib.xg2_grammar_print(self._handle, ffi.NULL, 0, length))
        buf = ffi.new("char[]", max(length[0], 1))
        check(lib.xg2_grammar_print(self._handle, buf, length[0], length))
        return ffi.unpack(buf, length[0]).decode("utf-8")

    def __repr__(self) -> str:
        return f"Grammar(rules={self.num_rules}, states={self.num_states})"
