/*
 * fsm_dfa.c -- NFA -> DFA (subset construction) -> minimal DFA (Moore
 * refinement) -> trimmed, renumbered breadth-first.
 *
 * Counted loops stay loops: subset construction keeps a loop's states apart
 * from its surroundings, or names the repetition that must run as a counted
 * rule instead (XG2__LOOP_CONFLICT).  Minimal, canonically numbered DFAs make
 * equal sub-structures identical, which the structural hash of the
 * cross-grammar cache (fsm.c) relies on.
 */
#include "fsm_internal.h"


/* ---- subset construction ---- */

int xg2__make_csr(nfa_builder *b, uint32_t final, nfa_csr *c) {
    memset(c, 0, sizeof *c);
    c->n = b->n;
    c->final = final;
    c->off = xg2__calloc((size_t)b->n + 1, sizeof(uint32_t));
    c->eoff = xg2__calloc((size_t)b->n + 1, sizeof(uint32_t));
    c->e = xg2__malloc(sizeof(nedge) * (b->e.n ? b->e.n : 1));
    c->eto = xg2__malloc(sizeof(uint32_t) * (b->e.n ? b->e.n : 1));
    c->mark = xg2__calloc(b->n ? b->n : 1, sizeof(uint32_t));
    if (!c->off || !c->eoff || !c->e || !c->eto || !c->mark) return XG2_NOMEM();
    for (uint32_t i = 0; i < b->e.n; i++) {
        if (b->e.a[i].kind == NE_EPS) c->eoff[b->e.a[i].from + 1]++;
        else c->off[b->e.a[i].from + 1]++;
    }
    for (uint32_t s = 0; s < b->n; s++) {
        c->off[s + 1] += c->off[s];
        c->eoff[s + 1] += c->eoff[s];
    }
    uint32_t *fill = xg2__malloc(sizeof(uint32_t) * 2 * (b->n ? b->n : 1)), *efill = fill + b->n;
    if (!fill) return XG2_NOMEM();
    if (b->n) memcpy(fill, c->off, sizeof(uint32_t) * b->n);
    if (b->n) memcpy(efill, c->eoff, sizeof(uint32_t) * b->n);
    for (uint32_t i = 0; i < b->e.n; i++) { /* build order kept within each kind */
        const nedge *e = &b->e.a[i];
        if (e->kind == NE_EPS) c->eto[efill[e->from]++] = e->to;
        else c->e[fill[e->from]++] = *e;
    }
    xg2__free(fill);
    return XG2_OK;
}

void xg2__free_csr(nfa_csr *c) {
    xg2__free(c->in_head_closure);
    xg2__free(c->off);
    xg2__free(c->e);
    xg2__free(c->eoff);
    xg2__free(c->eto);
    xg2__free(c->mark);
    vec_free(&c->stack);
}

/* Epsilon closure of seeds (in place): sorted, unique. */
static int closure(nfa_csr *c, xg2_u32vec *set) {
    if (++c->stamp == 0) {
        memset(c->mark, 0, sizeof(uint32_t) * c->n);
        c->stamp = 1;
    }
    c->stack.n = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < set->n; i++) {
        uint32_t s = set->a[i];
        if (c->mark[s] == c->stamp) continue;
        c->mark[s] = c->stamp;
        set->a[k++] = s;
        if (vec_push(&c->stack, s)) return XG2_NOMEM();
    }
    set->n = k;
    while (c->stack.n) {
        uint32_t s = c->stack.a[--c->stack.n];
        for (uint32_t j = c->eoff[s]; j < c->eoff[s + 1]; j++) {
            uint32_t t = c->eto[j];
            if (c->mark[t] == c->stamp) continue;
            c->mark[t] = c->stamp;
            if (vec_push(set, t) || vec_push(&c->stack, t)) return XG2_NOMEM();
        }
    }
    xg2__sort_u32(set->a, set->n);
    return XG2_OK;
}

/* ---- interning of u32 sequences: subset states, seed lists, signatures ---- */

/* Sequence k is pool[off[k] .. off[k+1]).  Ids go by insertion, so the hash
 * never shows in results. */
typedef struct {
    xg2_u32vec pool, off, hash; /* off.n = count + 1, or 0 while empty */
    uint32_t *tab;              /* open addressing: id + 1, 0 = empty */
    uint32_t cap;
} seqtab;

static uint32_t seq_count(const seqtab *t) { return t->off.n ? t->off.n - 1 : 0; }

/* Id of a[0..n) in t, or UINT32_MAX; *h gets its hash (for seq_add). */
static uint32_t seq_find(const seqtab *t, const uint32_t *a, uint32_t n, uint32_t *h) {
    *h = (uint32_t)xg2__hash_u32s(a, n);
    if (!t->cap) return UINT32_MAX;
    for (uint32_t i = *h & (t->cap - 1); t->tab[i]; i = (i + 1) & (t->cap - 1)) {
        uint32_t k = t->tab[i] - 1;
        if (t->hash.a[k] == *h && t->off.a[k + 1] - t->off.a[k] == n &&
            !memcmp(t->pool.a + t->off.a[k], a, sizeof(uint32_t) * n))
            return k;
    }
    return UINT32_MAX;
}

/* Add a[0..n), absent from t, with its hash h: its id is the old seq_count. */
static int seq_add(seqtab *t, const uint32_t *a, uint32_t n, uint32_t h) {
    uint32_t count = seq_count(t);
    if ((uint64_t)(count + 1) * 2 > t->cap) {
        uint32_t ncap = t->cap ? t->cap * 2 : 64;
        uint32_t *tab = xg2__calloc(ncap, sizeof(uint32_t));
        if (!tab) return XG2_NOMEM();
        for (uint32_t k = 0; k < count; k++) {
            uint32_t i = t->hash.a[k] & (ncap - 1);
            while (tab[i]) i = (i + 1) & (ncap - 1);
            tab[i] = k + 1;
        }
        xg2__free(t->tab);
        t->tab = tab;
        t->cap = ncap;
    }
    if (vec_reserve(&t->pool, (uint64_t)t->pool.n + n) || vec_reserve(&t->off, (uint64_t)count + 2) ||
        vec_reserve(&t->hash, (uint64_t)count + 1))
        return XG2_NOMEM();
    if (n) memcpy(t->pool.a + t->pool.n, a, sizeof(uint32_t) * n);
    if (!t->off.n) t->off.a[t->off.n++] = 0;
    t->pool.n += n;
    t->off.a[t->off.n++] = t->pool.n;
    t->hash.a[t->hash.n++] = h;
    uint32_t i = h & (t->cap - 1);
    while (t->tab[i]) i = (i + 1) & (t->cap - 1);
    t->tab[i] = count + 1;
    return XG2_OK;
}

