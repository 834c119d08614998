/*
 * earley.c -- scan, predict, complete over the linked DFAs.
 *
 * push(c):   scan      every item of the last set with a byte edge on c;
 *            closure   for each new item, in order:
 *                        rule edges   predict each referenced rule here;
 *                        counter      predict the child while below max;
 *                        final state  complete: advance the items of the
 *                                     origin set that wait on this rule.
 * Completions of a rule that began at this very position (empty matches) are
 * remembered in `nulls` and applied to items that start waiting on the rule
 * later in the same set; this replaces the Aycock-Horspool nullable trick and
 * stays exact with lookahead guards.  Empty iterations of a counted
 * repetition are ignored: they cannot change what the repetition matches.
 */
#include "earley.h"

#define GUARD_ERR 0xFFFFFFFEu
#define HASH_FROM 16 /* sets smaller than this are deduplicated by a linear scan */
#define WAIT_INDEX_FROM 16 /* longer wait lists are sorted by rule when their set is sealed */

/* ---- lookahead guards: interned sorted sets of lookahead-DFA states ---- */

static uint64_t hash_members(const uint32_t *m, uint32_t n) {
    uint64_t h = 0x51ED27u + n;
    for (uint32_t i = 0; i < n; i++) h = xg2__mix64(h, m[i]);
    return h;
}

static int guards_init(xg2_guards *G) {
    memset(G, 0, sizeof *G);
    return vec_push(&G->off, 0) || vec_push(&G->off, 0); /* guard 0 = no assertion */
}

static void guards_free(xg2_guards *G) {
    vec_free(&G->pool);
    vec_free(&G->off);
    xg2__free(G->tab);
    memset(G, 0, sizeof *G);
}

static uint32_t guard_intern(xg2_guards *G, const uint32_t *m, uint32_t n) {
    if (n == 0) return 0;
    uint32_t count = G->off.n - 1;
    if ((uint64_t)(count + 1) * 2 >= G->cap) {
        uint32_t ncap = G->cap ? G->cap * 2 : 64;
        uint32_t *t = xg2__calloc(ncap, sizeof(uint32_t));
        if (!t) { G->err = XG2_NOMEM(); return GUARD_ERR; }
        for (uint32_t id = 1; id < count; id++) {
            uint32_t h = (uint32_t)hash_members(G->pool.a + G->off.a[id], G->off.a[id + 1] - G->off.a[id]) & (ncap - 1);
            while (t[h]) h = (h + 1) & (ncap - 1);
            t[h] = id + 1;
        }
        xg2__free(G->tab);
        G->tab = t;
        G->cap = ncap;
    }
    uint32_t h = (uint32_t)hash_members(m, n) & (G->cap - 1);
    while (G->tab[h]) {
        uint32_t id = G->tab[h] - 1;
        uint32_t len = G->off.a[id + 1] - G->off.a[id];
        if (len == n && !memcmp(G->pool.a + G->off.a[id], m, sizeof(uint32_t) * n)) return id;
        h = (h + 1) & (G->cap - 1);
    }
    if (count >= XG2_MAX_GUARDS) {
        G->err = xg2__fail(XG2_ERR_LIMIT, "more than %d distinct pending lookahead assertions", XG2_MAX_GUARDS);
        return GUARD_ERR;
    }
    if (vec_reserve(&G->pool, (uint64_t)G->pool.n + n) || vec_reserve(&G->off, (uint64_t)G->off.n + 1)) {
        G->err = XG2_NOMEM();
        return GUARD_ERR;
    }
    memcpy(G->pool.a + G->pool.n, m, sizeof(uint32_t) * n);
    G->pool.n += n;
    G->off.a[G->off.n++] = G->pool.n;
    G->tab[h] = count + 1;
    return count;
}

static uint32_t sort_intern(xg2_parser *p) {
    xg2_u32vec *t = &p->tmp;
    xg2__sort_u32(t->a, t->n);
    uint32_t k = 0;
    for (uint32_t i = 0; i < t->n; i++)
        if (!k || t->a[k - 1] != t->a[i]) t->a[k++] = t->a[i];
    return guard_intern(&p->guards, t->a, k);
}

/* Advance every pending assertion of g over byte c; a satisfied one is dropped,
 * a failed one fails the guard. */
