/*
 * mask.h -- the next-token mask of a parser state.
 */
#ifndef XG2_MASK_H
#define XG2_MASK_H

#include "maskcache.h"

/* The cache entries of a matcher's last fill, with a reference each: the next
 * fill in the same states (a long string, a loop) takes them without going
 * through the shared pool, whose lock and LRU list every thread would
 * otherwise write on every fill.  Bounded: XG2_MEMO_SLOTS entries per matcher. */
#define XG2_MEMO_SLOTS 4
typedef struct {
    xg2_mask_entry *e[XG2_MEMO_SLOTS]; /* looked up by their own keys (k1, k2) */
    uint32_t n;
} xg2_mask_memo;

XG2_HIDDEN void xg2__mask_memo_clear(xg2_mask_memo *memo);

/* Write row (ceil(vocab_size/32) words; mask_walk only ORs into it) with every
 * token the parser accepts from its current state.  The parser is left as it was.
 *
 * xg2__mask_fill uses the adaptive cache: the cached split of each kernel item,
 * then the uncertain tokens checked against the live parser.  xg2__mask_walk
 * walks the whole trie against the live parser (the reference; also used when
 * lookahead assertions are pending, which the cache does not model).  memo
 * (may be NULL) is read and updated by xg2__mask_fill.  With `empty` (may be
 * NULL), *empty = 1 says that no byte-level item allows anything (a token-level
 * state) and the row was NOT written: the caller writes it whole. */
XG2_HIDDEN int xg2__mask_fill(xg2_parser *p, const xg2_vocab *v, uint32_t *row, xg2_mask_memo *memo, int *empty);
XG2_HIDDEN int xg2__mask_walk(xg2_parser *p, const xg2_vocab *v, uint32_t *row);

#endif