/* Id of a[0..n) in t, adding it if new. */
static int seq_intern(seqtab *t, const uint32_t *a, uint32_t n, uint32_t *id) {
    uint32_t h;
    if ((*id = seq_find(t, a, n, &h)) != UINT32_MAX) return XG2_OK;
    *id = seq_count(t);
    return seq_add(t, a, n, h);
}

/* Room in t for about `count` sequences of `items` members in all, made at once
 * (each vector growing from 8 by doubling cost a tenth of a small rule's build). */
static int seq_reserve(seqtab *t, uint32_t count, uint64_t items) {
    if (vec_reserve(&t->pool, items) || vec_reserve(&t->off, (uint64_t)count + 1) || vec_reserve(&t->hash, count))
        return XG2_NOMEM();
    if (t->cap || count < 32) return XG2_OK;
    uint32_t cap = 64;
    while (cap < 2 * count) cap *= 2;
    if (!(t->tab = xg2__calloc(cap, sizeof(uint32_t)))) return XG2_NOMEM();
    t->cap = cap;
    return XG2_OK;
}

/* Empty t, keeping its memory. */
static void seq_clear(seqtab *t) {
    for (uint32_t k = 0, count = seq_count(t); k < count; k++) {
        uint32_t i = t->hash.a[k] & (t->cap - 1);
        while (t->tab[i] != k + 1) i = (i + 1) & (t->cap - 1);
        t->tab[i] = 0;
    }
    t->pool.n = t->off.n = t->hash.n = 0;
}

static void seq_free(seqtab *t) {
    vec_free(&t->pool);
    vec_free(&t->off);
    vec_free(&t->hash);
    xg2__free(t->tab);
    memset(t, 0, sizeof *t);
}

static int cmp_redge(const void *a, const void *b) {
    const xg2_redge *x = a, *y = b;
    if (x->rule != y->rule) return x->rule < y->rule ? -1 : 1;
    return (x->to > y->to) - (x->to < y->to);
}

/* ---- counted loops: keeping them apart from their surroundings ---- */

/* An NFA state with only epsilon edges that does not end the rule: it never
 * acts on its own. */
static int inert(const nfa_csr *c, uint32_t s) {
    if (s == c->final) return 0;
    return c->off[s + 1] == c->off[s];
}

/* Per loop: which NFA states the eps-closure of its head reaches; and a loop
 * whose exit reaches its own head again without input (as in (x{0,50})*)
 * cannot keep a count. */
static int prepare_loops(nfa_csr *c, uint32_t *conflict) {
    if (!c->n_loops) return XG2_OK;
    c->in_head_closure = xg2__calloc((size_t)c->n_loops * c->n, 1);
    if (!c->in_head_closure) return XG2_NOMEM();
    xg2_u32vec set = {0};
    int rc = XG2_OK;
    for (uint32_t k = 0; k < c->n_loops && !rc; k++) {
        uint8_t *row = c->in_head_closure + (size_t)k * c->n;
        set.n = 0;
        if (vec_push(&set, c->loops[k].head)) { rc = XG2_NOMEM(); break; }
        if ((rc = closure(c, &set))) break;
        for (uint32_t i = 0; i < set.n; i++) row[set.a[i]] = 1;
        set.n = 0;
        if (vec_push(&set, c->loops[k].exit)) { rc = XG2_NOMEM(); break; }
        if ((rc = closure(c, &set))) break;
        for (uint32_t i = 0; i < set.n; i++)
            if (set.a[i] == c->loops[k].head) { *conflict = c->loops[k].expr; rc = XG2__LOOP_CONFLICT; }
    }
    vec_free(&set);
    return rc;
}

/* Entering a loop (a DFA state whose closure holds a loop head) is ambiguous
 * when the same input also bypasses the loop -- as in "x" (d{40,60})? "z",
 * where after "x" the byte "z" skips the loop: the head's exit check
 * (count >= min) would wrongly refuse it.  So if the seeds reach, without
 * going through a head, both a head with min > 0 and a state that acts on
 * input (byte or rule edges, or the rule's end), the loop must be a rule. */
static int entry_conflict(nfa_csr *c, const uint32_t *seeds, uint32_t n, xg2_u32vec *stack, uint8_t *seen,
                          uint32_t *conflict) {
    if (!c->n_loops) return XG2_OK;
    stack->n = 0;
    uint32_t head = 0;
    int acts = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (seen[seeds[i]]) continue;
        seen[seeds[i]] = 1;
        if (vec_push(stack, seeds[i])) return XG2_NOMEM();
    }
    for (uint32_t k = 0; k < stack->n; k++) {
        uint32_t s = stack->a[k];
        uint32_t t = c->tag[s];
        if (t & 1) {
            if (c->loops[(t >> 1) - 1].min > 0) head = t >> 1;
            continue; /* do not look past a head */
        }
        if (!t && !inert(c, s)) acts = 1;
        for (uint32_t j = c->eoff[s]; j < c->eoff[s + 1]; j++) {
            if (seen[c->eto[j]]) continue;
            seen[c->eto[j]] = 1;
            if (vec_push(stack, c->eto[j])) return XG2_NOMEM();
        }
    }
    for (uint32_t k = 0; k < stack->n; k++) seen[stack->a[k]] = 0;
    if (head && acts) {
        *conflict = c->loops[head - 1].expr;
        return XG2__LOOP_CONFLICT;
    }
    return XG2_OK;
}

/* The loop tag of a DFA state from its members, or XG2__LOOP_CONFLICT: a
 * loop's states may share a DFA state only with the head's own closure (its
 * exit) and with inert states. */
