/*
 * trie_dfa.c -- the automaton of a choice of literal paths, built straight as a trie.
 *
 * A structural tag's trigger starts a choice among the request's tools:
 *
 *     group ::= ("get_weather>" P1 | "get_time>" P2 | ...) "</function>"
 *
 * (each alternative a sequence of literal bytes and rule references -- the tool's
 * name, a special token's rule, its arguments' piece -- then a common tail).  The
 * choice is new in every request's grammar, so the generic route (an NFA, its
 * subset construction, minimisation, a DFA-cache entry no other grammar will use)
 * ran on every compile.  Read as a trie of the alternatives' items, whose leaves
 * all go on to the tail, it is already deterministic: built here in one pass, its
 * states numbered breadth-first as fsm.c numbers them.  Only when no alternative
 * is a prefix of another (a leaf never has children): otherwise, or for any other
 * shape, the generic route builds it.  Equivalent states are not merged (the
 * tails of two tools with the same name suffix and arguments): the language, and
 * so every mask, is the same; only the rule's key differs from a minimal DFA's,
 * and this rule is its grammar's own.
 */
#include "fsm.h"

#define LEAF 1u /* the node every alternative ends at (then the tail); the root is node 0 */
#define NO_NODE UINT32_MAX

typedef struct {
    uint32_t from, label, to; /* label: a byte, or 256 + a rule id */
} trie_edge;

typedef struct {
    VEC(trie_edge) edges;
    uint32_t *tab, cap; /* open addressing over edges: (from, label) -> edge index + 1 */
    uint32_t n_nodes;
    int rc;
} trie;

static uint32_t slot_of(const trie *t, uint32_t from, uint32_t label) {
    uint64_t h = xg2__mix64(xg2__mix64(0x9e3779b97f4a7c15ull, from), label);
    return (uint32_t)h & (t->cap - 1);
}

static int grow(trie *t) {
    uint32_t cap = t->cap ? t->cap * 2 : 256;
    uint32_t *tab = xg2__calloc(cap, sizeof(uint32_t));
    if (!tab) return XG2_NOMEM();
    xg2__free(t->tab);
    t->tab = tab;
    t->cap = cap;
    for (uint32_t k = 0; k < t->edges.n; k++) {
        uint32_t i = slot_of(t, t->edges.a[k].from, t->edges.a[k].label);
        while (tab[i]) i = (i + 1) & (cap - 1);
        tab[i] = k + 1;
    }
    return XG2_OK;
}

/* The node after `from` on `label`, made (to `want`, or a new node if want is NO_NODE)
 * if missing; NO_NODE when the edge exists to another node than `want` (not a
 * prefix-free trie) or on allocation failure (t->rc). */
static uint32_t step(trie *t, uint32_t from, uint32_t label, uint32_t want) {
    if ((uint64_t)(t->edges.n + 1) * 2 > t->cap && (t->rc = grow(t))) return NO_NODE;
    uint32_t i = slot_of(t, from, label);
    for (; t->tab[i]; i = (i + 1) & (t->cap - 1)) {
        const trie_edge *e = &t->edges.a[t->tab[i] - 1];
        if (e->from == from && e->label == label) return want != NO_NODE && e->to != want ? NO_NODE : e->to;
    }
    uint32_t to = want != NO_NODE ? want : t->n_nodes++;
    trie_edge e = {from, label, to};
    if (vec_push(&t->edges, e)) { t->rc = XG2_NOMEM(); return NO_NODE; }
    t->tab[i] = t->edges.n;
    return to;
}

/* Item kinds of a path: literal bytes (not empty) or a reference to a rule not expanded in place. */
static int path_item(const xg2_ir *ir, uint32_t id, const uint8_t *inline_rule) {
    const xg2_expr *e = &ir->exprs.a[id];
    return (e->kind == XE_BYTES && e->n > 0) || (e->kind == XE_REF && !(inline_rule && inline_rule[e->a]));
}

/* The items of a path expression (one item, or a sequence of them) into *items
 * (`one` holds a lone item); 0 if it is no path. */
static uint32_t path_items(const xg2_ir *ir, uint32_t id, const uint8_t *inline_rule, uint32_t *one,
                           const uint32_t **items) {
    const xg2_expr *e = &ir->exprs.a[id];
    if (e->kind == XE_SEQ) {
        for (uint32_t i = 0; i < e->n; i++)
            if (!path_item(ir, ir->pool.a[e->a + i], inline_rule)) return 0;
        *items = ir->pool.a + e->a;
        return e->n;
    }
    if (!path_item(ir, id, inline_rule)) return 0;
    *one = id;
    *items = one;
    return 1;
}

/* Walk items from `node`, the last step to `end` (NO_NODE: a new node); the node
 * reached, or NO_NODE if the path runs on past another path's end at `stop`. */
static uint32_t add_path(trie *t, const xg2_ir *ir, const uint32_t *items, uint32_t n, uint32_t node, uint32_t end,
                         uint32_t stop) {
    for (uint32_t i = 0; i < n && node != NO_NODE; i++) {
        const xg2_expr *e = &ir->exprs.a[items[i]];
        uint32_t k = e->kind == XE_BYTES ? e->n : 1;
        for (uint32_t j = 0; j < k && node != NO_NODE; j++) {
            if (node == stop) return NO_NODE;
            uint32_t label = e->kind == XE_BYTES ? ir->bytes.a[e->a + j] : 256u + e->a;
            node = step(t, node, label, i + 1 == n && j + 1 == k ? end : NO_NODE);
        }
    }
    return node;
}

