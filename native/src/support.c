/*
 * support.c -- the per-thread error message, the allocator indirection and
 * growable-array growth used by every other file.
 */
#include <stdio.h>

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

void *xg2__malloc(size_t n) { return alloc_fails() ? NULL : malloc(n ? n : 1); }
void *xg2__calloc(size_t n, size_t size) {
    return alloc_fails() ? NULL : calloc(n ? n : 1, size ? size : 1);
}
void *xg2__realloc(void *p, size_t n) { return alloc_fails() ? NULL : realloc(p, n ? n : 1); }
void xg2__free(void *p) { free(p); }

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