static uint32_t guard_step(xg2_parser *p, uint32_t g, uint8_t c) {
    if (g == 0) return 0;
    const xg2_grammar *gr = p->g;
    xg2_guards *G = &p->guards;
    p->tmp.n = 0;
    for (uint32_t k = G->off.a[g]; k < G->off.a[g + 1]; k++) {
        int32_t t = gr->la_trans[(size_t)G->pool.a[k] * 256 + c];
        if (t < 0) return XG2_GUARD_FAIL;
        if (gr->la_final[t]) continue;
        if (vec_push(&p->tmp, (uint32_t)t)) { G->err = XG2_NOMEM(); return GUARD_ERR; }
    }
    return sort_intern(p);
}

static uint32_t guard_union(xg2_parser *p, uint32_t a, uint32_t b) {
    if (a == 0 || a == b) return b;
    if (b == 0) return a;
    xg2_guards *G = &p->guards;
    p->tmp.n = 0;
    for (uint32_t k = G->off.a[a]; k < G->off.a[a + 1]; k++)
        if (vec_push(&p->tmp, G->pool.a[k])) { G->err = XG2_NOMEM(); return GUARD_ERR; }
    for (uint32_t k = G->off.a[b]; k < G->off.a[b + 1]; k++)
        if (vec_push(&p->tmp, G->pool.a[k])) { G->err = XG2_NOMEM(); return GUARD_ERR; }
    return sort_intern(p);
}

static uint32_t guard_with_state(xg2_parser *p, uint32_t g, uint32_t la_state) {
    uint32_t one = guard_intern(&p->guards, &la_state, 1);
    if (one == GUARD_ERR) return one;
    return guard_union(p, g, one);
}

/* ---- rule budgets (max_tokens / max_chars) ---- */

static inline int utf8_lead(uint8_t c) { return (c & 0xC0) != 0x80; }

/* May item `it` of set k take byte c within its rule's budget?  (Local
 * parsers -- origin XG2_LOCAL_ROOT -- have no history: the mask fill does not
 * use their answers where a budget is near, xg2__parser_budget_near.) */
static int budget_ok(const xg2_parser *p, const xg2_item *it, uint32_t k, uint8_t c) {
    const xg2_rule *rr = &p->g->rules[p->g->states[it->state].rule];
    uint32_t o = it->origin;
    if ((rr->max_tokens < 0 && rr->max_chars < 0) || o == XG2_LOCAL_ROOT) return 1;
    if (rr->max_tokens >= 0 && (uint64_t)p->cur_tok > (uint64_t)p->btok.a[o] + (uint32_t)rr->max_tokens) return 0;
    if (rr->max_chars >= 0 && (uint64_t)p->bchr.a[k] + utf8_lead(c) - p->bchr.a[o] > (uint32_t)rr->max_chars) return 0;
    return 1;
}

int xg2__parser_budget_near(const xg2_parser *p, uint32_t max_len) {
    const xg2_grammar *g = p->g;
    uint32_t k = p->ns - 1;
    if (!g->has_budgets) return 0;
    for (uint32_t i = p->set_start.a[k]; i < p->set_start.a[k + 1]; i++) {
        const xg2_item *it = &p->items.a[i];
        const xg2_rule *rr = &g->rules[g->states[it->state].rule];
        if (!(g->states[it->state].flags & SF_BYTES) || it->origin == XG2_LOCAL_ROOT) continue;
        if (rr->max_tokens >= 0 && (uint64_t)p->cur_tok > (uint64_t)p->btok.a[it->origin] + (uint32_t)rr->max_tokens)
            return 1;
        if (rr->max_chars >= 0 && (uint64_t)p->bchr.a[k] - p->bchr.a[it->origin] + max_len > (uint32_t)rr->max_chars)
            return 1;
    }
    return 0;
}

/* ---- sets ---- */

static inline uint32_t item_hash(const xg2_item *it) {
    uint64_t h = ((uint64_t)it->state << 32 | it->origin) * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)it->count << 32 | it->guard) * 0xC2B2AE3D27D4EB4Full;
    return (uint32_t)(h >> 29);
}

static inline int item_eq(const xg2_item *a, const xg2_item *b) {
    return a->state == b->state && a->origin == b->origin && a->count == b->count && a->guard == b->guard;
}

