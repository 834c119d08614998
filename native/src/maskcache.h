/*
 * maskcache.h -- the adaptive token mask cache (XGrammar-2 §3.4-3.5).
 *
 * For a kernel item (a parser item that began before the current position) the
 * vocabulary splits three ways by what the item alone can do:
 *   accepted   the item's rule (with the rules it calls) consumes the whole token;
 *   uncertain  the rule can end inside the token, and the rest of the token may
 *              fit what follows the rule (its FOLLOW bytes and lookahead) -- only
 *              the live parser can tell;
 *   rejected   everything else.
 * The split depends only on the item's state and, for counted repetitions, on
 * how far its count is from the bounds, so it is computed once, on first use
 * (just in time), and reused by every matcher of the grammar.
 */
#ifndef XG2_MASKCACHE_H
#define XG2_MASKCACHE_H

#include "earley.h"
#include "vocab.h"

/* Cache key of an item: the structural key of its state and, for a counted
 * repetition or loop, how far its count is from each bound (clamped past the
 * longest token: farther counts behave alike). */
XG2_HIDDEN void xg2__mask_key(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it, uint64_t *k1,
                              uint64_t *k2);

/* The item whose split a fill uses for kernel item `it`: `it` itself, or, for
 * an item whose only move is a tail call (through_tail_calls) of a rule with
 * the same FOLLOW set, the callee's start -- the same split, shared with every
 * grammar that has the callee (a root that only calls a TagDispatch). */
XG2_HIDDEN xg2_item xg2__mask_item(const xg2_grammar *g, xg2_item it);

/* The entry for item `it` (key k1, k2 from xg2__mask_key) from the vocabulary's
 * pool, computed on first use, with a reference the caller drops with
 * xg2__pool_release.  work (NULL: unlimited): the caller's work units left
 * (see xg2_parser.work_left), which computing the entry spends; past zero the
 * computation stops with XG2_ERR_LIMIT and nothing is cached. */
XG2_HIDDEN int xg2__mask_entry_get(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it, uint64_t k1,
                                   uint64_t k2, int64_t *work, xg2_mask_entry **out);

/* No rule edges, no counter: an item there steps as a plain DFA. */
static inline int xg2__is_pure(const xg2_grammar *g, uint32_t s) {
    return !(g->states[s].flags & (SF_REFS | SF_REPEAT));
}

/* A state whose only move is a tail call of a plain rule: the callee's start
 * (following tail calls, a bounded number), else s itself (maskcache.c). */
XG2_HIDDEN uint32_t xg2__through_tail_calls(const xg2_grammar *g, uint32_t s);

/* slice_proofs.c: may the walk from state q (loop count `count`) take slice k
 * (`s`) in bulk -- every class string alive (contained), the class looping back
 * to *q1 (loops; *ends: q1 may end the rule), or a bounded run of at most *r
 * characters (bounded)?  `follow`: what may follow the rule. */
XG2_HIDDEN int xg2__slice_contained(const xg2_grammar *g, const xg2_vocab *v, int k, uint32_t q, uint32_t count);
XG2_HIDDEN int xg2__slice_loops(const xg2_grammar *g, const xg2_vocab *v, const xg2_slice *s, uint32_t q,
                                uint32_t count, const xg2_byteset *follow, uint32_t *q1, int *ends);
/* The state the slice's first whole character leads q (count `count`) to, the
 * same from every one of its characters (*to), or 0. */
XG2_HIDDEN int xg2__slice_class_target(const xg2_grammar *g, const xg2_slice *s, uint32_t q, uint32_t count,
                                       uint32_t *to);
XG2_HIDDEN int xg2__slice_bounded(const xg2_grammar *g, const xg2_slice *s, uint32_t q, uint32_t count,
                                  const xg2_byteset *follow, uint32_t *r);

#endif
