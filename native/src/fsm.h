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

/* A DFA with state 0 the start, states numbered in breadth-first order. */
typedef struct {
    uint32_t n;
    uint32_t *boff; /* byte edges of s: br[boff[s] .. boff[s+1]), sorted, disjoint */
    xg2_brange *br;
    uint32_t *roff; /* rule edges of s: re[roff[s] .. roff[s+1]), sorted by rule */
    xg2_redge *re;
    uint8_t *final;
} xg2_dfa;

XG2_HIDDEN void xg2__dfa_free(xg2_dfa *d);

/* Build the minimal DFA of one expression.
 *   inline_rule[r]: references to rule r are expanded in place (NULL: none);
 *   self_rule:      the rule whose body this is (tail self-references loop), or
 *                   UINT32_MAX;
 *   bytes_only:     every reference must be expanded (lookahead assertions);
 *                   a recursive one is an error.
 * An empty language gives n == 0. */
XG2_HIDDEN int xg2__fsm_build(const xg2_ir *ir, uint32_t expr, const uint8_t *inline_rule,
                              uint32_t self_rule, int bytes_only, xg2_dfa *out);

#endif