static int rehash(xg2_parser *p, uint32_t begin) {
    uint32_t n = p->items.n - begin;
    uint32_t cap = p->hcap ? p->hcap : 64;
    while (cap < 4 * n) cap *= 2;
    if (cap != p->hcap) {
        uint32_t *t = xg2__realloc(p->htab, sizeof(uint32_t) * cap);
        if (!t) return XG2_NOMEM();
        p->htab = t;
        p->hcap = cap;
    }
    memset(p->htab, 0, sizeof(uint32_t) * cap);
    for (uint32_t i = begin; i < p->items.n; i++) {
        uint32_t h = item_hash(&p->items.a[i]) & (cap - 1);
        while (p->htab[h]) h = (h + 1) & (cap - 1);
        p->htab[h] = i + 1;
    }
    p->hashed = 1;
    return XG2_OK;
}

/* Add an item to the set under construction (which starts at `begin`) unless
 * it is already there. */
int xg2__work_fail(void) { return xg2__fail(XG2_ERR_LIMIT, "step work limit exceeded"); }

static int add_item(xg2_parser *p, uint32_t begin, uint32_t state, uint32_t origin, uint32_t count,
                    uint32_t guard) {
    if (--p->work_left < 0) return xg2__work_fail();
    xg2_item it = {state, origin, count, guard};
    if (!p->hashed) {
        for (uint32_t i = begin; i < p->items.n; i++)
            if (item_eq(&p->items.a[i], &it)) return XG2_OK;
    } else {
        uint32_t h = item_hash(&it) & (p->hcap - 1);
        for (; p->htab[h]; h = (h + 1) & (p->hcap - 1))
            if (item_eq(&p->items.a[p->htab[h] - 1], &it)) return XG2_OK;
    }
    if (p->items.n - begin >= XG2_MAX_SET_ITEMS)
        return xg2__fail(XG2_ERR_LIMIT, "more than %d parser items at one input position (the grammar is too ambiguous)",
                         XG2_MAX_SET_ITEMS);
    if (vec_push(&p->items, it)) return XG2_NOMEM();
    if (p->hashed) {
        if (4 * (p->items.n - begin) > p->hcap) return rehash(p, begin);
        uint32_t h = item_hash(&it) & (p->hcap - 1);
        while (p->htab[h]) h = (h + 1) & (p->hcap - 1);
        p->htab[h] = p->items.n;
    } else if (p->items.n - begin >= HASH_FROM) {
        return rehash(p, begin);
    }
    return XG2_OK;
}

