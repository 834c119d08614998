/*
 * compiled.h -- a grammar bound to a vocabulary: what every matcher of the
 * pair shares.
 */
#ifndef XG2_COMPILED_H
#define XG2_COMPILED_H

#include "maskcache.h"

struct xg2_compiled {
    int refs;
    const xg2_grammar *g; /* retained */
    const xg2_vocab *v;   /* retained */
};

XG2_HIDDEN void xg2__compiled_retain(const xg2_compiled *c);

#endif
