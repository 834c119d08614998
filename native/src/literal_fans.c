/*
 * literal_fans.c -- fan states and their literals' mask entries (literal_fans.h).
 */
#include "literal_fans.h"

#include "earley.h"

/* A state a literal runs through: byte edges only, each a single byte, no rule
 * end, no counted loop (its own rule's states, local numbering). */
static int interior(const xg2_grammar *g, const xg2_rule *rt, const xg2_dfa *d, uint32_t v) {
    const xg2_state *st = &g->states[rt->start + v];
    if (st->flags != SF_BYTES || st->loop) return 0;
    for (uint32_t j = d->boff[v]; j < d->boff[v + 1]; j++)
        if (d->br[j].lo != d->br[j].hi) return 0;
    return 1;
}

typedef struct {
    uint32_t v, j;   /* state, next edge */
    uint32_t first;  /* v's first visit: its literals begin at lits[lo[v]] */
} frame;

typedef struct {
    uint8_t *in;       /* interior */
    uint8_t *color;    /* 0 new, 1 on the stack (first visit), 2 done */
    uint32_t *lo;      /* literals below an interior state: lits[lo .. lo + paths) */
    uint32_t *paths;
    uint32_t *depth;   /* bytes from the run's root at its first visit */
    uint32_t *longest; /* bytes of its longest literal */
    uint32_t *branch;  /* bytes to the first state below with two ways on (0: here; capped) */
    uint32_t *chain;   /* one way on: the bytes of the single path to the next branch or leaf */
    VEC(uint32_t) done; /* states in the order their first visits ended */
    frame *stack;
} rule_work;

typedef struct {
    VEC(xg2_fan) fans;
    VEC(xg2_fan_lit) lits;
    VEC(uint8_t) text;
} fan_tables;

/* A fan: interior, enough literals below, and a branch here or a few bytes on.
 * A state further up a single path walks it cheaply (the trie and the
 * automaton agree on one path, few tokens reach the branch), where its literals
 * would cost a lookup each; near a branch the walk meets every token that
 * crosses it ("calculate" + "_m", "_b", ...). */
static int is_fan(const rule_work *w, uint32_t v) {
    return w->branch[v] < XG2_FAN_BRANCH_NEAR && w->paths[v] >= XG2_FAN_MIN_LITERALS &&
           w->paths[v] <= XG2_FAN_MAX_LITERALS && w->longest[v] <= XG2_FAN_MAX_BYTES;
}

/* A chain: further up a single path that two literals or more share (a prefix
 * every tool call of the request begins with: Harmony's `commentary
 * to=functions.`).  Its key would be the request's own (what follows holds
 * every name), so its mask a fresh walk each request; as one literal, the path
 * to the branch, its entry is shared by every request.  (A path only one
 * literal takes, a name's own last bytes, is keyed by its residual already.) */
static int is_chain(const rule_work *w, uint32_t v) {
    /* (a single path this long has no branch near: never a fan as well) */
    return w->chain[v] >= XG2_FAN_BRANCH_NEAR && w->paths[v] >= 2 && w->paths[v] <= XG2_FAN_MAX_LITERALS &&
           w->longest[v] <= XG2_FAN_MAX_BYTES;
}

/* A state's first visit ends: its counts from its literals and children's. */
static int close_state(const xg2_dfa *d, rule_work *w, uint32_t v, uint32_t n_lits) {
    uint32_t ways = d->boff[v + 1] - d->boff[v], longest = 0;
    for (uint32_t j = d->boff[v]; j < d->boff[v + 1]; j++) {
        uint32_t u = d->br[j].to, len = 1 + (w->in[u] ? w->longest[u] : 0);
        if (len > longest) longest = len;
    }
    uint32_t one = ways ? d->br[d->boff[v]].to : 0;
    w->paths[v] = n_lits - w->lo[v];
    w->longest[v] = longest;
    w->branch[v] = ways >= 2 ? 0
                   : ways && w->in[one] && w->branch[one] < XG2_FAN_BRANCH_NEAR ? w->branch[one] + 1
                                                                                : XG2_FAN_BRANCH_NEAR;
    w->chain[v] = ways != 1 ? 0 : w->in[one] && w->chain[one] ? w->chain[one] + 1 : 1;
    w->color[v] = 2;
    return vec_push(&w->done, v) ? XG2_NOMEM() : XG2_OK;
}