/* Guard of a parent that waited from its origin set `o` to `pos`. */
static uint32_t guard_over(xg2_parser *p, uint32_t g, uint32_t o, uint32_t pos) {
    for (uint32_t i = o; i < pos && g != 0 && g < GUARD_ERR - 1; i++) g = guard_step(p, g, p->input.a[i]);
    return g;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* First wait index in [lo, hi) (sorted by rule) whose rule is >= rule. */
static uint32_t wait_lower_bound(const xg2_parser *p, uint32_t lo, uint32_t hi, uint32_t rule) {
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->wait_rule.a[mid] < rule) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* `it` (a final item at position pos) completes its rule. */
static int complete(xg2_parser *p, uint32_t begin, xg2_item it, uint32_t pos) {
    const xg2_grammar *g = p->g;
    uint32_t rule = g->states[it.state].rule;
    uint32_t o = it.origin;
    uint32_t g0 = it.guard;
    int rc;
    if (g->rules[rule].lookahead >= 0) {
        g0 = guard_with_state(p, g0, g->la_start[g->rules[rule].lookahead]);
        if (g0 == GUARD_ERR) return p->guards.err;
    }
    if (o == XG2_LOCAL_ROOT) {
        p->root_done = 1;
        return XG2_OK;
    }
    uint32_t wbeg = p->wait_start.a[o], wend, multi = 0;
    if (o == pos) {
        for (uint32_t i = 0; i < p->nulls.n; i++)
            if (p->nulls.a[i].rule == rule && p->nulls.a[i].guard == g0) goto known;
        xg2_null_done nd = {rule, g0};
        if (vec_push(&p->nulls, nd)) return XG2_NOMEM();
    known:
        wend = p->wait.n;
    } else {
        wend = p->wait_start.a[o + 1];
        if (wend - wbeg > WAIT_INDEX_FROM) { /* sealed and sorted by rule (seal) */
            multi = wait_lower_bound(p, wbeg, wend, UINT32_MAX);
            wbeg = wait_lower_bound(p, wbeg, multi, rule);
        }
    }
    for (uint32_t w = wbeg; w < wend; w++) {
        if (w < multi && p->wait_rule.a[w] != rule) { /* past this rule's run: on to the multi-rule waits */
            w = multi - 1;
            continue;
        }
        /* (most waiting items wait on one rule: skip the others unread) */
        uint32_t wr = p->wait_rule.a[w];
        if (wr != rule && wr != UINT32_MAX) continue;
        xg2_item par = p->items.a[p->wait.a[w]];
        const xg2_state *ps = &g->states[par.state];
        uint32_t t, cnt = par.count;
        if (ps->flags & SF_REPEAT) {
            const xg2_rule *rr = &g->rules[ps->rule];
            if (rr->child != rule || o == pos) continue; /* not ours, or an empty iteration */
            cnt++;
            if (rr->max < 0 && cnt > (uint32_t)rr->min) cnt = (uint32_t)rr->min;
            if (rr->max >= 0 && cnt > (uint32_t)rr->max) continue;
            t = par.state;
        } else {
            t = xg2__step_rule(g, par.state, rule);
            if (t == XG2_NONE) continue;
        }
        uint32_t gg = g0;
        if (par.guard) {
            uint32_t ga = guard_over(p, par.guard, o, pos);
            if (ga == XG2_GUARD_FAIL) continue;
            if (ga == GUARD_ERR) return p->guards.err;
            gg = guard_union(p, g0, ga);
            if (gg == GUARD_ERR) return p->guards.err;
        }
        if ((rc = add_item(p, begin, t, par.origin, cnt, gg))) return rc;
    }
    return XG2_OK;
}

/* Close the set under construction at position pos (items from `begin`). */
static int closure(xg2_parser *p, uint32_t begin, uint32_t pos) {
    const xg2_grammar *g = p->g;
    int rc;
    for (uint32_t j = begin; j < p->items.n; j++) {
        xg2_item it = p->items.a[j];
        const xg2_state *st = &g->states[it.state];
        if (st->flags & SF_REPEAT) {
            const xg2_rule *rr = &g->rules[st->rule];
            if (vec_push(&p->wait, j) || vec_push(&p->wait_rule, rr->child)) return XG2_NOMEM();
            if (rr->max < 0 || it.count < (uint32_t)rr->max)
                if ((rc = add_item(p, begin, g->rules[rr->child].start, pos, 0, it.guard))) return rc;
            if (it.count >= (uint32_t)rr->min && (rc = complete(p, begin, it, pos))) return rc;
            continue;
        }
        if (st->flags & SF_REFS) {
            const xg2_ref *e = g->refs_tab + st->ref_off;
            if (vec_push(&p->wait, j) || vec_push(&p->wait_rule, st->ref_n == 1 ? e[0].rule : UINT32_MAX))
                return XG2_NOMEM();
            for (uint32_t k = 0; k < st->ref_n; k++)
                if ((rc = add_item(p, begin, g->rules[e[k].rule].start, pos, 0, it.guard))) return rc;
            for (uint32_t k = 0; k < p->nulls.n; k++) {
                uint32_t t = xg2__step_rule(g, it.state, p->nulls.a[k].rule);
                if (t == XG2_NONE) continue;
                uint32_t gg = guard_union(p, p->nulls.a[k].guard, it.guard);
                if (gg == GUARD_ERR) return p->guards.err;
                if ((rc = add_item(p, begin, t, it.origin, it.count, gg))) return rc;
            }
        }
        if ((st->flags & SF_FINAL) && xg2__loop_may_end(g, it.state, it.count) && (rc = complete(p, begin, it, pos)))
            return rc;
    }
    return XG2_OK;
}

/* Finish the set under construction: record its bounds.  A long wait list is
 * sorted by the rule waited on (several rules: last), so a later completion
 * finds its parents by binary search instead of scanning every waiting item:
 * a set of n items waiting on n rules (a cycle of left-recursive rules) would
 * otherwise cost n^2 per byte. */
static int seal(xg2_parser *p) {
    uint32_t w0 = p->wait_start.a[p->wait_start.n - 1], nw = p->wait.n - w0;
    if (nw > WAIT_INDEX_FROM) {
        uint64_t *keys = xg2__malloc(sizeof(uint64_t) * nw);
        if (!keys) return XG2_NOMEM();
        for (uint32_t i = 0; i < nw; i++) keys[i] = (uint64_t)p->wait_rule.a[w0 + i] << 32 | p->wait.a[w0 + i];
        qsort(keys, nw, sizeof(uint64_t), cmp_u64);
        for (uint32_t i = 0; i < nw; i++) {
            p->wait_rule.a[w0 + i] = (uint32_t)(keys[i] >> 32);
            p->wait.a[w0 + i] = (uint32_t)keys[i];
        }
        xg2__free(keys);
    }
    if (p->g->has_budgets) { /* (before the set is counted: a failure leaves btok/bchr one past, which pop trims) */
        uint32_t chars = p->ns ? p->bchr.a[p->ns - 1] + utf8_lead(p->input.a[p->ns - 1]) : 0;
        if (vec_push(&p->btok, p->ns ? p->cur_tok : 0) || vec_push(&p->bchr, chars)) return XG2_NOMEM();
    }
    if (vec_push(&p->set_start, p->items.n) || vec_push(&p->wait_start, p->wait.n)) return XG2_NOMEM();
    p->ns++;
    return XG2_OK;
}

/* ---- public (internal) API ---- */

static int init_with(xg2_parser *p, const xg2_grammar *g, uint32_t state, uint32_t origin, uint32_t count) {
    memset(p, 0, sizeof *p);
    p->g = g;
    p->work_left = INT64_MAX;
    if (guards_init(&p->guards) || vec_push(&p->set_start, 0) || vec_push(&p->wait_start, 0)) {
        xg2__parser_free(p);
        return XG2_NOMEM();
    }
    int rc = add_item(p, 0, state, origin, count, 0);
    if (!rc) rc = closure(p, 0, 0);
    if (!rc) rc = seal(p);
    if (rc) xg2__parser_free(p);
    return rc;
}

int xg2__parser_init(xg2_parser *p, const xg2_grammar *g) {
    return init_with(p, g, g->rules[g->root].start, 0, 0);
}

int xg2__parser_init_local(xg2_parser *p, const xg2_grammar *g, uint32_t state, uint32_t count) {
    return init_with(p, g, state, XG2_LOCAL_ROOT, count);
}

/* Restart a local parser on another item, keeping its buffers. */
XG2_HIDDEN int xg2__parser_reinit_local(xg2_parser *p, uint32_t state, uint32_t count) {
    if (p->guards.off.n != 2) { /* guards are per grammar: start afresh (also after a failure) */
        guards_free(&p->guards);
        if (guards_init(&p->guards)) return XG2_NOMEM();
    }
    p->items.n = p->wait.n = p->wait_rule.n = p->input.n = p->btok.n = p->bchr.n = 0;
    p->set_start.n = p->wait_start.n = 1;
    p->ns = 0;
    p->hashed = 0;
    p->nulls.n = 0;
    p->root_done = 0;
    int rc = add_item(p, 0, state, XG2_LOCAL_ROOT, count, 0);
    if (!rc) rc = closure(p, 0, 0);
    if (!rc) rc = seal(p);
    return rc;
}

void xg2__parser_free(xg2_parser *p) {
    vec_free(&p->items);
    vec_free(&p->set_start);
    vec_free(&p->wait);
    vec_free(&p->wait_rule);
    vec_free(&p->wait_start);
    vec_free(&p->input);
    vec_free(&p->nulls);
    vec_free(&p->tmp);
    vec_free(&p->btok);
    vec_free(&p->bchr);
    xg2__free(p->htab);
    guards_free(&p->guards);
    memset(p, 0, sizeof *p);
}

#define COPY_VEC(dst, src)                                                                   \
    do {                                                                                     \
        if ((src)->n) {                                                                      \
            if (vec_reserve((dst), (src)->n)) goto oom;                                      \
            memcpy((dst)->a, (src)->a, sizeof(*(src)->a) * (src)->n);                        \
        }                                                                                    \
        (dst)->n = (src)->n;                                                                 \
    } while (0)

int xg2__parser_copy(xg2_parser *d, const xg2_parser *s) {
    memset(d, 0, sizeof *d);
    d->g = s->g;
    d->ns = s->ns;
    d->work_left = INT64_MAX;
    COPY_VEC(&d->items, &s->items);
    COPY_VEC(&d->set_start, &s->set_start);
    COPY_VEC(&d->wait, &s->wait);
    COPY_VEC(&d->wait_rule, &s->wait_rule);
    COPY_VEC(&d->wait_start, &s->wait_start);
    COPY_VEC(&d->input, &s->input);
    COPY_VEC(&d->btok, &s->btok);
    COPY_VEC(&d->bchr, &s->bchr);
    d->cur_tok = s->cur_tok;
    COPY_VEC(&d->guards.pool, &s->guards.pool);
    COPY_VEC(&d->guards.off, &s->guards.off);
    if (s->guards.cap) {
        d->guards.tab = xg2__malloc(sizeof(uint32_t) * s->guards.cap);
        if (!d->guards.tab) goto oom;
        memcpy(d->guards.tab, s->guards.tab, sizeof(uint32_t) * s->guards.cap);
        d->guards.cap = s->guards.cap;
    }
    return XG2_OK;
oom:
    xg2__parser_free(d);
    return XG2_NOMEM();
}

void xg2__parser_pop(xg2_parser *p, uint32_t n) {
    XG2_DASSERT(n < p->ns);
    p->ns -= n;
    p->items.n = p->set_start.a[p->ns];
    p->wait.n = p->wait_rule.n = p->wait_start.a[p->ns];
    p->set_start.n = p->ns + 1;
    p->wait_start.n = p->ns + 1;
    p->input.n = p->ns - 1;
    if (p->btok.n > p->ns) p->btok.n = p->bchr.n = p->ns;
}

void xg2__parser_reset(xg2_parser *p) { xg2__parser_pop(p, p->ns - 1); }

/* Scan byte c: the items of set k (up to end) with a byte edge on it, into
 * the set under construction from `begin`. */
static inline int scan(xg2_parser *p, uint32_t k, uint32_t begin, uint32_t end, uint8_t c) {
    const xg2_grammar *g = p->g;
    int rc;
    for (uint32_t i = p->set_start.a[k]; i < end; i++) {
        xg2_item it = p->items.a[i];
        if (!(g->states[it.state].flags & SF_BYTES)) continue;
        uint32_t t = xg2__step(g, it.state, c);
        if (t == XG2_NONE) continue;
        if (g->has_budgets && !budget_ok(p, &it, k, c)) continue;
        uint32_t cnt = it.count;
        if (g->n_loops && (cnt = xg2__loop_step(g, it.state, t, c, it.count)) == UINT32_MAX) continue;
        uint32_t gg = it.guard;
        if (gg) {
            gg = guard_step(p, gg, c);
            if (gg == XG2_GUARD_FAIL) continue;
            if (gg == GUARD_ERR) return p->guards.err;
        }
        if ((rc = add_item(p, begin, t, it.origin, cnt, gg))) return rc;
    }
    return XG2_OK;
}

int xg2__parser_push(xg2_parser *p, uint8_t c) {
    uint32_t k = p->ns - 1;
    uint32_t begin = p->items.n, end = p->set_start.a[k + 1];
    int rc = XG2_OK;
    p->hashed = 0;
    p->nulls.n = 0;
    p->root_done = 0;
    if (--p->work_left < 0) return -xg2__work_fail();
    if (vec_push(&p->input, c)) return -XG2_NOMEM();
    if ((rc = scan(p, k, begin, end, c))) goto fail;
    if (p->items.n == begin) {
        p->input.n--;
        return 0;
    }
    p->scanned = p->items.n - begin;
    if ((rc = closure(p, begin, k + 1)) || (rc = seal(p))) goto fail;
    return 1;
fail:
    p->items.n = begin;
    p->wait.n = p->wait_rule.n = p->wait_start.a[k + 1];
    p->input.n = k;
    if (p->btok.n > p->ns) p->btok.n = p->bchr.n = p->ns;
    return -rc;
}

/* A whole token over token edges (token_edges.c), and over bytes too when it
 * is text: the token takes len positions (one if it has no text), the
 * intermediate sets hold what its bytes alone reach (they may be empty), and
 * the last set adds, for each item of the current set listed in `edge`, the
 * move to its token rule's final state -- so the rule spans the token's
 * positions, and lookahead guards step over its bytes.  Returns 1, 0 (nothing
 * survives: the parser is unchanged) or -status. */
int xg2__parser_push_token(xg2_parser *p, const uint8_t *b, uint32_t len, int text, const uint32_t *edge,
                           uint32_t n_edge) {
    uint32_t k0 = p->ns - 1, L = text && len ? len : 1, i;
    int rc = XG2_OK;
    for (i = 0; i < L; i++) {
        uint32_t k = p->ns - 1;
        uint32_t begin = p->items.n, end = p->set_start.a[k + 1];
        uint8_t c = text && len ? b[i] : 0xFF; /* (no text: a byte no guard reads as text) */
        p->hashed = 0;
        p->nulls.n = 0;
        p->root_done = 0;
        if (--p->work_left < 0) { rc = xg2__work_fail(); goto fail; }
        if (vec_push(&p->input, c)) { rc = XG2_NOMEM(); goto fail; }
        if (text && (rc = scan(p, k, begin, end, c))) goto fail;
        for (uint32_t e = 0; i + 1 == L && e < n_edge; e++) {
            xg2_item it = p->items.a[edge[e]];
            XG2_DASSERT(edge[e] >= p->set_start.a[k0] && edge[e] < p->set_start.a[k0 + 1]);
            uint32_t gg = it.guard ? guard_over(p, it.guard, k0, k0 + L) : 0;
            if (gg == XG2_GUARD_FAIL) continue;
            if (gg == GUARD_ERR) { rc = p->guards.err; goto fail; }
            if ((rc = add_item(p, begin, it.state + 1, it.origin, 0, gg))) goto fail;
        }
        p->scanned = p->items.n - begin;
        if ((rc = closure(p, begin, k + 1)) || (rc = seal(p))) goto fail;
    }
    if (p->set_start.a[p->ns] == p->set_start.a[p->ns - 1]) { /* the last set is empty */
        xg2__parser_pop(p, L);
        return 0;
    }
    return 1;
fail: {
    uint32_t k = p->ns - 1; /* the set under construction was never sealed */
    p->items.n = p->set_start.a[k + 1];
    p->wait.n = p->wait_rule.n = p->wait_start.a[k + 1];
    p->input.n = k;
    if (p->btok.n > p->ns) p->btok.n = p->bchr.n = p->ns;
    xg2__parser_pop(p, i);
    return -rc;
}
}

int xg2__parser_can_end(const xg2_parser *p) {
    const xg2_grammar *g = p->g;
    uint32_t k = p->ns - 1;
    for (uint32_t i = p->set_start.a[k]; i < p->set_start.a[k + 1]; i++) {
        const xg2_item *it = &p->items.a[i];
        const xg2_state *st = &g->states[it->state];
        if (it->origin == 0 && it->guard == 0 && (st->flags & SF_FINAL) && st->rule == g->root &&
            xg2__loop_may_end(g, it->state, it->count))
            return 1;
    }
    return 0;
}

int xg2__parser_lone_scanner(const xg2_parser *p, xg2_item *out) {
    const xg2_grammar *g = p->g;
    uint32_t k = p->ns - 1, n = 0;
    for (uint32_t i = p->set_start.a[k]; i < p->set_start.a[k + 1]; i++) {
        uint8_t f = g->states[p->items.a[i].state].flags;
        if (f & SF_TOKEN) return 0;
        if (!(f & SF_BYTES)) continue;
        if (n++) return 0;
        *out = p->items.a[i];
    }
    return n == 1;
}

void xg2__parser_next_bytes(const xg2_parser *p, xg2_byteset *out) {
    const xg2_grammar *g = p->g;
    memset(out, 0, sizeof *out);
    uint32_t k = p->ns - 1;
    for (uint32_t i = p->set_start.a[k]; i < p->set_start.a[k + 1]; i++) {
        uint32_t s = p->items.a[i].state, count = p->items.a[i].count;
        if (!(g->states[s].flags & SF_BYTES)) continue;
        for (int c = 0; c < 256; c++) {
            uint32_t t = xg2__step(g, s, (uint8_t)c);
            if (t == XG2_NONE) continue;
            if (g->n_loops && xg2__loop_step(g, s, t, (uint8_t)c, count) == UINT32_MAX) continue;
            byteset_add(out, (unsigned)c);
        }
    }
}