static int set_tag(const nfa_csr *c, const uint32_t *m, uint32_t n, uint32_t *tag, uint32_t *conflict) {
    uint32_t k = 0, head = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = c->tag[m[i]];
        if (!t) continue;
        if (k && (t >> 1) != k) { *conflict = c->loops[k - 1].expr; return XG2__LOOP_CONFLICT; }
        k = t >> 1;
        head |= t & 1;
    }
    *tag = k ? k << 1 | head : 0;
    if (!k) return XG2_OK;
    const uint8_t *row = c->in_head_closure + (size_t)(k - 1) * c->n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = m[i];
        if (c->tag[s] || inert(c, s)) continue;
        if (head && row[s]) continue;
        *conflict = c->loops[k - 1].expr;
        return XG2__LOOP_CONFLICT;
    }
    return XG2_OK;
}

typedef struct {
    seqtab ds;          /* DFA states by member set */
    seqtab seeds;       /* seed lists seen, and the DFA state each led to: */
    xg2_u32vec seed_to;
    uint32_t limit;
    xg2_u32vec estack;  /* entry_conflict's scratch */
    uint8_t *eseen;
    uint32_t *single_to; /* a seed list of one NFA state s: its DFA state + 1, or 0 */
} subset;

/* The DFA state that seeds (in set, which is overwritten) lead to: checked and
 * closed once per distinct seed list.  *id = UINT32_MAX past the limit. */
static int next_state(nfa_csr *c, subset *x, xg2_u32vec *set, uint32_t *conflict, uint32_t *id) {
    /* Most seed lists are one state (the NFA is nearly deterministic): those are
     * remembered in a direct map, the others in the interning table. */
    uint32_t *single = set->n == 1 ? &x->single_to[set->a[0]] : NULL;
    uint32_t h, k;
    int rc;
    if (single) {
        if (*single) {
            *id = *single - 1;
            return XG2_OK;
        }
    } else if ((k = seq_find(&x->seeds, set->a, set->n, &h)) != UINT32_MAX) {
        *id = x->seed_to.a[k];
        return XG2_OK;
    } else if ((rc = seq_add(&x->seeds, set->a, set->n, h))) {
        return rc;
    }
    if ((rc = entry_conflict(c, set->a, set->n, &x->estack, x->eseen, conflict))) return rc;
    if ((rc = closure(c, set))) return rc;
    if ((*id = seq_find(&x->ds, set->a, set->n, &h)) == UINT32_MAX && seq_count(&x->ds) < x->limit) {
        *id = seq_count(&x->ds);
        if ((rc = seq_add(&x->ds, set->a, set->n, h))) return rc;
    }
    if (single) {
        if (*id != UINT32_MAX) *single = *id + 1; /* (past the limit the build stops anyway) */
        return XG2_OK;
    }
    return vec_push(&x->seed_to, *id) ? XG2_NOMEM() : XG2_OK;
}

/* One subset construction: the DFA it builds (boff/br, roff/re, final, tags,
 * loops) and its scratch. */
typedef struct {
    subset x;
    xg2_u32vec set, boff, roff, tags;
    brvec bedges, br;
    revec redges, re;
    VEC(uint8_t) final;
    VEC(uint32_t) bsrc; /* loop tag of each gathered byte edge's source */
    xg2_u32vec bstart, bitems; /* byte edges bucketed by interval */
    xg2_loop_info *loops;
    uint32_t conflict;
} dbuild;

static void dbuild_free(dbuild *b) {
    seq_free(&b->x.ds);
    seq_free(&b->x.seeds);
    vec_free(&b->x.seed_to);
    vec_free(&b->x.estack);
    xg2__free(b->x.eseen);
    xg2__free(b->x.single_to);
    vec_free(&b->set);
    vec_free(&b->boff);
    vec_free(&b->roff);
    vec_free(&b->tags);
    vec_free(&b->bedges);
    vec_free(&b->bsrc);
    vec_free(&b->bstart);
    vec_free(&b->bitems);
    vec_free(&b->br);
    vec_free(&b->redges);
    vec_free(&b->re);
    vec_free(&b->final);
    xg2__free(b->loops);
}

/* The edges of the members of b->set: byte edges (with their sources' loop
 * tags) and rule edges; *fin: a member is the NFA's final state. */
static int gather_edges(const nfa_csr *c, dbuild *b, uint8_t *fin) {
    b->bedges.n = b->redges.n = b->bsrc.n = 0;
    *fin = 0;
    uint64_t total = 0; /* (room for all of them first: one capacity check, not three per edge) */
    for (uint32_t k = 0; k < b->set.n; k++) total += c->off[b->set.a[k] + 1] - c->off[b->set.a[k]];
    if (vec_reserve(&b->bedges, total) || vec_reserve(&b->bsrc, total) || vec_reserve(&b->redges, total))
        return XG2_NOMEM();
    for (uint32_t k = 0; k < b->set.n; k++) {
        uint32_t s = b->set.a[k];
        if (s == c->final) *fin = 1;
        for (uint32_t j = c->off[s]; j < c->off[s + 1]; j++) {
            const nedge *e = &c->e[j];
            if (e->kind == NE_BYTE) {
                b->bedges.a[b->bedges.n++] = (xg2_brange){e->a, e->b, e->to};
                b->bsrc.a[b->bsrc.n++] = c->tag[s];
            } else if (e->kind == NE_RULE) {
                b->redges.a[b->redges.n++] = (xg2_redge){e->a, e->to};
            }
        }
    }
    return XG2_OK;
}

/* DFA state d's move on bytes lo..hi to the successor of the seeds in b->set,
 * merged into its last byte edge where that one ends at lo - 1 on the same. */
static int add_move(nfa_csr *c, dbuild *b, uint32_t d, uint32_t lo, uint32_t hi) {
    uint32_t id;
    int rc = next_state(c, &b->x, &b->set, &b->conflict, &id);
    if (rc) return rc;
    if (id == UINT32_MAX) return XG2_ERR_LIMIT;
    brvec *br = &b->br;
    if (br->n > b->boff.a[d] && br->a[br->n - 1].to == id && br->a[br->n - 1].hi + 1 == lo) {
        br->a[br->n - 1].hi = hi;
        return XG2_OK;
    }
    xg2_brange r = {lo, hi, id};
    return vec_push(br, r) ? XG2_NOMEM() : XG2_OK;
}

/* DFA state d's byte edges from the gathered ones (tag: d's loop tag): 0..255
 * split at every range boundary, each interval's targets one successor. */
