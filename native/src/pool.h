/*
 * pool.h -- the process-wide pool of token-mask cache entries (XGrammar-2 §3.3,
 * §3.5), one per vocabulary, shared by every grammar compiled for it.
 *
 * Entries are keyed by a 128-bit structural key (a state's rule automaton,
 * the automata it references, its FOLLOW set, and for counted states the
 * distance of the count from its bounds), so a state that two grammars share
 * -- the inside of a JSON string, a tool's argument object -- is computed once.
 * The pool is bounded in bytes: entries not used lately are evicted (a second
 * chance, "clock", list: a lookup marks its entry instead of moving it to the
 * front, which would write two cold neighbours); an entry in use by a fill is
 * reference counted and freed when the fill ends.
 */
#ifndef XG2_POOL_H
#define XG2_POOL_H

#include <pthread.h>

#include "internal.h"

#define XG2_DEFAULT_CACHE_LIMIT ((size_t)512 << 20)

typedef struct xg2_mask_entry xg2_mask_entry;

struct xg2_mask_entry {
    /* pool bookkeeping, and what a lookup reads, first (one cache line) */
    uint64_t k1, k2;
    xg2_mask_entry *hnext;       /* hash chain */
    int refs;                    /* the pool's reference + fills using it */
    uint8_t used;                /* looked up since it last came to the front of the list */
    uint32_t n_acc;
    int32_t *acc;   /* accepted tokens as a list of ids ... */
    uint32_t *bits; /* ... or as a bitset over ids, or NULL */
    int32_t *unc;   /* uncertain token ids in byte order */
    uint32_t n_unc;
    /* For many uncertain tokens (XG2_UNC_TEXT_MIN): their bytes, in the same
     * order, one after another -- unc_off[k] .. unc_off[k + 1] into the bytes
     * that follow unc_off[n_unc] -- else NULL.  A fill reads them in one pass
     * instead of scattered over the vocabulary (cold in a serving loop). */
    uint32_t *unc_off;
    size_t bytes;   /* memory held */
    xg2_mask_entry *prev, *next; /* the list, most recently inserted or spared first */
};

/* The hash table grows by doubling, incrementally: the buckets of the old
 * table move a few per lookup or insert (a rehash of every entry at once, cold
 * heap objects, would cost one fill a millisecond at 32k entries). */
typedef struct {
    pthread_mutex_t lock;
    xg2_mask_entry **buckets;
    uint32_t n_buckets, n;
    xg2_mask_entry **old;   /* the table being emptied, or NULL */
    uint32_t n_old, moved;  /* its size; buckets [0, moved) are moved */
    size_t bytes, limit;
    xg2_mask_entry *head, *tail;
    uint64_t hits, misses, evictions;
} xg2_pool;

XG2_HIDDEN int xg2__pool_init(xg2_pool *p);
XG2_HIDDEN void xg2__pool_free(xg2_pool *p);

/* The entry for a key with a reference for the caller, or NULL if absent. */
XG2_HIDDEN xg2_mask_entry *xg2__pool_find(xg2_pool *p, uint64_t k1, uint64_t k2);
/* The same for n keys (k[2 i], k[2 i + 1]) under one lock, their buckets and
 * entries fetched ahead so that cold misses overlap: out[i] or NULL. */
XG2_HIDDEN void xg2__pool_find_many(xg2_pool *p, const uint64_t *k, uint32_t n, xg2_mask_entry **out);

/* Insert a new entry (the caller's reference is kept, the pool adds its own);
 * if the key is already present, e is freed and the present entry returned
 * (with a reference).  Evicts down to the limit.  NULL on allocation failure. */
XG2_HIDDEN xg2_mask_entry *xg2__pool_insert(xg2_pool *p, xg2_mask_entry *e);

/* Drop a reference obtained from find/insert. */
XG2_HIDDEN void xg2__pool_release(xg2_mask_entry *e);

#define XG2_UNC_TEXT_MIN 32

/* Sets e's uncertain tokens (ids[0 .. n), copied) and, from XG2_UNC_TEXT_MIN
 * on, their bytes (bytes + off[id] .. off[id + 1]: the vocabulary's); counts
 * what it holds in e->bytes.  XG2_OK or an error (e unchanged but for what it
 * set, freed by xg2__mask_entry_free). */
XG2_HIDDEN int xg2__mask_entry_set_unc(xg2_mask_entry *e, const int32_t *ids, uint32_t n, const char *bytes,
                                       const uint32_t *off);

/* A new entry (one reference, no key) accepting acc[0 .. n_acc) as a list and
 * with unc[0 .. n_unc) uncertain (xg2__mask_entry_set_unc), both copied; NULL if
 * an allocation failed. */
XG2_HIDDEN xg2_mask_entry *xg2__mask_entry_new(const int32_t *acc, uint32_t n_acc, const int32_t *unc, uint32_t n_unc,
                                               const char *bytes, const uint32_t *off);

XG2_HIDDEN void xg2__pool_set_limit(xg2_pool *p, size_t limit);
XG2_HIDDEN void xg2__pool_clear(xg2_pool *p);
XG2_HIDDEN void xg2__mask_entry_free(xg2_mask_entry *e);

#endif
