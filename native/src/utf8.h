/*
 * utf8.h -- code point ranges as UTF-8 byte-range sequences.
 */
#ifndef XG2_UTF8_H
#define XG2_UTF8_H

#include "internal.h"

/* Called once per sequence: seq[2*i], seq[2*i+1] are the inclusive byte range
 * at position i, for i < n (1..4).  Nonzero return stops the walk. */
typedef int (*xg2_utf8_emit)(void *ctx, const uint8_t *seq, int n);

/* Emit the sequences covering code points lo..hi (surrogates excluded).
 * Returns nonzero if emit did. */
XG2_HIDDEN int xg2__utf8_sequences(uint32_t lo, uint32_t hi, xg2_utf8_emit emit, void *ctx);

#endif