static int byte_moves(nfa_csr *c, dbuild *b, uint32_t d, uint32_t tag) {
    const brvec *be = &b->bedges;
    uint64_t cut[5] = {0, 0, 0, 0, 0}; /* a bitmap of 0..256 */
    for (uint32_t k = 0; k < be->n; k++) {
        uint32_t lo = be->a[k].lo, end = be->a[k].hi + 1;
        cut[lo >> 6] |= 1ull << (lo & 63);
        cut[end >> 6] |= 1ull << (end & 63);
    }
    /* Distinct boundaries: interval k is [pts[k], pts[k+1]); every edge
     * starts and ends at boundaries, so edge lo..hi covers intervals
     * at[lo] .. at[hi + 1] - 1. */
    uint32_t pts[257], at[257], np = 0;
    for (uint32_t w = 0; w < 5; w++)
        for (uint64_t m = cut[w]; m; m &= m - 1) {
            uint32_t bb = w * 64 + (uint32_t)__builtin_ctzll(m);
            at[bb] = np;
            pts[np++] = bb;
        }
    /* Bucket the edges by the intervals they cover (one pass per edge, not
     * one scan of all edges per interval: wide alternations stay linear). */
    uint32_t nint = np ? np - 1 : 0;
    if (vec_reserve(&b->bstart, (uint64_t)nint + 1)) return XG2_NOMEM();
    uint32_t *bstart = b->bstart.a;
    memset(bstart, 0, sizeof(uint32_t) * (nint + 1));
    b->bstart.n = nint + 1;
    uint64_t total = 0;
    for (uint32_t j = 0; j < be->n; j++) {
        uint32_t k0 = at[be->a[j].lo], k1 = at[be->a[j].hi + 1] - 1;
        for (uint32_t k = k0; k <= k1; k++) bstart[k]++;
        total += k1 - k0 + 1;
    }
    if (vec_reserve(&b->bitems, total)) return XG2_NOMEM();
    for (uint32_t k = 0, acc = 0; k <= nint; k++) {
        uint32_t c0 = bstart[k];
        bstart[k] = acc;
        acc += c0;
    }
    for (uint32_t j = 0; j < be->n; j++) { /* ascending j inside each bucket */
        uint32_t k0 = at[be->a[j].lo], k1 = at[be->a[j].hi + 1] - 1;
        for (uint32_t k = k0; k <= k1; k++) b->bitems.a[bstart[k]++] = j;
    }
    for (uint32_t k = 0, from = 0; k < nint; k++) {
        uint32_t lo = pts[k], hi = pts[k + 1] - 1, to = bstart[k];
        uint32_t first_item = from;
        from = to;
        b->set.n = 0;
        int from_loop = 0, from_outside = 0;
        for (uint32_t q = first_item; q < to; q++) {
            uint32_t j = b->bitems.a[q];
            if (vec_push(&b->set, be->a[j].to)) return XG2_NOMEM();
            if (b->bsrc.a[j]) from_loop = 1; else from_outside = 1;
        }
        if (!b->set.n) continue;
        /* From a loop head a byte either starts an iteration or leaves the loop. */
        if (tag & 1) {
            uint32_t k1 = (tag >> 1) - 1;
            if (from_loop && from_outside) { b->conflict = c->loops[k1].expr; return XG2__LOOP_CONFLICT; }
            if (from_loop)
                byteset_add_range(&b->loops[k1].first, lo, hi);
        }
        int rc = add_move(c, b, d, lo, hi);
        if (rc) return rc;
    }
    return XG2_OK;
}

/* DFA state d's byte edges when the gathered ones are already ascending and
 * disjoint (most states: one NFA state's character classes and literals): each
 * edge is then one of byte_moves' intervals with its target alone, taken in
 * the same order, so the DFA is the same without the interval buckets.
 * *done = 0 (nothing changed) when they are not. */
static int direct_moves(nfa_csr *c, dbuild *b, uint32_t d, int *done) {
    const brvec *be = &b->bedges;
    *done = 0;
    for (uint32_t k = 1; k < be->n; k++)
        if (be->a[k].lo <= be->a[k - 1].hi) return XG2_OK;
    *done = 1;
    for (uint32_t k = 0; k < be->n; k++) {
        b->set.n = 0;
        if (vec_push(&b->set, be->a[k].to)) return XG2_NOMEM();
        int rc = add_move(c, b, d, be->a[k].lo, be->a[k].hi);
        if (rc) return rc;
    }
    return XG2_OK;
}

/* The current DFA state's rule edges: the gathered ones grouped by rule, each
 * group's targets one successor. */
static int rule_moves(nfa_csr *c, dbuild *b) {
    revec *re = &b->redges;
    if (re->n > 32) qsort(re->a, re->n, sizeof(xg2_redge), cmp_redge);
    else for (uint32_t j = 1; j < re->n; j++) { /* insertion sort: qsort allocates */
        xg2_redge e = re->a[j];
        uint32_t i = j;
        for (; i > 0 && (re->a[i - 1].rule > e.rule || (re->a[i - 1].rule == e.rule && re->a[i - 1].to > e.to)); i--)
            re->a[i] = re->a[i - 1];
        re->a[i] = e;
    }
    for (uint32_t k = 0; k < re->n;) {
        uint32_t rule = re->a[k].rule, id;
        b->set.n = 0;
        for (; k < re->n && re->a[k].rule == rule; k++)
            if (vec_push(&b->set, re->a[k].to)) return XG2_NOMEM();
        int rc = next_state(c, &b->x, &b->set, &b->conflict, &id);
        if (rc) return rc;
        if (id == UINT32_MAX) return XG2_ERR_LIMIT;
        xg2_redge r = {rule, id};
        if (vec_push(&b->re, r)) return XG2_NOMEM();
    }
    return XG2_OK;
}

/* Subset construction.  Returns XG2_ERR_LIMIT (message set) past `limit` states,
 * XG2__LOOP_CONFLICT (out->conflict_expr set) for a loop that must be a rule. */
