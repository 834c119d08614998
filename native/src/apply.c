/*
 * apply.c -- the token bitmask applied to CPU logits: minus infinity where a
 * token's bit is clear.  A word with every bit set is skipped and one with none
 * written whole (most words, under most grammars); the rest write their clear bits.
 * (Torch's unpack-and-masked_fill took 2-5 ms a 128k row; this is a pass over
 * the words.)
 */
#include "internal.h"

#define APPLY_LOOP(T, NEG)                                                           \
    do {                                                                             \
        T *row = (T *)logits + r * logits_stride;                                    \
        for (int64_t w = 0; w < n_words; w++) {                                      \
            uint32_t clear = ~(uint32_t)words[w];                                    \
            if (w == n_words - 1 && vocab_size % 32) clear &= (1u << (vocab_size % 32)) - 1u; \
            if (!clear) continue;                                                    \
            T *at = row + w * 32;                                                    \
            if (clear == 0xFFFFFFFFu) {                                              \
                for (int k = 0; k < 32; k++) at[k] = (NEG);                          \
                continue;                                                            \
            }                                                                        \
            while (clear) {                                                          \
                at[__builtin_ctz(clear)] = (NEG);                                    \
                clear &= clear - 1u;                                                 \
            }                                                                        \
        }                                                                            \
    } while (0)

int xg2_apply_bitmask(void *logits, int dtype, int64_t logits_stride, const int32_t *bitmask,
                      int64_t bitmask_stride, const int64_t *rows, int64_t n, int64_t vocab_size) {
    if (!logits || !bitmask || n < 0 || vocab_size < 0 || logits_stride < 0 || bitmask_stride < 0)
        return xg2__fail(XG2_ERR_ARG, "apply_bitmask: bad arguments");
    if (dtype < XG2_DTYPE_F32 || dtype > XG2_DTYPE_F64)
        return xg2__fail(XG2_ERR_ARG, "apply_bitmask: unknown dtype %d", dtype);
    int64_t n_words = (vocab_size + 31) / 32;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows ? rows[i] : i;
        const int32_t *words = bitmask + r * bitmask_stride;
        switch (dtype) {
        case XG2_DTYPE_F32: {
            union { uint32_t u; float f; } neg = {0xFF800000u};
            APPLY_LOOP(float, neg.f);
            break;
        }
        case XG2_DTYPE_F64: {
            union { uint64_t u; double f; } neg = {0xFFF0000000000000ull};
            APPLY_LOOP(double, neg.f);
            break;
        }
        case XG2_DTYPE_F16: APPLY_LOOP(uint16_t, 0xFC00u); break;
        default: APPLY_LOOP(uint16_t, 0xFF80u); break; /* bf16 */
        }
    }
    return XG2_OK;
}
