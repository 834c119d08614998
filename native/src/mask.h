/*
 * mask.h -- the next-token mask of a parser state.
 */
#ifndef XG2_MASK_H
#define XG2_MASK_H

#include "earley.h"
#include "vocab.h"

/* OR into row (ceil(vocab_size/32) words) every vocabulary token whose bytes the
 * parser accepts from its current state.  The parser is left as it was.
 * Returns XG2_OK or an error status. */
XG2_HIDDEN int xg2__mask_walk(xg2_parser *p, const xg2_vocab *v, uint32_t *row);

#endif