int xg2__determinize(nfa_csr *c, uint32_t limit, xg2_dfa *out) {
    dbuild b = {0};
    b.x.limit = limit;
    const seqtab *ds = &b.x.ds;
    int rc = XG2_OK;
    uint32_t id;

    if (c->n_loops) {
        b.loops = xg2__calloc(c->n_loops, sizeof *b.loops);
        if (!b.loops) goto oom;
        for (uint32_t k = 0; k < c->n_loops; k++) {
            b.loops[k].min = c->loops[k].min;
            b.loops[k].max = c->loops[k].max;
            b.loops[k].expr = c->loops[k].expr;
        }
    }
    if ((rc = prepare_loops(c, &b.conflict))) goto out;
    if (c->n_loops && !(b.x.eseen = xg2__calloc(c->n, 1))) goto oom;
    if (!(b.x.single_to = xg2__calloc(c->n ? c->n : 1, sizeof(uint32_t)))) goto oom;
    /* (sized for as many DFA states as the NFA has states: subset construction of a
     * rule mostly stays below that; these are the build's own, freed at its end) */
    uint32_t guess = c->n < 4096 ? c->n : 4096;
    if (seq_reserve(&b.x.ds, guess, 2ull * guess) || seq_reserve(&b.x.seeds, guess, 2ull * guess) ||
        vec_reserve(&b.boff, guess + 1ull) || vec_reserve(&b.roff, guess + 1ull) || vec_reserve(&b.final, guess) ||
        vec_reserve(&b.tags, guess) || vec_reserve(&b.br, 2ull * guess))
        goto oom;
    if (vec_push(&b.set, 0)) goto oom;
    if ((rc = next_state(c, &b.x, &b.set, &b.conflict, &id))) goto out;
    for (uint32_t d = 0; d < seq_count(ds); d++) {
        if ((d & 15) == 0 && (rc = xg2__budget_check("determinising rule", c->name))) goto out;
        /* Gather the members' edges.  (Copy the member list: the pool may move.) */
        uint32_t nm = ds->off.a[d + 1] - ds->off.a[d];
        if (vec_reserve(&b.set, nm)) goto oom;
        if (nm) memcpy(b.set.a, ds->pool.a + ds->off.a[d], sizeof(uint32_t) * nm);
        b.set.n = nm;
        uint32_t tag;
        uint8_t fin;
        if ((rc = set_tag(c, b.set.a, b.set.n, &tag, &b.conflict))) goto out;
        if ((rc = gather_edges(c, &b, &fin))) goto out;
        if ((tag & 1) && b.redges.n) { b.conflict = c->loops[(tag >> 1) - 1].expr; rc = XG2__LOOP_CONFLICT; goto out; }
        if (vec_push(&b.final, fin) || vec_push(&b.boff, b.br.n) || vec_push(&b.roff, b.re.n) || vec_push(&b.tags, tag))
            goto oom;
        int direct = 0;
        if (!(tag & 1) && (rc = direct_moves(c, &b, d, &direct))) goto out;
        if ((!direct && (rc = byte_moves(c, &b, d, tag))) || (rc = rule_moves(c, &b))) goto out;
    }
    if (vec_push(&b.boff, b.br.n) || vec_push(&b.roff, b.re.n)) goto oom;
    out->n = seq_count(ds);
    out->boff = b.boff.a; b.boff.a = NULL;
    out->br = b.br.a; b.br.a = NULL;
    out->roff = b.roff.a; b.roff.a = NULL;
    out->re = b.re.a; b.re.a = NULL;
    out->final = b.final.a; b.final.a = NULL;
    out->tag = b.tags.a; b.tags.a = NULL;
    out->loops = b.loops; b.loops = NULL;
    out->n_loops = c->n_loops;
    goto out;
oom:
    rc = XG2_NOMEM();
out:
    if (rc == XG2__LOOP_CONFLICT) out->conflict_expr = b.conflict;
    dbuild_free(&b);
    return rc;
}

/* ---- minimisation, trimming, canonical numbering ---- */

/* Signature of state s: (final, tag, byte edges merged by target class, rule
 * edges).  cls(t) names the class of a target. */
typedef struct {
    const xg2_dfa *d;
    const uint32_t *comp;  /* SCC of each state */
    uint32_t cur;          /* the SCC being refined */
    const uint32_t *block; /* final classes (other SCCs) */
    const uint32_t *local; /* current classes inside `cur` */
} sig_ctx;

static uint32_t target_class(const sig_ctx *x, uint32_t t) {
    return x->comp[t] == x->cur ? 0x80000000u | x->local[t] : x->block[t];
}

static int signature(const sig_ctx *x, uint32_t s, uint32_t head, xg2_u32vec *sig) {
    const xg2_dfa *d = x->d;
    uint32_t nb = d->boff[s + 1] - d->boff[s], nr = d->roff[s + 1] - d->roff[s];
    if (vec_reserve(sig, 3ull + 3ull * nb + 2ull * nr)) return 1; /* (then plain stores) */
    uint32_t *a = sig->a, n = 0;
    a[n++] = head;
    a[n++] = d->tag ? d->tag[s] : 0;
    uint32_t mark = n;
    for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) {
        uint32_t tc = target_class(x, d->br[j].to);
        if (n > mark && a[n - 1] == tc && a[n - 2] + 1 == d->br[j].lo) {
            a[n - 2] = d->br[j].hi;
        } else {
            a[n++] = d->br[j].lo;
            a[n++] = d->br[j].hi;
            a[n++] = tc;
        }
    }
    a[n++] = UINT32_MAX;
    for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++) {
        a[n++] = d->re[j].rule;
        a[n++] = target_class(x, d->re[j].to);
    }
    sig->n = n;
    return 0;
}

/* Strongly connected components of the DFA, sinks first (iterative Tarjan). */
int xg2__dfa_scc(const xg2_dfa *d, uint32_t *comp, uint32_t *n_comp) {
    uint32_t n = d->n;
    int rc = XG2_OK;
    uint32_t *idx = xg2__malloc(sizeof(uint32_t) * n), *low = xg2__malloc(sizeof(uint32_t) * n);
    uint8_t *on = xg2__calloc(n, 1);
    xg2_u32vec st = {0}, cv = {0}, ci = {0};
    if (!idx || !low || !on) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t v = 0; v < n; v++) idx[v] = UINT32_MAX;
    uint32_t counter = 0, nc = 0;
    /* Edge i of state v: byte edges first, then rule edges. */
