/*
 * fsm.h -- per-rule automata.
 *
 * A rule body becomes a DFA over an alphabet of bytes and rule references: a
 * regular right-part grammar, which the Earley parser runs directly (scan on
 * byte edges, predict on rule edges, complete at final states).  Small
 * non-recursive rules are inlined into their callers and a rule's references
 * to itself in tail position become loops, so most of a JSON-like grammar
 * runs as plain DFA steps.
 */
#ifndef XG2_FSM_H
#define XG2_FSM_H

#include "ir.h"

typedef struct {
    uint32_t lo, hi, to; /* bytes lo..hi inclusive go to state `to` */
} xg2_brange;

typedef struct {
    uint32_t rule, to;
} xg2_redge;

/* A counted loop kept inside an automaton (repetition compression): tag of a
 * state is (loop << 1) | head, 0 outside any loop.  From a loop head, bytes in
 * `first` start an iteration (allowed while count < max); other bytes leave
 * the loop (allowed once count >= min).  Reaching the head from inside the loop
 * completes an iteration (count + 1); reaching it from outside starts at 0. */
typedef struct {
    int32_t min, max; /* max < 0: unbounded */
    xg2_byteset first;
    uint32_t expr;    /* the XE_REPEAT (or XE_LENGTH) it came from */
    /* A Length loop (one per automaton, every state in it, every unit
     * boundary a head): the DFA's `rest` says how many more units each state
     * needs at least and may take at most, and a step must leave the count
     * able to end within [min, max] -- so no prefix is a dead end.  slack: the
     * largest finite rest, how much further than a token a bound is felt. */
    uint8_t rest_checked;
    uint32_t slack;
} xg2_loop_info;

/* A DFA with state 0 the start, states numbered in breadth-first order. */
typedef struct {
    uint32_t n;
    uint32_t *boff; /* byte edges of s: br[boff[s] .. boff[s+1]), sorted, disjoint */
    xg2_brange *br;
    uint32_t *roff; /* rule edges of s: re[roff[s] .. roff[s+1]), sorted by rule */
    xg2_redge *re;
    uint8_t *final;
    uint32_t *tag;          /* loop tag per state */
    xg2_loop_info *loops;   /* loops[k - 1] for tag loop k */
    uint32_t n_loops;
    uint32_t *rest;         /* Length loops: rest[2s], rest[2s + 1] = fewest and most units
                             * from s to the end (XG2_REST_ANY: unbounded); else NULL */
    uint32_t conflict_expr; /* on XG2__LOOP_CONFLICT: the repetition to run as a rule instead */
} xg2_dfa;

/* Returned (with no message) when a counted loop cannot be kept apart from what
 * surrounds it in its rule's automaton; the caller runs it as a counted rule. */
#define XG2__LOOP_CONFLICT 100

XG2_HIDDEN void xg2__dfa_free(xg2_dfa *d);

/* A deep copy of a DFA; XG2_OK or XG2_ERR_NOMEM. */
XG2_HIDDEN int xg2__dfa_copy(const xg2_dfa *src, xg2_dfa *dst);

/* The last inline expansion of a rule in one automaton build (see xg2_regions). */
typedef struct {
    uint64_t context; /* hash of the rules being expanded around it, loop tag and flat mode */
    uint32_t serial, to, start;
} xg2_expansion;

/* Right-linear regions: rules whose references among themselves are all in
 * tail position (a DFA written one rule per state, say) together match a
 * regular language, so expanding the region's entry builds every member in
 * place, a tail reference to a member becoming a plain move to its fragment.
 * A region is a cycle of such rules or one rule, plus the ones that only it
 * references, in tail position (decided in grammar.c).  `region` is per rule
 * (UINT32_MAX: in none); `frag` and `stamp` are scratch per rule, owned by the
 * caller. */
typedef struct {
    const uint32_t *region;
    uint32_t *frag;  /* NFA start state of a member in the open expansion */
    uint32_t *stamp; /* which expansion set frag */
    uint32_t serial;
    const uint8_t *flat_repeat; /* per expression: a repetition written out whose copies keep references as rule edges */
    /* Scratch per rule, owned by the caller: the last inline expansion of the
     * rule in the current build (its exit state, context, and start state), so
     * that a rule expanded twice towards the same exit is built once. */
    xg2_expansion *expansion;
    uint32_t build_serial;
    /* Look the rules' automata up in the rule cache but store none (a piece's: its
     * caller keeps the piece whole, and its rules are its own). */
    uint8_t lookup_only;
} xg2_regions;

/* Build the minimal DFA of one expression.
 *   inline_rule[r]: references to rule r are expanded in place (NULL: none);
 *   regions:        right-linear regions (NULL: none);
 *   self_rule:      the rule whose body this is (tail self-references loop), or
 *                   UINT32_MAX;
 *   bytes_only:     every reference must be expanded (lookahead assertions);
 *                   a recursive one is an error.
 * An empty language gives n == 0. */
XG2_HIDDEN int xg2__fsm_build(const xg2_ir *ir, uint32_t expr, const uint8_t *inline_rule,
                              xg2_regions *regions, uint32_t self_rule, int bytes_only, xg2_dfa *out);

/* Minimise (if asked), trim and number breadth-first a DFA made some other
 * way (name: the rule, for budget messages). */
XG2_HIDDEN int xg2__dfa_finish(const xg2_dfa *d, const char *name, int minimise, xg2_dfa *out);

/* TagDispatch (tag_dispatch.c): the automaton of XE_DISPATCH `expr` ... */
/* A choice of paths of literal bytes and rule references, then a common tail, whose
 * paths are prefix-free: its DFA built straight as a trie (trie_dfa.c; *built 0 for
 * any other shape). */
XG2_HIDDEN int xg2__trie_dfa(const xg2_ir *ir, uint32_t expr, const uint8_t *inline_rule, xg2_dfa *out, int *built);
XG2_HIDDEN int xg2__dispatch_build(const xg2_ir *ir, uint32_t expr, const char *name, xg2_dfa *out);
/* ... and the checks the parser makes (no automaton): XG2_OK, or an error
 * naming the excluded string found in a trigger or the limit exceeded. */
XG2_HIDDEN int xg2__dispatch_check(const xg2_ir *ir, uint32_t expr);

/* The automaton of a Token / ExcludeToken rule (token_edges.c): a start with
 * no edge, left only by a token step, and a final state. */
XG2_HIDDEN int xg2__token_dfa(xg2_dfa *out);

/* 1 if expr (plain bytes) is a valid counted-loop child: not empty, and no
 * string of it is a proper prefix of another (each iteration ends by itself);
 * 0 if not; -1 on allocation failure. */
XG2_HIDDEN int xg2__fsm_unit_pattern(const xg2_ir *ir, uint32_t expr);

#endif