/* One depth-first run over the interior states from `root`: every path is a
 * literal (recorded, bytes from the root), each state counted at its first
 * visit.  1 if the run meets a cycle or outgrows the limits (nothing of it is
 * kept), else XG2_OK or an error. */
static int run_literals(const xg2_dfa *d, rule_work *w, uint32_t root, fan_tables *t) {
    uint8_t buf[XG2_FAN_MAX_BYTES];
    uint32_t sp = 0;
    w->color[root] = 1, w->lo[root] = t->lits.n, w->depth[root] = 0;
    w->stack[sp++] = (frame){root, d->boff[root], 1};
    while (sp) {
        frame *f = &w->stack[sp - 1];
        if (f->j == d->boff[f->v + 1]) {
            int rc = f->first ? close_state(d, w, f->v, t->lits.n) : XG2_OK;
            if (rc) return rc;
            sp--;
            continue;
        }
        const xg2_brange *e = &d->br[f->j++];
        uint32_t u = e->to;
        buf[sp - 1] = (uint8_t)e->lo;
        if (w->in[u]) {
            if (w->color[u] == 1 || sp == XG2_FAN_MAX_BYTES) return 1; /* (a cycle, or too long) */
            int first = !w->color[u];
            if (first) w->color[u] = 1, w->lo[u] = t->lits.n, w->depth[u] = sp;
            w->stack[sp++] = (frame){u, d->boff[u], (uint32_t)first};
            continue;
        }
        if ((uint64_t)t->text.n + sp > XG2_FAN_MAX_TEXT) return 1;
        if (vec_reserve(&t->text, (uint64_t)t->text.n + sp) || vec_push(&t->lits, ((xg2_fan_lit){t->text.n, sp})))
            return XG2_NOMEM();
        memcpy(t->text.a + t->text.n, buf, sp);
        t->text.n += sp;
    }
    return XG2_OK;
}

/* Rule rt's fans: a run from each interior state no earlier run reached (local
 * states are numbered breadth-first, so a run's root mostly has no interior
 * predecessor); a run that opens no fan gives its literals back. */
static int rule_fans(const xg2_grammar *g, const xg2_rule *rt, const xg2_dfa *d, rule_work *w, fan_tables *t) {
    uint32_t n = rt->n_states;
    for (uint32_t v = 0; v < n; v++) w->in[v] = (uint8_t)interior(g, rt, d, v), w->color[v] = 0;
    for (uint32_t root = 0; root < n; root++) {
        if (!w->in[root] || w->color[root]) continue;
        uint32_t lits0 = t->lits.n, text0 = t->text.n, fans0 = t->fans.n;
        w->done.n = 0;
        int rc = run_literals(d, w, root, t);
        if (rc == 1) { /* (no more fans in this rule) */
            t->lits.n = lits0, t->text.n = text0;
            return XG2_OK;
        }
        if (rc) return rc;
        for (uint32_t k = 0; k < w->done.n; k++) {
            uint32_t v = w->done.a[k];
            if (is_fan(w, v) && vec_push(&t->fans, ((xg2_fan){rt->start + v, w->lo[v], w->lo[v] + w->paths[v],
                                                                w->depth[v], 0})))
                return XG2_NOMEM();
            if (is_chain(w, v) &&
                vec_push(&t->fans, ((xg2_fan){rt->start + v, w->lo[v], w->lo[v] + 1, w->depth[v], w->chain[v]})))
                return XG2_NOMEM();
        }
        if (t->fans.n == fans0) t->lits.n = lits0, t->text.n = text0;
    }
    return XG2_OK;
}

static int cmp_fan(const void *x, const void *y) {
    uint32_t a = ((const xg2_fan *)x)->state, b = ((const xg2_fan *)y)->state;
    return (a > b) - (a < b);
}

