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

#include <pthread.h>

#include "earley.h"
#include "vocab.h"

typedef struct {
    uint32_t *bits; /* accepted tokens as a bitset over ids, or NULL ... */
    int32_t *acc;   /* ... as a list of ids */
    uint32_t n_acc;
    int32_t *unc;   /* uncertain token ids in byte order */
    uint32_t n_unc;
    size_t bytes;   /* memory held */
} xg2_mask_entry;

typedef struct {
    uint64_t key;
    xg2_mask_entry *entry;
} xg2_mask_slot;

typedef struct {
    pthread_mutex_t lock;
    xg2_mask_slot *slots; /* open addressing on key; entry NULL = empty */
    uint32_t cap, n;
    size_t bytes;
} xg2_mask_cache;

XG2_HIDDEN int xg2__mask_cache_init(xg2_mask_cache *c);
XG2_HIDDEN void xg2__mask_cache_free(xg2_mask_cache *c);

/* Cache key of an item: its state and, for a counted repetition, how far its
 * count is from each bound (clamped past the longest token). */
XG2_HIDDEN uint64_t xg2__mask_key(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it);

/* The entry for item `it`, computed on first use. */
XG2_HIDDEN int xg2__mask_entry_get(xg2_mask_cache *c, const xg2_grammar *g, const xg2_vocab *v,
                                   const xg2_item *it, const xg2_mask_entry **out);

#endif