#define N_EDGES(v) (d->boff[(v) + 1] - d->boff[v] + d->roff[(v) + 1] - d->roff[v])
#define EDGE(v, i) ((i) < d->boff[(v) + 1] - d->boff[v] ? d->br[d->boff[v] + (i)].to \
                                                        : d->re[d->roff[v] + (i) - (d->boff[(v) + 1] - d->boff[v])].to)
    for (uint32_t root = 0; root < n; root++) {
        if (idx[root] != UINT32_MAX) continue;
        idx[root] = low[root] = counter++;
        on[root] = 1;
        if (vec_push(&st, root) || vec_push(&cv, root) || vec_push(&ci, 0)) { rc = XG2_NOMEM(); goto out; }
        while (cv.n) {
            uint32_t v = cv.a[cv.n - 1];
            if (ci.a[ci.n - 1] < N_EDGES(v)) {
                uint32_t w = EDGE(v, ci.a[ci.n - 1]);
                ci.a[ci.n - 1]++;
                if (idx[w] == UINT32_MAX) {
                    idx[w] = low[w] = counter++;
                    on[w] = 1;
                    if (vec_push(&st, w) || vec_push(&cv, w) || vec_push(&ci, 0)) { rc = XG2_NOMEM(); goto out; }
                } else if (on[w] && idx[w] < low[v]) {
                    low[v] = idx[w];
                }
                continue;
            }
            cv.n--;
            ci.n--;
            if (cv.n && low[v] < low[cv.a[cv.n - 1]]) low[cv.a[cv.n - 1]] = low[v];
            if (low[v] == idx[v]) {
                uint32_t x;
                do {
                    x = st.a[--st.n];
                    on[x] = 0;
                    comp[x] = nc;
                } while (x != v);
                nc++;
            }
        }
    }
#undef N_EDGES
#undef EDGE
    *n_comp = nc;
out:
    xg2__free(idx);
    xg2__free(low);
    xg2__free(on);
    vec_free(&st);
    vec_free(&cv);
    vec_free(&ci);
    return rc;
}

/* Refinement of one cyclic component to its coarsest stable partition under
 * signature() (what Moore rounds reach), touching only states that can change.
 * Classes keep their ids when they split -- the largest part keeps it -- so
 * only predecessors of states whose id changed can get a new signature; those
 * are marked dirty.  A class keeps its dirty members first in elems; its clean
 * members all share one signature.  A state changes id only into a part at
 * most half its class, so at most log2(m) times. */
typedef struct {
    uint32_t *elems, *pos;            /* states by class; index of each in elems (elems owns the u32 arrays) */
    uint32_t *cstart, *clen, *ndirty; /* per class of the component */
    uint32_t *queue;                  /* ring of the classes with dirty members */
    uint32_t *gid, *tmp, *gsize, *gbeg; /* scratch for splitting one class by signature */
    uint8_t *dirty;
    uint32_t *poff, *pend, *pv; /* predecessors inside the same component */
} refiner;

static void mark_dirty(refiner *r, const uint32_t *local, uint32_t m, uint32_t *qhead, uint32_t *qn, uint32_t s) {
    if (r->dirty[s]) return;
    r->dirty[s] = 1;
    uint32_t k = local[s], i = r->pos[s], j = r->cstart[k] + r->ndirty[k]++, u = r->elems[j];
    r->elems[j] = s;
    r->pos[s] = j;
    r->elems[i] = u;
    r->pos[u] = i;
    if (r->ndirty[k] == 1) r->queue[(*qhead + (*qn)++) % m] = k;
}

/* Classes of mem[0..m) into local (ids 0 .. *count - 1). */
static int refine(const sig_ctx *x, refiner *r, uint32_t *local, const uint32_t *mem, uint32_t m, uint32_t *count,
                  seqtab *loc, xg2_u32vec *sig) {
    const xg2_dfa *d = x->d;
    uint32_t nclass = 0, qhead = 0, qn = 0, n1 = 0, at[2];
    for (uint32_t i = 0; i < m; i++) n1 += d->final[mem[i]];
    at[0] = 0;
    at[1] = m - n1;
    for (uint32_t f = 0; f < 2; f++) { /* non-final and final states, all dirty */
        uint32_t len = f ? n1 : m - n1;
        if (!len) continue;
        r->cstart[nclass] = at[f];
        r->clen[nclass] = r->ndirty[nclass] = len;
        r->queue[qn++] = nclass++;
    }
    for (uint32_t i = 0; i < m; i++) {
        uint32_t s = mem[i], f = d->final[s];
        local[s] = f && n1 < m;
        r->pos[s] = at[f]++;
        r->elems[r->pos[s]] = s;
        r->dirty[s] = 1;
    }
    while (qn) {
        uint32_t c = r->queue[qhead], st = r->cstart[c], len = r->clen[c], nd = r->ndirty[c], ng = 0, g;
        qhead = (qhead + 1) % m;
        qn--;
        seq_clear(loc);
        if (nd < len) { /* group 0: the clean members' signature */
            if (signature(x, r->elems[st + nd], c, sig) || seq_intern(loc, sig->a, sig->n, &g)) return XG2_NOMEM();
            r->gsize[ng++] = len - nd;
        }
        for (uint32_t i = 0; i < nd; i++) {
            uint32_t s = r->elems[st + i];
            r->dirty[s] = 0;
            if (signature(x, s, c, sig) || seq_intern(loc, sig->a, sig->n, &g)) return XG2_NOMEM();
            if (g == ng) r->gsize[ng++] = 0;
            r->gsize[g]++;
            r->gid[i] = g;
        }
        r->ndirty[c] = 0;
        if (ng == 1) continue;
        /* Dirty prefix sorted by group, group 0 last (next to the clean members). */
        uint32_t big = 0, b = 0;
        for (g = 1; g < ng; g++) {
            r->gbeg[g] = b;
            b += r->gsize[g];
            if (r->gsize[g] > r->gsize[big]) big = g;
        }
        r->gbeg[0] = b;
        for (uint32_t i = 0; i < nd; i++) r->tmp[r->gbeg[r->gid[i]]++] = r->elems[st + i];
        for (uint32_t i = 0; i < nd; i++) {
            r->elems[st + i] = r->tmp[i];
            r->pos[r->tmp[i]] = st + i;
        }
        /* gbeg[g] now ends group g's dirty part; each part but the largest gets a new id. */
        uint32_t nchanged = 0;
        for (g = 0; g < ng; g++) {
            uint32_t end = g ? r->gbeg[g] : len, beg = end - r->gsize[g], k = g == big ? c : nclass++;
            r->cstart[k] = st + beg;
            r->clen[k] = r->gsize[g];
            r->ndirty[k] = 0;
            if (k != c)
                for (uint32_t i = st + beg; i < st + end; i++) {
                    local[r->elems[i]] = k;
                    r->tmp[nchanged++] = r->elems[i];
                }
        }
        for (uint32_t i = 0; i < nchanged; i++)
            for (uint32_t j = r->poff[r->tmp[i]]; j < r->pend[r->tmp[i]]; j++)
                mark_dirty(r, local, m, &qhead, &qn, r->pv[j]);
    }
    *count = nclass;
    return XG2_OK;
}