int xg2__fans_build(xg2_grammar *g, const xg2_dfa *dfa, const uint8_t *tag_rule) {
    uint32_t most = 0;
    for (uint32_t r = 0; r < g->n_rules; r++)
        if (tag_rule[r] && g->rules[r].start != XG2_NONE && g->rules[r].n_states > most) most = g->rules[r].n_states;
    if (!most) return XG2_OK;
    rule_work w = {0};
    fan_tables t = {0};
    w.in = xg2__malloc(most);
    w.color = xg2__malloc(most);
    w.lo = xg2__malloc(sizeof(uint32_t) * most);
    w.paths = xg2__malloc(sizeof(uint32_t) * most);
    w.depth = xg2__malloc(sizeof(uint32_t) * most);
    w.longest = xg2__malloc(sizeof(uint32_t) * most);
    w.branch = xg2__malloc(sizeof(uint32_t) * most);
    w.chain = xg2__malloc(sizeof(uint32_t) * most);
    w.stack = xg2__malloc(sizeof(frame) * (XG2_FAN_MAX_BYTES + 1));
    int rc = XG2_OK;
    if (!w.in || !w.color || !w.lo || !w.paths || !w.depth || !w.longest || !w.branch || !w.chain || !w.stack) {
        rc = XG2_NOMEM();
        goto out;
    }
    for (uint32_t r = 0; r < g->n_rules && !rc; r++) {
        const xg2_rule *rt = &g->rules[r];
        if (tag_rule[r] && rt->start != XG2_NONE && rt->kind != RK_REPEAT && !rt->dispatch)
            rc = rule_fans(g, rt, &dfa[r], &w, &t);
    }
    if (!rc && t.fans.n) {
        qsort(t.fans.a, t.fans.n, sizeof *t.fans.a, cmp_fan);
        for (uint32_t k = 0; k < t.fans.n; k++) g->states[t.fans.a[k].state].flags |= SF_FAN;
        g->fans = t.fans.a, g->fan_lits = t.lits.a, g->fan_text = t.text.a;
        g->n_fan = t.fans.n, g->n_fan_lits = t.lits.n, g->n_fan_text = t.text.n;
        memset(&t, 0, sizeof t);
    }
out:
    vec_free(&t.fans);
    vec_free(&t.lits);
    vec_free(&t.text);
    vec_free(&w.done);
    xg2__free(w.in);
    xg2__free(w.color);
    xg2__free(w.lo);
    xg2__free(w.paths);
    xg2__free(w.depth);
    xg2__free(w.longest);
    xg2__free(w.branch);
    xg2__free(w.chain);
    xg2__free(w.stack);
    return rc;
}

/* The key of a literal's entry: its bytes, tagged apart from state keys. */
static void literal_key(const uint8_t *b, uint32_t n, uint64_t *k1, uint64_t *k2) {
    uint64_t h1 = 0x6c69746572616c31ull ^ n, h2 = 0x6c69746572616c32ull ^ ((uint64_t)n << 1);
    for (uint32_t i = 0; i < n; i += 8) {
        uint64_t x = 0;
        for (uint32_t k = 0; k < 8 && i + k < n; k++) x |= (uint64_t)b[i + k] << (8 * k);
        h1 = xg2__mix64(h1, x);
        h2 = xg2__mix64(h2, x ^ 0xa0761d6478bd642full);
    }
    *k1 = h1;
    *k2 = h2;
}

/* The child of trie node p on byte c, or 0 (the root is no node's child). */
static uint32_t trie_child(const xg2_trie *t, uint32_t p, uint8_t c) {
    if (p == 0) {
        uint32_t k = t->root_next[c];
        return k < t->n_nodes && t->nodes[k].byte == c ? k : 0;
    }
    if (t->kid_at && t->kid_at[p] != UINT32_MAX) { /* byte-ordered table: binary search */
        const uint32_t *node = t->kid_node + t->kid_at[p];
        const uint8_t *byte = t->kid_byte + t->kid_at[p];
        uint32_t lo = 1, hi = node[0] + 1;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (byte[mid] < c) lo = mid + 1;
            else hi = mid;
        }
        return lo <= node[0] && byte[lo] == c ? node[lo] : 0;
    }
    for (uint32_t k = p + 1, end = p + t->nodes[p].subtree; k < end; k += t->nodes[k].subtree) {
        if (t->nodes[k].byte == c) return k;
        if (t->nodes[k].byte > c) break;
    }
    return 0;
}

