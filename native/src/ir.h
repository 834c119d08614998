/*
 * ir.h -- the grammar IR: rules whose bodies are expression trees.
 *
 * Expressions live in one arena (exprs[]) and refer to their data by offset:
 *
 *   kind        a, n                         min, max
 *   XE_EMPTY    -                            -
 *   XE_FAIL     -                            -           (matches nothing)
 *   XE_BYTES    bytes[a .. a+n)              -
 *   XE_CLASS    pool[a .. a+2n): lo,hi pairs -           (code points; flags&XF_NEGATED)
 *   XE_REF      a = rule id                  -
 *   XE_SEQ      pool[a .. a+n): children     -
 *   XE_CHOICE   pool[a .. a+n): children     -
 *   XE_REPEAT   a = child                    min..max (max < 0: unbounded)
 *   XE_TOKEN    pool[a .. a+n): token ids,   -           (flags&XF_EXCLUDE: all but these;
 *               sorted and distinct                      token_edges.c)
 *   XE_MACRO    a = macro name, n = args     -           (intrinsics not built yet: error)
 *   XE_EXCEPT   pool[a .. a+3): any, one,    -           (StringExcept: see below)
 *               escape exprs; pool[a+3 ..
 *               a+3+2n): words (bytes offset,
 *               length), sorted and distinct
 *   XE_LENGTH   pool[a .. a+2): body, unit   min..max    (Length: see below; n = 2;
 *                                                         max < 0: unbounded)
 *   XE_DISPATCH pool[a .. a+3n): triggers    min = m     (TagDispatch: see below;
 *               (bytes offset, length, rule);             flags&XF_LOOP: loop after
 *               then pool[a+3n .. a+3n+2m):               a dispatch)
 *               excludes (bytes offset, length)
 *
 * StringExcept(any, one, escape, "w1", ...) is every string of JSON string
 * contents but the words (printable ASCII other than quote and backslash),
 * read through the words' trie: while the text follows a word, characters are
 * raw bytes; a printable character no word continues with, or any `escape`
 * (the other characters, spelled canonically), leaves the trie, and `any`
 * reads the rest; after a whole word with nothing below it, `one` character
 * then `any`.  (A JSON object's extra keys: the declared names are the words.)
 * Built straight into a trie automaton whose nodes share the ways out.
 *
 * Length(body, unit, min, max) is the strings of `body` that split into min..max
 * strings of `unit` (a finite self-delimiting byte pattern: one JSON character,
 * say): a string pattern under minLength/maxLength.  The parser lifts each into
 * a rule of its own, whose automaton counts units in the parser item instead of
 * spelling the count out as states (fsm.c).
 *
 * TagDispatch(("trigger", rule), ..., loop_after_dispatch=true, excludes=("x", ...))
 * (XGrammar-2 §3.2, XGrammar 0.2.8's syntax) is free text in which each
 * occurrence of a trigger is followed by that trigger's rule -- then free text
 * again (loop) or the end -- and in which no excluded string occurs.  Always a
 * rule's whole body (the parser lifts it into a rule of its own), built straight
 * into an Aho-Corasick automaton (tag_dispatch.c).  A trigger whose rule matches
 * nothing has XG2_DEAD_TRIGGER set on its rule id: it is never dispatched.
 *
 * Token(id, ...) is one whole token of the set, ExcludeToken(id, ...) one whole
 * token of the vocabulary but these (nor a special, padding or stop token, as
 * XGrammar 0.2.8): token edges, never bytes.  Always a rule's whole body (the
 * parser lifts each into a rule of its own), whose automaton is a start state
 * with no edge and a final state; the parser steps over it on a whole token
 * (token_edges.c).  TokenTagDispatch is written with them (ebnf.c).
 *
 * Repetitions too large to unroll are compressed (XGrammar-2 §3.6) one of two ways:
 *   - a counted loop: an XE_REPEAT with XF_COUNTED whose child is a self-delimiting
 *     byte pattern (no rule references, not empty, no string of it a prefix of
 *     another), kept inside its rule's automaton with the count in the parser item;
 *   - otherwise a rule of kind RK_REPEAT with body XE_REPEAT(XE_REF(child)),
 *     which the parser runs with a counter over child instances.
 * Builder calls never fail individually: the first allocation failure sets the
 * sticky `err` and later calls return 0 -- check `err` once at the end.
 */
