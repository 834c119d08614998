/*
 * internal.h -- limits, allocation, growable arrays and error reporting shared by
 * every file of the core.  Nothing here is part of the ABI.
 */
#ifndef XG2_INTERNAL_H
#define XG2_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xg2.h"

#define XG2_HIDDEN __attribute__((visibility("hidden")))

/* ---- limits: each one, when exceeded, is an XG2_ERR_LIMIT naming it ---- */
#define XG2_MAX_NEST_DEPTH 200          /* nested groups in grammar text */
#define XG2_MAX_RULES (1 << 20)         /* rules after normalisation */
#define XG2_MAX_REPEAT (1 << 24)        /* bound in {n,m} */
#define XG2_UNROLL_LIMIT 8              /* {n,m} with m <= this is unrolled into the FSM */
#define XG2_UNROLL_BUDGET 256           /* ... and so is a larger one whose unrolled size stays below this */
#define XG2_PEEL_ITERATIONS 128         /* a conflicting counted loop: written out up to this many iterations */
#define XG2_PEEL_BUDGET 256             /* ... and at most this many in all, per grammar */
#define XG2_PEEL_ITEM_BYTES 12          /* ... of items this long at most (a JSON character, escaped: \\uD83D\\uDE00) */
#define XG2_MAX_NFA_STATES (1 << 22)    /* per rule, before determinisation */
#define XG2_MAX_DFA_STATES 20000        /* per rule; larger rules are split */
#define XG2_MAX_TOTAL_STATES (1 << 24)  /* per grammar */
#define XG2_INLINE_MAX_NFA 256          /* inline a rule this small into its callers (each gets a copy to determinise) */
#define XG2_CHOICE_INLINE_MAX_NFA 4096  /* a choice past this keeps its alternatives' rules (grammar.c) */
#define XG2_CHOICE_KEEP_INLINED_NFA 32  /* ... but still inlines rules smaller than this */
#define XG2_REGION_MAX_NFA (1 << 14)    /* estimated NFA states of a right-linear region */
#define XG2_REGION_COPIES_MAX_NFA 8192  /* a rule that regions would copy past this stays a rule */
#define XG2_MAX_SET_ITEMS (1 << 18)     /* Earley items at one input position */
/* Work units one fill / accept may spend (xg2_matcher_set_work_limit): a unit is
 * a byte pushed into the parser, an item it adds, or a trie node stepped while
 * computing a mask entry.  Measured (DeepSeek vocabulary, one core of the
 * development machine): 20k-50k units/ms for ordinary fills (a full trie walk
 * under the live parser: 49k units/ms), ~5.6k units/ms with 30k items in the
 * parser's sets (a cycle of 30k left-recursive rules).  So the default stops a
 * call after ~20-50 ms of ordinary work, ~200 ms at worst; the slowest real
 * fills (~1 ms) use a few percent of it.  (xg2_plugin/_budget.py: the same.) */
#define XG2_DEFAULT_STEP_WORK 1000000
#define XG2_MAX_GUARDS 4096             /* distinct pending-lookahead sets per matcher */
#define XG2_LOOKAHEAD_SEARCH 32         /* bytes searched to prove a lookahead can hold */
#define XG2_MAX_JUMP_FORWARD 4096       /* bytes returned by jump-forward */
#define XG2_MAX_TOKEN_LEN 65535         /* bytes in one decoded token */
#define XG2_MAX_EXCEPT_WORDS (1 << 16)  /* words of one StringExcept(...) */
#define XG2_MAX_EXCEPT_BYTES (1 << 20)  /* ... and their bytes */
#define XG2_MAX_DISPATCH_STRINGS (1 << 16) /* triggers and excluded strings of one TagDispatch(...) */
#define XG2_MAX_DISPATCH_BYTES (1 << 18)   /* ... and their bytes (a trie node each) */
#define XG2_MAX_DISPATCH_EDGES (1 << 22)   /* sparse Aho-Corasick row entries of one TagDispatch */
#define XG2_MAX_TOKEN_IDS (1 << 20)     /* token ids of one Token / ExcludeToken / TokenTagDispatch */

/* ---- debug-only checks (never abort in release builds) ---- */
#ifdef XG2_DEBUG
#include <stdio.h>
#define XG2_DASSERT(c)                                                                   \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "xg2: debug check failed: %s (%s:%d)\n", #c, __FILE__,      \
                    __LINE__);                                                           \
            __builtin_trap();                                                            \
        }                                                                                \
    } while (0)
#else
#define XG2_DASSERT(c) ((void)0)
#endif

/* ---- errors: a per-thread message, returned code passes through ---- */
XG2_HIDDEN int xg2__fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
XG2_HIDDEN void xg2__clear_error(void);
#define XG2_NOMEM() xg2__fail(XG2_ERR_NOMEM, "out of memory")

/* ---- the compile budget of the calling thread (xg2_budget_begin) ----
 * xg2__budget_check: call once per unit of compile work (a rule parsed, an
 * automaton state built, a rule linked); XG2_OK, or XG2_ERR_LIMIT naming the
 * limit and "while <what> '<name>'" (name may be NULL) once time is up or
 * memory ran out.  A thread-local test and a clock read (~25 ns): hot loops
 * call it every so many steps.
 * xg2__budget_status: at a public entry point, rc unless the budget tripped
 * during the call (then the budget's error, whatever rc says: callees may
 * have caught a limit and tried another way). */
XG2_HIDDEN int xg2__budget_check(const char *what, const char *name);
XG2_HIDDEN int xg2__budget_status(int rc, const char *what);