/* Accepted: the tokens whose bytes are a prefix of the literal (each ends at a
 * node on its path); uncertain: those that run past its end (its last node's
 * subtree below it), already in byte order. */
static int literal_entry(const xg2_vocab *v, const uint8_t *b, uint32_t len, int64_t *work, xg2_mask_entry **out) {
    const xg2_trie *t = &v->trie;
    if (work && (*work -= len) < 0) return xg2__work_fail();
    VEC(int32_t) acc = {0};
    uint32_t p = 0, i = 0;
    for (; i < len; i++) {
        uint32_t c = trie_child(t, p, b[i]);
        if (!c) break;
        p = c;
        const xg2_trie_node *nd = &t->nodes[c];
        if (vec_reserve(&acc, (uint64_t)acc.n + nd->tok_count)) { vec_free(&acc); return XG2_NOMEM(); }
        memcpy(acc.a + acc.n, t->ids + nd->tok_begin, sizeof(int32_t) * nd->tok_count);
        acc.n += nd->tok_count;
    }
    uint32_t from = 0, n_unc = 0;
    if (i == len && len) {
        from = t->nodes[p].tok_begin + t->nodes[p].tok_count;
        n_unc = t->nodes[p].tok_end - from;
        if (work && (*work -= n_unc) < 0) { vec_free(&acc); return xg2__work_fail(); }
    }
    *out = xg2__mask_entry_new(acc.a, acc.n, t->ids + from, n_unc, v->bytes, v->off);
    vec_free(&acc);
    return *out ? XG2_OK : XG2_NOMEM();
}

/* Literal i of fan f: its bytes below the fan (a chain's: its path), *len of them. */
static const uint8_t *fan_literal(const xg2_grammar *g, const xg2_fan *f, uint32_t i, uint32_t *len) {
    const xg2_fan_lit *lit = &g->fan_lits[f->lo + i];
    *len = f->cut ? f->cut : lit->len - f->skip;
    return g->fan_text + lit->text + f->skip;
}

int xg2__fan_entries(const xg2_grammar *g, const xg2_vocab *v, uint32_t k, int64_t *work, xg2_mask_entry **out) {
    const xg2_fan *f = &g->fans[k];
    uint32_t n = f->hi - f->lo;
    uint64_t small[2 * 64] = {0}, *keys = n <= 64 ? small : xg2__malloc(sizeof(uint64_t) * 2 * (size_t)n);
    if (!keys) {
        for (uint32_t i = 0; i < n; i++) out[i] = NULL;
        return XG2_NOMEM();
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        const uint8_t *b = fan_literal(g, f, i, &len);
        literal_key(b, len, &keys[2 * i], &keys[2 * i + 1]);
    }
    xg2_pool *pool = (xg2_pool *)&v->pool; /* the pool locks itself */
    xg2__pool_find_many(pool, keys, n, out);
    int rc = XG2_OK;
    for (uint32_t i = 0; i < n && !rc; i++) { /* (the names met for the first time) */
        if (out[i]) continue;
        uint32_t len;
        const uint8_t *b = fan_literal(g, f, i, &len);
        xg2_mask_entry *e = NULL;
        if ((rc = literal_entry(v, b, len, work, &e))) break;
        e->k1 = keys[2 * i];
        e->k2 = keys[2 * i + 1];
        if (!(out[i] = xg2__pool_insert(pool, e))) rc = XG2_NOMEM();
    }
    if (rc) {
        for (uint32_t i = 0; i < n; i++) {
            xg2__pool_release(out[i]);
            out[i] = NULL;
        }
    }
    if (keys != small) xg2__free(keys);
    return rc;
}

void xg2__fan_union_insert(const xg2_vocab *v, uint64_t k1, uint64_t k2, const int32_t *acc, uint32_t n_acc,
                           const int32_t *unc, uint32_t n_unc) {
    xg2_mask_entry *e = xg2__mask_entry_new(acc, n_acc, unc, n_unc, v->bytes, v->off);
    if (!e) return;
    e->k1 = k1;
    e->k2 = k2;
    xg2__pool_release(xg2__pool_insert((xg2_pool *)&v->pool, e)); /* (the pool keeps its own reference) */
}