#ifndef XG2_IR_H
#define XG2_IR_H

#include "internal.h"

enum {
    XE_EMPTY,
    XE_FAIL,
    XE_BYTES,
    XE_CLASS,
    XE_REF,
    XE_SEQ,
    XE_CHOICE,
    XE_REPEAT,
    XE_TOKEN,
    XE_MACRO,
    XE_EXCEPT,
    XE_LENGTH,
    XE_DISPATCH,
};

#define XF_NEGATED 1
#define XF_EXCLUDE 2
#define XF_COUNTED 4 /* XE_REPEAT run as a counted loop inside its rule's automaton */
#define XF_LOOP 8    /* XE_DISPATCH: back to free text after a dispatched rule */
#define XG2_DEAD_TRIGGER 0x80000000u /* XE_DISPATCH: a trigger's rule that matches nothing */

#define XG2_REST_ANY 0xFFFFFFFFu /* a Length automaton state's most units left: no limit */

enum { RK_FSM, RK_REPEAT };

typedef struct {
    uint8_t kind, flags;
    uint32_t a, n;
    int32_t min, max;
} xg2_expr;

typedef struct {
    uint32_t name;      /* offset of a NUL-terminated name in names[] */
    uint32_t body;      /* expr id; 0 until defined */
    int32_t lookahead;  /* expr id of (= ...) or -1 */
    uint8_t kind;       /* RK_FSM or RK_REPEAT */
    uint8_t defined;
    uint32_t line, col; /* first mention, for error messages */
    uint32_t def;       /* definition order (rules made by normalisation come last) */
    int32_t max_tokens; /* XGrammar's rule attributes name[max_tokens=N, max_chars=M] ::= ...: */
    int32_t max_chars;  /* each occurrence takes bytes of at most N tokens / M code points (-1: no limit) */
    uint32_t ext;       /* a linked piece's root (grammar_link.c): its index + 1; 0 for the text's own rules */
    uint8_t tagged;     /* a TokenTagDispatch calls it (keyed as a TagDispatch's tags are: grammar.c) */
} xg2_rule_ir;

typedef struct {
    VEC(xg2_expr) exprs; /* exprs.a[0] is a shared XE_EMPTY */
    VEC(uint32_t) pool;
    VEC(uint8_t) bytes;
    VEC(char) names;
    VEC(xg2_rule_ir) rules;
    uint32_t root;
    uint32_t n_defs; /* definitions seen, for xg2_rule_ir.def */
    uint32_t *name_tab;              /* rule id + 1 by name hash (open addressing), 0 = empty */
    uint32_t name_cap, name_indexed; /* table size (a power of two); rules [0, name_indexed) are in it */
    int err;         /* sticky XG2_ERR_NOMEM */
} xg2_ir;

XG2_HIDDEN int xg2__ir_init(xg2_ir *ir);
XG2_HIDDEN void xg2__ir_free(xg2_ir *ir);

/* Builders.  Children/ranges/bytes are copied.  */
XG2_HIDDEN uint32_t xg2__ir_empty(xg2_ir *ir);
XG2_HIDDEN uint32_t xg2__ir_fail(xg2_ir *ir);
XG2_HIDDEN uint32_t xg2__ir_bytes(xg2_ir *ir, const uint8_t *b, uint32_t n);
XG2_HIDDEN uint32_t xg2__ir_class(xg2_ir *ir, const uint32_t *ranges, uint32_t n_ranges,
                                  int negated);
XG2_HIDDEN uint32_t xg2__ir_ref(xg2_ir *ir, uint32_t rule);
XG2_HIDDEN uint32_t xg2__ir_list(xg2_ir *ir, int kind, const uint32_t *kids, uint32_t n);
XG2_HIDDEN uint32_t xg2__ir_repeat(xg2_ir *ir, uint32_t child, int32_t min, int32_t max);
XG2_HIDDEN uint32_t xg2__ir_token(xg2_ir *ir, const uint32_t *ids, uint32_t n, int exclude);
XG2_HIDDEN uint32_t xg2__ir_macro(xg2_ir *ir, const char *name, uint32_t n_args);
/* StringExcept: words are (offset, length) pairs into ir->bytes, sorted and
 * distinct (the parser's job). */