/* ---- allocation: one indirection so tests can inject failures (and so the
 * compile budget counts this thread's net allocation) ---- */
XG2_HIDDEN void *xg2__malloc(size_t n);
XG2_HIDDEN void *xg2__calloc(size_t n, size_t size);
XG2_HIDDEN void *xg2__realloc(void *p, size_t n);
XG2_HIDDEN void xg2__free(void *p);

/* ---- growable arrays ----
 *   VEC(uint32_t) v = {0};
 *   if (vec_push(&v, 7)) goto oom;
 * vec_push / vec_reserve return nonzero on allocation failure. */
#define VEC(T)          \
    struct {            \
        T *a;           \
        uint32_t n, cap; \
    }
XG2_HIDDEN int xg2__vec_grow(void **a, uint32_t *cap, size_t elem, uint64_t need);
XG2_HIDDEN void xg2__sort_u32(uint32_t *a, uint32_t n);
#define vec_reserve(v, need)                                                              \
    ((uint64_t)(need) <= (v)->cap                                                         \
         ? 0                                                                              \
         : xg2__vec_grow((void **)&(v)->a, &(v)->cap, sizeof(*(v)->a), (uint64_t)(need)))
#define vec_push(v, x) (vec_reserve((v), (uint64_t)(v)->n + 1) ? 1 : ((v)->a[(v)->n++] = (x), 0))
#define vec_free(v) (xg2__free((v)->a), (v)->a = NULL, (v)->n = (v)->cap = 0)

/* Named vectors for the types passed between files (each VEC() is its own type). */
typedef VEC(char) xg2_charvec;
typedef VEC(uint32_t) xg2_u32vec;
XG2_HIDDEN int xg2__charvec_printf(xg2_charvec *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- reference counts (atomic: objects are shared across threads) ---- */
#define XG2_REF_INC(p) __atomic_add_fetch(&(p)->refs, 1, __ATOMIC_RELAXED)
#define XG2_REF_DEC(p) __atomic_sub_fetch(&(p)->refs, 1, __ATOMIC_ACQ_REL)

/* ---- small helpers ---- */
/* Monotonic clock, nanoseconds (spin limits, time budgets). */
static inline int64_t xg2__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t xg2__mix64(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* Hash of a u32 array for hash tables only (never stored in results): two
 * words per multiply, one short dependency chain, a full mix at the end. */
static inline uint64_t xg2__hash_u32s(const uint32_t *a, uint32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    uint32_t i = 0;
    for (; i + 2 <= n; i += 2) {
        uint64_t w = (uint64_t)a[i] | (uint64_t)a[i + 1] << 32;
        h = ((h << 5 | h >> 59) ^ w) * 0x517cc1b727220a95ull;
    }
    if (i < n) h = ((h << 5 | h >> 59) ^ a[i]) * 0x517cc1b727220a95ull;
    return xg2__mix64(h, n);
}

/* Bitsets over 256 bytes. */
typedef struct {
    uint64_t w[4];
} xg2_byteset;
static inline void byteset_add(xg2_byteset *s, unsigned b) { s->w[b >> 6] |= 1ull << (b & 63); }
/* Add bytes lo..hi (inclusive). */
static inline void byteset_add_range(xg2_byteset *s, unsigned lo, unsigned hi) {
    for (unsigned w = lo >> 6; w <= hi >> 6; w++) {
        uint64_t m = ~0ull;
        if (w == lo >> 6) m &= ~0ull << (lo & 63);
        if (w == hi >> 6) m &= ~0ull >> (63 - (hi & 63));
        s->w[w] |= m;
    }
}
static inline int byteset_has(const xg2_byteset *s, unsigned b) {
    return (int)((s->w[b >> 6] >> (b & 63)) & 1);
}
/* The least byte of s at or above b, or 256. */
static inline unsigned byteset_next(const xg2_byteset *s, unsigned b) {
    for (unsigned w = b >> 6; b < 256 && w < 4; w++, b = w << 6) {
        uint64_t m = s->w[w] & (~0ull << (b & 63));
        if (m) return (w << 6) + (unsigned)__builtin_ctzll(m);
    }
    return 256;
}

/* Byte groups, for a 64-bit summary of a byte set: controls, space, digits,
 * a-f, g-z, A-F, G-Z, each ASCII punctuation character alone, and four UTF-8
 * ranges -- cut so that the classes patterns loop over ([a-z0-9_.-], hex
 * digits, ...) are unions of groups. */
static inline unsigned xg2__byte_group(unsigned c) {
    if (c < 0x20 || c == 0x7F) return 0;
    if (c == ' ') return 1;
    if (c >= '0' && c <= '9') return 2;
    if (c >= 'a' && c <= 'f') return 3;
    if (c >= 'g' && c <= 'z') return 4;
    if (c >= 'A' && c <= 'F') return 5;
    if (c >= 'G' && c <= 'Z') return 6;
    if (c <= 0x2F) return 7 + c - 0x21;         /* ! .. / */
    if (c <= 0x40) return 22 + c - 0x3A;        /* : .. @ */
    if (c <= 0x60) return 29 + c - 0x5B;        /* [ .. ` */
    if (c <= 0x7E) return 35 + c - 0x7B;        /* { .. ~ */
    return c < 0xC0 ? 39 : c < 0xE0 ? 40 : c < 0xF0 ? 41 : 42;
}
#define XG2_N_GROUPS 43 /* the groups above */

#endif /* XG2_INTERNAL_H */
