/*
 * utf8.c -- a range of code points as a union of UTF-8 byte-range sequences.
 *
 * [U+0080, U+07FF] becomes [C2-DF][80-BF]; an unaligned range is split until
 * every piece is "aligned": all its code points share the leading bytes that
 * differ and span full ranges in the trailing ones, so each byte position is a
 * single byte range.  Surrogates (U+D800..U+DFFF) have no UTF-8 form and are
 * left out.  This is the classic construction used by RE2 and Rust's regex.
 */
#include "utf8.h"

static int encode(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | (cp >> 6)); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static int encoded_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

/* Emit sequences for [lo, hi], all code points of the same encoded length. */
static int split_same_len(uint32_t lo, uint32_t hi, xg2_utf8_emit emit, void *ctx) {
    int n = encoded_len(lo);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) {
                return split_same_len(lo, lo | m, emit, ctx) ||
                       split_same_len((lo | m) + 1, hi, emit, ctx);
            }
            if ((hi & m) != m) {
                return split_same_len(lo, (hi & ~m) - 1, emit, ctx) ||
                       split_same_len(hi & ~m, hi, emit, ctx);
            }
        }
    }
    uint8_t a[4], b[4];
    encode(lo, a);
    encode(hi, b);
    uint8_t seq[8];
    for (int i = 0; i < n; i++) { seq[2 * i] = a[i]; seq[2 * i + 1] = b[i]; }
    return emit(ctx, seq, n);
}

int xg2__utf8_sequences(uint32_t lo, uint32_t hi, xg2_utf8_emit emit, void *ctx) {
    static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    while (lo <= hi) {
        /* Skip the surrogate block. */
        if (lo >= 0xD800 && lo <= 0xDFFF) { lo = 0xE000; continue; }
        uint32_t top = hi;
        if (lo < 0xD800 && top >= 0xD800) top = 0xD7FF;
        for (int k = 0; k < 4; k++)
            if (lo <= bounds[k]) { if (top > bounds[k]) top = bounds[k]; break; }
        if (split_same_len(lo, top, emit, ctx)) return 1;
        if (top == 0x10FFFF) break;
        lo = top + 1;
    }
    return 0;
}
