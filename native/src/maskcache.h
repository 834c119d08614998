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

#endif
