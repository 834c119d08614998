/*
 * support.c -- the per-thread error message, the allocator indirection and
 * growable-array growth used by every other file.
 */
#include <stdio.h>
#ifdef __APPLE__
#include <malloc/malloc.h>
#else
#include <malloc.h>
#endif

#include "internal.h"

static _Thread_local char last_error[1024];

int xg2__fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

void xg2__clear_error(void) { last_error[0] = 0; }

const char *xg2_last_error(void) { return last_error; }

int xg2_abi_version(void) { return XG2_ABI_VERSION; }

/* Test builds (-DXG2_FAULT_INJECTION) set xg2__alloc_budget = n to make every
 * allocation after the next n fail. */
#ifdef XG2_FAULT_INJECTION
long xg2__alloc_budget = -1;
static int alloc_fails(void) {
    if (xg2__alloc_budget < 0) return 0;
    if (xg2__alloc_budget == 0) return 1;
    xg2__alloc_budget--;
    return 0;
}
#else
#define alloc_fails() 0
#endif

/* ---- the compile budget of this thread (xg2_budget_begin) ----
 * Time: xg2__budget_check reads the clock (a vDSO call, ~25 ns: hot loops call
 * it every so many steps).  Memory: the net
 * bytes this thread allocates while a budget is open (allocations minus frees,
 * as the allocator sizes blocks); a block freed here that was allocated before
 * only loosens the budget.  Once a limit is hit the budget stays tripped: every
 * later check and allocation fails, so fallbacks that catch a limit (a smaller
 * automaton, another layout) end at once, and the public entry point reports
 * the budget whatever its callees made of the failure (xg2__budget_status). */
#define BUDGET_DEPTH 8
typedef struct {
    int64_t deadline;   /* absolute ns, INT64_MAX: none */
    int64_t cap;        /* absolute value of `used` not to exceed, INT64_MAX: none */
    double limit_ms;    /* as the caller set them, for the message */
    int64_t limit_bytes;
} budget_level;
/* Threads with a budget open: while none has, allocation skips the thread-local
 * lookup (a __tls_get_addr call in a shared library). */
static int budgets_open;
static _Thread_local struct {
    int depth;
    int tripped; /* 0, XG2__BUDGET_TIME or XG2__BUDGET_MEMORY */
    int64_t used; /* net bytes allocated while open */
    budget_level lv[BUDGET_DEPTH];
    char where[160];
} bud;
static inline int budget_on(void) { return __atomic_load_n(&budgets_open, __ATOMIC_RELAXED) && bud.depth; }
#define XG2__BUDGET_TIME 1
#define XG2__BUDGET_MEMORY 2

static inline size_t block_size(void *p) {
#ifdef __APPLE__
    return p ? malloc_size(p) : 0;
#else
    return p ? malloc_usable_size(p) : 0;
#endif
}

/* Whether growing this thread's net allocation by n bytes would pass the budget
 * (then the budget trips and the allocation fails, as if out of memory). */
static inline int over_budget(size_t n) {
    if (!budget_on()) return 0;
    /* (used + n, not cap - used: frees of blocks from before the budget -- a
     * collected Grammar -- make used negative, and INT64_MAX - used overflowed) */
    if (!bud.tripped && n <= (size_t)INT64_MAX / 4 && bud.used + (int64_t)n <= bud.lv[bud.depth - 1].cap) return 0;
    if (!bud.tripped) bud.tripped = XG2__BUDGET_MEMORY;
    return 1;
}

static inline void *counted(void *p) {
    if (p && budget_on()) bud.used += (int64_t)block_size(p);
    return p;
}

void *xg2__malloc(size_t n) {
    if (alloc_fails() || over_budget(n)) return NULL;
    return counted(malloc(n ? n : 1));
}
void *xg2__calloc(size_t n, size_t size) {
    if (alloc_fails() || (size && n > SIZE_MAX / size) || over_budget(n * size)) return NULL;
    return counted(calloc(n ? n : 1, size ? size : 1));
}
void *xg2__realloc(void *p, size_t n) {
    if (alloc_fails()) return NULL;
    if (!budget_on()) return realloc(p, n ? n : 1);
    size_t old = block_size(p);
    if (over_budget(n > old ? n - old : 0)) return NULL;
    void *q = realloc(p, n ? n : 1);
    if (q) bud.used += (int64_t)block_size(q) - (int64_t)old;
    return q;
}
void xg2__free(void *p) {
    if (p && budget_on()) bud.used -= (int64_t)block_size(p);
    free(p);
}