static void add_pred(refiner *r, const uint32_t *comp, int fill, uint32_t s, uint32_t t) {
    if (comp[s] != comp[t]) return;
    if (!fill)
        r->poff[t + 1]++;
    else if (r->pend[t] == r->poff[t] || r->pv[r->pend[t] - 1] != s) /* s's edges to t are adjacent: keep one */
        r->pv[r->pend[t]++] = s;
}

/* Work arrays for refine(), sized for all of d, and the predecessor lists. */
static int refiner_init(refiner *r, const xg2_dfa *d, const uint32_t *comp) {
    uint32_t n = d->n;
    uint32_t *w = xg2__malloc(sizeof(uint32_t) * (12 * (size_t)n + 1));
    r->dirty = xg2__calloc(n, 1);
    if (!w || !r->dirty) {
        xg2__free(w);
        return XG2_NOMEM();
    }
    uint32_t **arr[] = {&r->elems, &r->pos, &r->cstart, &r->clen, &r->ndirty, &r->queue,
                        &r->gid, &r->tmp, &r->gsize, &r->gbeg, &r->pend, &r->poff};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) *arr[i] = w + i * (size_t)n;
    memset(r->poff, 0, sizeof(uint32_t) * ((size_t)n + 1));
    for (int fill = 0; fill < 2; fill++) { /* count, then fill */
        if (fill) {
            for (uint32_t t = 0; t < n; t++) r->poff[t + 1] += r->poff[t];
            if (!(r->pv = xg2__malloc(sizeof(uint32_t) * (r->poff[n] ? r->poff[n] : 1)))) return XG2_NOMEM();
            memcpy(r->pend, r->poff, sizeof(uint32_t) * n);
        }
        for (uint32_t s = 0; s < n; s++) {
            for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) add_pred(r, comp, fill, s, d->br[j].to);
            for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++) add_pred(r, comp, fill, s, d->re[j].to);
        }
    }
    return XG2_OK;
}

static void refiner_free(refiner *r) {
    xg2__free(r->elems);
    xg2__free(r->dirty);
    xg2__free(r->pv);
}

/* Minimisation by components, sinks first: a state outside any cycle gets its
 * class from its signature over final classes in one step (a class of a cycle
 * done before, or an earlier such state, with the same signature, or a new
 * one); the states of a cycle are refined among themselves (refine()).  Linear
 * on the long chains that literals produce; states of two different cycles are
 * not merged. */
int xg2__minimize(const xg2_dfa *d, const char *name, uint32_t *block, uint32_t *n_blocks) {
    uint32_t n = d->n, nc = 0;
    int rc = XG2_OK;
    uint32_t *comp = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *local = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *order = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *start = xg2__calloc((size_t)n + 2, sizeof(uint32_t));
    uint32_t *rep = xg2__malloc(sizeof(uint32_t) * (n ? n : 1)); /* a member of each class of a cycle */
    xg2_u32vec sig = {0};
    seqtab global = {0}, loc = {0};
    refiner r = {0};
    if (!comp || !local || !order || !start || !rep) { rc = XG2_NOMEM(); goto out; }
    /* (a signature a state: its header and about two edges of three words; see seq_reserve) */
    if ((rc = seq_reserve(&global, n, 8ull * n)) || vec_reserve(&sig, 64)) goto out;
    if ((rc = xg2__dfa_scc(d, comp, &nc))) goto out;
    for (uint32_t s = 0; s < n; s++) start[comp[s] + 1]++;
    for (uint32_t c = 0; c < nc; c++) start[c + 1] += start[c];
    {
        uint32_t *pos = xg2__malloc(sizeof(uint32_t) * (nc + 1));
        if (!pos) { rc = XG2_NOMEM(); goto out; }
        memcpy(pos, start, sizeof(uint32_t) * (nc + 1));
        for (uint32_t s = 0; s < n; s++) order[pos[comp[s]]++] = s;
        xg2__free(pos);
    }
    sig_ctx x = {d, comp, UINT32_MAX, block, local};
    uint32_t next_block = 0;
    for (uint32_t c = 0; c < nc; c++) {
        const uint32_t *mem = order + start[c];
        uint32_t m = start[c + 1] - start[c];
        if ((c & 63) == 0 && (rc = xg2__budget_check("minimising rule", name))) goto out;
        x.cur = c;
        int cyclic = m > 1;
        if (!cyclic) { /* a single state is cyclic only with a self edge */
            uint32_t s = mem[0];
            for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) cyclic |= d->br[j].to == s;
            for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++) cyclic |= d->re[j].to == s;
        }
        if (!cyclic) {
            uint32_t s = mem[0], id;
            x.cur = UINT32_MAX; /* every target is final already */
            if (signature(&x, s, d->final[s], &sig)) { rc = XG2_NOMEM(); goto out; }
            if ((rc = seq_intern(&global, sig.a, sig.n, &id))) goto out;
            if (id == next_block) next_block++;
            block[s] = id;
            continue;
        }
        /* Refinement inside the cycle; its classes are new global classes. */
        uint32_t count = 1;
        if (m == 1) { /* one state on a self edge (JSON's whitespace): its own class, as refine() finds */
            local[mem[0]] = 0;
        } else {
            if (!r.elems && (rc = refiner_init(&r, d, comp))) goto out;
            if ((rc = refine(&x, &r, local, mem, m, &count, &loc, &sig))) goto out;
        }
        /* Global ids: reserve fresh ones in the global table by a unique signature. */
        for (uint32_t i = 0; i < m; i++) {
            uint32_t s = mem[i];
            block[s] = next_block + local[s];
        }
        /* Keep the global table's ids in step, a record per class: its signature
         * over final ids, so that a state outside the cycle that behaves like
         * one of its classes (a character's last byte before a loop, the same
         * byte inside it) joins that class; a placeholder where the signature
         * is there already. */
        if (m > 1) {
            for (uint32_t k = 0; k < count; k++) rep[k] = UINT32_MAX;
            for (uint32_t i = 0; i < m; i++)
                if (rep[local[mem[i]]] == UINT32_MAX) rep[local[mem[i]]] = mem[i];
        }
        x.cur = UINT32_MAX;
        for (uint32_t k = 0; k < count; k++) {
            uint32_t id, h, s = m > 1 ? rep[k] : mem[0];
            if (signature(&x, s, d->final[s], &sig)) { rc = XG2_NOMEM(); goto out; }
            if (seq_find(&global, sig.a, sig.n, &h) != UINT32_MAX) {
                sig.n = 0;
                if (vec_push(&sig, 0xFFFFFFFEu) || vec_push(&sig, next_block + k)) { rc = XG2_NOMEM(); goto out; }
            }
            if ((rc = seq_intern(&global, sig.a, sig.n, &id))) goto out;
        }
        next_block += count;
    }
    *n_blocks = next_block;
