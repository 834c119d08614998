/*
 * earley_compact.c -- bound the parser's history: drop the sets that no
 * rollback and no live item can reach any more, and renumber positions.
 *
 * What reads an old set j:
 *   - a completion at pos of an item with origin j scans set j's wait list
 *     (those items only; for a guarded one also the input bytes j .. pos);
 *   - a rollback to j makes it the current set again (all its items).
 * So, with rollbacks limited to positions >= from:
 *   - the sets >= from are kept whole, and so is set 0 (reset returns there);
 *   - an older set is kept, with its waiting items only, when the origin of a
 *     kept item leads to it (transitively: the kept items' origins in turn);
 *   - a kept set with a guarded waiting item keeps every set after it (their
 *     waiting items) and the input bytes between them.
 * Kept sets stay in order, so "origin < pos", "origin == pos" (a prediction,
 * an empty completion) and origin 0 (the root instance) keep their meaning.
 * Every live item chains back to set 0 through waiting items, so set 0 is
 * always reachable anyway.
 */
#include "earley.h"

#define KEEP 1u
#define DONE 2u

uint64_t xg2__parser_history_bytes(const xg2_parser *p) {
    return (uint64_t)p->items.n * sizeof(xg2_item) + (uint64_t)p->wait.n * 2 * sizeof(uint32_t) +
           (uint64_t)(p->set_start.n + p->wait_start.n + p->btok.n + p->bchr.n) * sizeof(uint32_t) + p->input.n;
}

/* Mark the origins of set j's items (all of them, or its waiting items only);
 * 1 if one of its waiting items is guarded. */
static int visit(const xg2_parser *p, uint32_t j, int whole, uint32_t *fl) {
    int guarded = 0;
    fl[j] |= DONE;
    for (uint32_t w = p->wait_start.a[j]; w < p->wait_start.a[j + 1]; w++) {
        const xg2_item *it = &p->items.a[p->wait.a[w]];
        guarded |= it->guard != 0;
        if (!whole && it->origin != XG2_LOCAL_ROOT) fl[it->origin] |= KEEP;
    }
    if (whole)
        for (uint32_t i = p->set_start.a[j]; i < p->set_start.a[j + 1]; i++)
            if (p->items.a[i].origin != XG2_LOCAL_ROOT) fl[p->items.a[i].origin] |= KEEP;
    return guarded;
}

/* Flags KEEP for every set to keep (one pass from the newest set down: origins
 * only point back). */
static void mark(const xg2_parser *p, uint32_t from, uint32_t *fl) {
    uint32_t contig = from; /* every set >= contig is kept */
    fl[0] |= KEEP;
    for (uint32_t j = from; j < p->ns; j++) fl[j] |= KEEP;
    for (uint32_t j = p->ns; j-- > 0;) {
        if (!(fl[j] & KEEP) || (fl[j] & DONE)) continue;
        if (!visit(p, j, j >= from || j == 0, fl) || j >= contig) continue;
        for (uint32_t s = contig; s-- > j + 1;) { /* guard_over reads the bytes from j on */
            fl[s] |= KEEP;
            if (!(fl[s] & DONE)) visit(p, s, 0, fl);
        }
        contig = j;
    }
}

/* Give back the spare capacity of a vector that shrank a lot. */
#define SHRINK(v)                                                                          \
    do {                                                                                   \
        if ((v)->cap > 1024 && (v)->cap / 4 > (v)->n) {                                    \
            uint32_t c_ = (v)->n * 2 > 64 ? (v)->n * 2 : 64;                               \
            void *a_ = xg2__realloc((v)->a, sizeof(*(v)->a) * c_);                         \
            if (a_) (v)->a = a_, (v)->cap = c_;                                            \
        }                                                                                  \
    } while (0)

int xg2__parser_compact(xg2_parser *p, uint32_t from, uint32_t *new_from) {
    uint32_t ns = p->ns;
    *new_from = from;
    if (from == 0) return XG2_OK;
    uint32_t *fl = xg2__calloc(ns, sizeof(uint32_t)); /* flags, then the new position */
    if (!fl) return XG2_NOMEM();
    mark(p, from, fl);
    uint32_t nj = 0, ni = 0, nw = 0;
    for (uint32_t j = 0; j < ns; j++) {
        if (!(fl[j] & KEEP)) {
            fl[j] = UINT32_MAX;
            continue;
        }
        uint32_t s0 = p->set_start.a[j], s1 = p->set_start.a[j + 1];
        uint32_t w0 = p->wait_start.a[j], w1 = p->wait_start.a[j + 1];
        if (j == from) *new_from = nj;
        int whole = j >= from || j == 0;
        uint32_t next_kept = j + 1 < ns && (fl[j + 1] & KEEP);
        fl[j] = nj; /* before the origins below: a prediction's is j itself */
        p->set_start.a[nj] = ni;
        p->wait_start.a[nj] = nw;
        /* (writes never pass reads: every index only moves down) */
        if (whole) {
            for (uint32_t w = w0; w < w1; w++) {
                p->wait.a[nw + w - w0] = p->wait.a[w] - s0 + ni;
                p->wait_rule.a[nw + w - w0] = p->wait_rule.a[w];
            }
            for (uint32_t i = s0; i < s1; i++) p->items.a[ni + i - s0] = p->items.a[i];
            ni += s1 - s0;
            nw += w1 - w0;
        } else { /* waiting items only: wait lists are in item order, so each moves down */
            for (uint32_t w = w0; w < w1; w++) {
                p->items.a[ni] = p->items.a[p->wait.a[w]];
                p->wait.a[nw] = ni++;
                p->wait_rule.a[nw++] = p->wait_rule.a[w];
            }
        }
        for (uint32_t i = p->set_start.a[nj]; i < ni; i++) {
            uint32_t o = p->items.a[i].origin;
            if (o != XG2_LOCAL_ROOT) p->items.a[i].origin = fl[o]; /* o <= j: renumbered already */
        }
        /* the byte to the next set, where that is the next kept one (else never read) */
        if (j + 1 < ns) p->input.a[nj] = next_kept ? p->input.a[j] : 0;
        if (p->btok.n) { /* (absolute step numbers and code point counts: only moved) */
            p->btok.a[nj] = p->btok.a[j];
            p->bchr.a[nj] = p->bchr.a[j];
        }
        nj++;
    }
    p->set_start.a[nj] = ni;
    p->wait_start.a[nj] = nw;
    p->set_start.n = p->wait_start.n = nj + 1;
    p->ns = nj;
    p->items.n = ni;
    p->wait.n = p->wait_rule.n = nw;
    p->input.n = nj - 1;
    if (p->btok.n) p->btok.n = p->bchr.n = nj;
    xg2__free(fl);
    SHRINK(&p->items);
    SHRINK(&p->wait);
    SHRINK(&p->wait_rule);
    SHRINK(&p->set_start);
    SHRINK(&p->wait_start);
    SHRINK(&p->input);
    return XG2_OK;
}