XG2_HIDDEN uint32_t xg2__ir_length(xg2_ir *ir, uint32_t body, uint32_t unit, int32_t min, int32_t max);
/* TagDispatch: trig[3i .. 3i+3) = (bytes offset, length, rule) per trigger and
 * excl[2j .. 2j+2) = (bytes offset, length) per excluded string, into ir->bytes. */
XG2_HIDDEN uint32_t xg2__ir_dispatch(xg2_ir *ir, const uint32_t *trig, uint32_t n_trig, const uint32_t *excl,
                                     uint32_t n_excl, int loop);
XG2_HIDDEN uint32_t xg2__ir_except(xg2_ir *ir, const uint32_t args[3], const uint32_t *words, uint32_t n_words);
static inline int xg2__except_has_empty_word(const xg2_ir *ir, const xg2_expr *e) {
    return e->n && ir->pool.a[e->a + 4] == 0; /* sorted: the empty word first */
}

/* A rule whose body is built as an automaton of its own (Length, TagDispatch, Token, a budget):
 * never expanded in place. */
static inline int xg2__own_automaton(const xg2_ir *ir, uint32_t rule) {
    if (ir->rules.a[rule].ext) return 1; /* (a stand-in for a piece linked in later: never expanded) */
    if (ir->rules.a[rule].max_tokens >= 0 || ir->rules.a[rule].max_chars >= 0) return 1; /* (its items count) */
    int k = ir->exprs.a[ir->rules.a[rule].body].kind;
    return k == XE_LENGTH || k == XE_DISPATCH || k == XE_TOKEN;
}

/* Rules by name: returns the id, adding an undefined rule on first mention. */
XG2_HIDDEN uint32_t xg2__ir_rule_id(xg2_ir *ir, const char *name, size_t len, uint32_t line,
                                    uint32_t col);
XG2_HIDDEN int32_t xg2__ir_find_rule(xg2_ir *ir, const char *name, size_t len);
XG2_HIDDEN uint32_t xg2__ir_new_rule(xg2_ir *ir, const char *base, uint32_t body);
static inline const char *xg2__ir_name(const xg2_ir *ir, uint32_t rule) {
    return ir->names.a + ir->rules.a[rule].name;
}

/* Normalise after parsing: simplify, drop unreachable rules, remove what can
 * match nothing, move large repetitions into counted rules.  On error the
 * message names the rule. */
XG2_HIDDEN int xg2__ir_normalize(xg2_ir *ir);
/* Append src's expressions, pool, bytes and names to dst, relocated, and write each src
 * rule r as dst rule rule_map[r] (dst->rules must already hold every target), its name
 * after `prefix` (NULL: as it is). */
XG2_HIDDEN int xg2__ir_append(xg2_ir *dst, const xg2_ir *src, const uint32_t *rule_map, const char *prefix);
XG2_HIDDEN int xg2__ir_stub_rules(xg2_ir *dst, const xg2_ir *src, const uint32_t *rule_map, const char *prefix);

/* Turn the counted loop `expr` into an RK_REPEAT rule reference (in place),
 * for when its automaton cannot keep the loop apart from what surrounds it. */
XG2_HIDDEN int xg2__ir_uncount(xg2_ir *ir, uint32_t expr);

/* Print as EBNF text into out (growable). */
XG2_HIDDEN int xg2__ir_print(const xg2_ir *ir, xg2_charvec *out);

/* Sorted, merged code point ranges of a class after applying negation. */
XG2_HIDDEN int xg2__class_ranges(const xg2_ir *ir, const xg2_expr *e, xg2_u32vec *out);
/* The most bytes one match of expression `id` takes; UINT32_MAX when unbounded,
 * a rule reference, an intrinsic, or nested deeper than it looks (depth: 0). */
XG2_HIDDEN uint32_t xg2__ir_max_bytes(const xg2_ir *ir, uint32_t id, int depth);

#endif