static int cmp_edge(const void *a, const void *b) {
    const trie_edge *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    return (x->label > y->label) - (x->label < y->label);
}

/* The DFA of the trie, states breadth-first from the root (node 0). */
static int emit(const trie *t, uint32_t final_node, xg2_dfa *out) {
    uint32_t n = t->n_nodes, ne = t->edges.n;
    uint32_t *first = xg2__calloc((size_t)n + 1, sizeof(uint32_t)), *order = xg2__malloc(sizeof(uint32_t) * n),
             *id = xg2__malloc(sizeof(uint32_t) * n);
    trie_edge *e = xg2__malloc(sizeof(trie_edge) * (ne ? ne : 1));
    memset(out, 0, sizeof *out);
    out->boff = xg2__calloc((size_t)n + 1, sizeof(uint32_t));
    out->roff = xg2__calloc((size_t)n + 1, sizeof(uint32_t));
    out->br = xg2__malloc(sizeof(xg2_brange) * (ne ? ne : 1));
    out->re = xg2__malloc(sizeof(xg2_redge) * (ne ? ne : 1));
    out->final = xg2__calloc(n, 1);
    int rc = XG2_OK;
    if (!first || !order || !id || !e || !out->boff || !out->roff || !out->br || !out->re || !out->final) {
        rc = XG2_NOMEM();
        goto out;
    }
    memcpy(e, t->edges.a, sizeof(trie_edge) * ne);
    qsort(e, ne, sizeof *e, cmp_edge); /* by node, then bytes before rules, each ascending */
    for (uint32_t k = 0; k < ne; k++) first[e[k].from + 1]++;
    for (uint32_t v = 0; v < n; v++) first[v + 1] += first[v];
    for (uint32_t v = 0; v < n; v++) id[v] = UINT32_MAX;
    uint32_t head = 0, tail = 0, nb = 0, nr = 0;
    order[tail++] = 0;
    id[0] = 0;
    while (head < tail) {
        uint32_t v = order[head++];
        for (uint32_t k = first[v]; k < first[v + 1]; k++)
            if (id[e[k].to] == UINT32_MAX) { id[e[k].to] = tail; order[tail++] = e[k].to; }
    }
    out->n = tail;
    for (uint32_t s = 0; s < tail; s++) {
        uint32_t v = order[s];
        out->boff[s] = nb;
        out->roff[s] = nr;
        out->final[s] = v == final_node;
        for (uint32_t k = first[v]; k < first[v + 1]; k++) {
            uint32_t to = id[e[k].to];
            if (e[k].label < 256) { /* (runs of bytes to one state are one range, as fsm.c writes them) */
                if (nb > out->boff[s] && out->br[nb - 1].to == to && out->br[nb - 1].hi + 1 == e[k].label)
                    out->br[nb - 1].hi = e[k].label;
                else
                    out->br[nb++] = (xg2_brange){e[k].label, e[k].label, to};
            } else {
                out->re[nr++] = (xg2_redge){e[k].label - 256u, to};
            }
        }
    }
    out->boff[tail] = nb;
    out->roff[tail] = nr;
out:
    xg2__free(first);
    xg2__free(order);
    xg2__free(id);
    xg2__free(e);
    if (rc) xg2__dfa_free(out);
    return rc;
}

int xg2__trie_dfa(const xg2_ir *ir, uint32_t expr, const uint8_t *inline_rule, xg2_dfa *out, int *built) {
    *built = 0;
    const xg2_expr *body = &ir->exprs.a[expr];
    uint32_t choice = expr, n_tail = 0, one = 0;
    const uint32_t *tail = NULL, *items = NULL;
    if (body->kind == XE_SEQ && body->n >= 2 && ir->exprs.a[ir->pool.a[body->a]].kind == XE_CHOICE) {
        choice = ir->pool.a[body->a];
        tail = ir->pool.a + body->a + 1;
        n_tail = body->n - 1;
        for (uint32_t i = 0; i < n_tail; i++)
            if (!path_item(ir, tail[i], inline_rule)) return XG2_OK;
    }
    const xg2_expr *c = &ir->exprs.a[choice];
    if (c->kind != XE_CHOICE || c->n < 2) return XG2_OK;
    trie t = {0};
    t.n_nodes = 2; /* root, LEAF */
    int ok = 1;
    for (uint32_t i = 0; i < c->n && ok && !t.rc; i++) {
        uint32_t n = path_items(ir, ir->pool.a[c->a + i], inline_rule, &one, &items);
        /* (only tags' shape: literal text first, a rule later -- other choices keep the
         * generic route, which merges their common suffixes and caches their automata) */
        uint32_t refs = 0;
        for (uint32_t k = 1; k < n; k++) refs += ir->exprs.a[items[k]].kind == XE_REF;
        int tag_like = n >= 2 && ir->exprs.a[items[0]].kind == XE_BYTES && refs > 0;
        ok = tag_like && add_path(&t, ir, items, n, 0, LEAF, LEAF) == LEAF;
    }
    uint32_t final_node = LEAF;
    if (ok && !t.rc && n_tail) final_node = add_path(&t, ir, tail, n_tail, LEAF, NO_NODE, NO_NODE);
    ok = ok && final_node != NO_NODE;
    int rc = t.rc;
    if (!rc && ok) {
        rc = emit(&t, final_node, out);
        *built = !rc;
    }
    vec_free(&t.edges);
    xg2__free(t.tab);
    return rc;
}
