/*
 * mask.h -- the next-token mask of a parser state.
 */
#ifndef XG2_MASK_H
#define XG2_MASK_H

#include "maskcache.h"

/* Write row (ceil(vocab_size/32) words; mask_walk only ORs into it) with every
 * token the parser accepts from its current state.  The parser is left as it was.
 *
 * xg2__mask_fill uses the adaptive cache: the cached split of each kernel item,
 * then the uncertain tokens checked against the live parser.  xg2__mask_walk
 * walks the whole trie against the live parser (the reference; also used when
 * lookahead assertions are pending, which the cache does not model). */
XG2_HIDDEN int xg2__mask_fill(xg2_parser *p, const xg2_vocab *v, uint32_t *row);
XG2_HIDDEN int xg2__mask_walk(xg2_parser *p, const xg2_vocab *v, uint32_t *row);

#endif