out:
    xg2__free(comp);
    xg2__free(local);
    xg2__free(order);
    xg2__free(start);
    xg2__free(rep);
    vec_free(&sig);
    seq_free(&global);
    seq_free(&loc);
    refiner_free(&r);
    return rc;
}

/* Quotient by block, keep states that are reachable and can reach a final
 * state, number them breadth-first from the start. */
int xg2__rebuild(const xg2_dfa *d, const uint32_t *block, uint32_t nblk, xg2_dfa *out) {
    int rc = XG2_OK;
    uint32_t *rep = xg2__malloc(sizeof(uint32_t) * (nblk ? nblk : 1));
    uint8_t *live = xg2__calloc(nblk ? nblk : 1, 1);
    uint32_t *order = xg2__malloc(sizeof(uint32_t) * (nblk ? nblk : 1));
    uint32_t *newid = xg2__malloc(sizeof(uint32_t) * (nblk ? nblk : 1));
    xg2_u32vec boff = {0}, roff = {0}, tags = {0};
    brvec br = {0};
    revec re = {0};
    VEC(uint8_t) fin = {0};
    if (!rep || !live || !order || !newid) goto oom;
    /* (at most a state a block, at most the edges of d: room made at once) */
    uint64_t nb = d->n ? d->boff[d->n] : 0, nr = d->n ? d->roff[d->n] : 0;
    if (vec_reserve(&boff, nblk + 1ull) || vec_reserve(&roff, nblk + 1ull) || vec_reserve(&tags, nblk) ||
        vec_reserve(&fin, nblk) || vec_reserve(&br, nb) || vec_reserve(&re, nr))
        goto oom;
    for (uint32_t b = 0; b < nblk; b++) rep[b] = UINT32_MAX;
    for (uint32_t s = 0; s < d->n; s++)
        if (rep[block[s]] == UINT32_MAX) rep[block[s]] = s;
    /* Co-reachability: iterate to a fixpoint (DFAs here are small). */
    for (uint32_t b = 0; b < nblk; b++) live[b] = d->final[rep[b]];
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t b = 0; b < nblk; b++) {
            if (live[b]) continue;
            uint32_t s = rep[b];
            for (uint32_t j = d->boff[s]; j < d->boff[s + 1] && !live[b]; j++) live[b] = live[block[d->br[j].to]];
            for (uint32_t j = d->roff[s]; j < d->roff[s + 1] && !live[b]; j++) live[b] = live[block[d->re[j].to]];
            changed |= live[b];
        }
    }
    memset(out, 0, sizeof *out);
    if (!d->n || !live[block[0]]) goto out; /* matches nothing */
    for (uint32_t b = 0; b < nblk; b++) newid[b] = UINT32_MAX;
    uint32_t head = 0, tail = 0;
    order[tail++] = block[0];
    newid[block[0]] = 0;
    while (head < tail) {
        uint32_t b = order[head++];
        uint32_t s = rep[b];
        if (vec_push(&boff, br.n) || vec_push(&roff, re.n) || vec_push(&fin, d->final[s]) ||
            vec_push(&tags, d->tag ? d->tag[s] : 0))
            goto oom;
        for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) {
            uint32_t tb = block[d->br[j].to];
            if (!live[tb]) continue;
            if (newid[tb] == UINT32_MAX) { newid[tb] = tail; order[tail++] = tb; }
            xg2_brange r = {d->br[j].lo, d->br[j].hi, newid[tb]};
            if (br.n > boff.a[boff.n - 1] && br.a[br.n - 1].to == r.to && br.a[br.n - 1].hi + 1 == r.lo)
                br.a[br.n - 1].hi = r.hi;
            else if (vec_push(&br, r))
                goto oom;
        }
        for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++) {
            uint32_t tb = block[d->re[j].to];
            if (!live[tb]) continue;
            if (newid[tb] == UINT32_MAX) { newid[tb] = tail; order[tail++] = tb; }
            xg2_redge r = {d->re[j].rule, newid[tb]};
            if (vec_push(&re, r)) goto oom;
        }
    }
    if (vec_push(&boff, br.n) || vec_push(&roff, re.n)) goto oom;
    out->n = tail;
    out->boff = boff.a; boff.a = NULL;
    out->br = br.a; br.a = NULL;
    out->roff = roff.a; roff.a = NULL;
    out->re = re.a; re.a = NULL;
    out->final = fin.a; fin.a = NULL;
    out->tag = tags.a; tags.a = NULL;
    if (d->n_loops) {
        out->loops = xg2__malloc(sizeof(xg2_loop_info) * d->n_loops);
        if (!out->loops) goto oom;
        memcpy(out->loops, d->loops, sizeof(xg2_loop_info) * d->n_loops);
        out->n_loops = d->n_loops;
    }
    goto out;
oom:
    rc = XG2_NOMEM();
out:
    vec_free(&tags);
    xg2__free(rep);
    xg2__free(live);
    xg2__free(order);
    xg2__free(newid);
    vec_free(&boff);
    vec_free(&roff);
    vec_free(&br);
    vec_free(&re);
    vec_free(&fin);
    return rc;
}