int xg2_budget_begin(int64_t max_ns, int64_t max_bytes) {
    if (bud.depth >= BUDGET_DEPTH) return xg2__fail(XG2_ERR_LIMIT, "compile budgets nested deeper than %d", BUDGET_DEPTH);
    if (!bud.depth) {
        bud.tripped = 0;
        bud.used = 0;
        bud.where[0] = 0;
        __atomic_add_fetch(&budgets_open, 1, __ATOMIC_RELAXED);
    }
    int64_t now = xg2__now_ns();
    budget_level l = {INT64_MAX, INT64_MAX, max_ns < 0 ? -1 : (double)max_ns / 1e6, max_bytes};
    if (max_ns >= 0 && max_ns < INT64_MAX - now) l.deadline = now + max_ns;
    if (max_bytes >= 0 && max_bytes < INT64_MAX / 2) l.cap = bud.used + max_bytes;
    if (bud.depth) { /* nested: the tighter of each limit (and the outer's numbers in the message) */
        const budget_level *o = &bud.lv[bud.depth - 1];
        if (o->deadline <= l.deadline) l.deadline = o->deadline, l.limit_ms = o->limit_ms;
        if (o->cap <= l.cap) l.cap = o->cap, l.limit_bytes = o->limit_bytes;
    }
    bud.lv[bud.depth++] = l;
    return XG2_OK;
}

int64_t xg2_budget_end(void) {
    if (!bud.depth) return 0;
    bud.depth--;
    int64_t used = bud.used;
    if (!bud.depth) {
        bud.tripped = 0;
        __atomic_sub_fetch(&budgets_open, 1, __ATOMIC_RELAXED);
    }
    return used;
}

/* The budget's own failure (message naming the limit and where it was hit). */
static int budget_fail(void) {
    const budget_level *l = &bud.lv[bud.depth - 1];
    if (bud.tripped == XG2__BUDGET_TIME)
        return xg2__fail(XG2_ERR_LIMIT, "compile time limit of %g ms exceeded%s", l->limit_ms, bud.where);
    return xg2__fail(XG2_ERR_LIMIT, "compile memory limit of %lld bytes exceeded%s", (long long)l->limit_bytes,
                     bud.where);
}

static void note_where(const char *what, const char *name) {
    if (bud.where[0]) return; /* the first place it was hit */
    if (name)
        snprintf(bud.where, sizeof bud.where, " (while %s '%.100s')", what, name);
    else
        snprintf(bud.where, sizeof bud.where, " (while %s)", what);
}

int xg2__budget_check(const char *what, const char *name) {
    if (!budget_on()) return XG2_OK;
    if (!bud.tripped) {
        if (xg2__now_ns() <= bud.lv[bud.depth - 1].deadline) return XG2_OK;
        bud.tripped = XG2__BUDGET_TIME;
    }
    note_where(what, name);
    return budget_fail();
}

int xg2__budget_status(int rc, const char *what) {
    if (!budget_on() || !bud.tripped) return rc;
    note_where(what, NULL);
    return budget_fail();
}

int xg2__vec_grow(void **a, uint32_t *cap, size_t elem, uint64_t need) {
    if (need > UINT32_MAX / 2) return 1;
    uint64_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    if (c * elem > (uint64_t)SIZE_MAX / 2) return 1;
    void *p = xg2__realloc(*a, (size_t)(c * elem));
    if (!p) return 1;
    *a = p;
    *cap = (uint32_t)c;
    return 0;
}

int xg2__charvec_printf(xg2_charvec *v, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0 || vec_reserve(v, (uint64_t)v->n + (uint64_t)need + 1)) return 1;
    va_start(ap, fmt);
    vsnprintf(v->a + v->n, (size_t)need + 1, fmt, ap);
    va_end(ap);
    v->n += (uint32_t)need;
    return 0;
}

/* In-place ascending sort of 32-bit keys: insertion sort for short runs,
 * quicksort (median of three) otherwise, recursing on the smaller side only
 * so the stack stays O(log n).  Replaces qsort, whose comparator calls and
 * scratch allocations dominated automaton construction. */
void xg2__sort_u32(uint32_t *a, uint32_t n) {
    while (n > 16) {
        uint32_t x = a[0], y = a[n / 2], z = a[n - 1];
        uint32_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        uint32_t i = 0, j = n - 1;
        for (;;) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i >= j) break;
            uint32_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
            j--;
        }
        /* a[0..j] <= pivot <= a[j+1..n) */
        uint32_t left = j + 1, right = n - left;
        if (left < right) {
            xg2__sort_u32(a, left);
            a += left;
            n = right;
        } else {
            xg2__sort_u32(a + left, right);
            n = left;
        }
    }
    for (uint32_t i = 1; i < n; i++) {
        uint32_t v = a[i], k = i;
        while (k > 0 && a[k - 1] > v) {
            a[k] = a[k - 1];
            k--;
        }
        a[k] = v;
    }
}
