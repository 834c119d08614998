/*
 * token_edges.h -- Token / ExcludeToken edges (token_edges.c).
 */
#ifndef XG2_TOKEN_EDGES_H
#define XG2_TOKEN_EDGES_H

#include "compiled.h"
#include "earley.h"
#include "fsm.h"

/* Does the token rule starting at `state` take token t (vocabulary flags `flags`)? */
XG2_HIDDEN int xg2__token_takes(const xg2_grammar *g, uint32_t state, int32_t t, uint8_t flags);

/* Indices of the items of the current set whose token edge takes t (out is
 * cleared first). */
XG2_HIDDEN int xg2__token_edge_items(const xg2_parser *p, const xg2_vocab *v, int32_t t, xg2_u32vec *out);

/* Add to a mask row the tokens the token edges of the current set take (empty:
 * the row is not written yet -- all zero to this function, which writes it whole;
 * "every plain token but ..." is then a copy). */
XG2_HIDDEN int xg2__token_mask_add(const xg2_parser *p, const xg2_compiled *c, uint32_t *row, int empty);

/* At binding a grammar to a vocabulary: every token id in range (else
 * XG2_ERR_GRAMMAR naming the rule). */
XG2_HIDDEN int xg2__token_bind(xg2_compiled *c);

#endif
