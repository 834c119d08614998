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
 * all go on to the tail, it is already deterministic: built here from the sorted
 * alternatives (each one shares its longest common prefix with the one before: no
 * lookups, each node's edges made in order), its states numbered breadth-first as
 * fsm.c numbers them.  Only when no alternative
 * is a prefix of another (a leaf never has children): otherwise, or for any other
 * shape, the generic route builds it.  Equivalent states are not merged (the
 * tails of two tools with the same name suffix and arguments): the language, and
 * so every mask, is the same; only the rule's key differs from a minimal DFA's,
 * and this rule is its grammar's own.
 */
#include "fsm.h"

#define LEAF 1u /* the node every alternative ends at (then the tail); the root is node 0 */

typedef struct {
    uint32_t from, label, to; /* label: a byte, or 256 + a rule id */
} trie_edge;

typedef VEC(trie_edge) edge_vec;

/* One alternative as its labels, pool[at .. at + n). */
typedef struct {
    const uint32_t *a;
    uint32_t n;
} trie_path;

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

/* Append the labels of items to pool. */
static int add_labels(const xg2_ir *ir, const uint32_t *items, uint32_t n, xg2_u32vec *pool) {
    for (uint32_t i = 0; i < n; i++) {
        const xg2_expr *e = &ir->exprs.a[items[i]];
        if (e->kind != XE_BYTES) {
            if (vec_push(pool, 256u + e->a)) return XG2_NOMEM();
            continue;
        }
        if (vec_reserve(pool, (uint64_t)pool->n + e->n)) return XG2_NOMEM();
        for (uint32_t j = 0; j < e->n; j++) pool->a[pool->n++] = ir->bytes.a[e->a + j];
    }
    return XG2_OK;
}

static int cmp_path(const void *a, const void *b) {
    const trie_path *x = a, *y = b;
    uint32_t n = x->n < y->n ? x->n : y->n;
    for (uint32_t k = 0; k < n; k++)
        if (x->a[k] != y->a[k]) return x->a[k] < y->a[k] ? -1 : 1;
    return (x->n > y->n) - (x->n < y->n);
}

/* The DFA of the trie (edges: each node's in ascending label order, nodes in any
 * order), states breadth-first from the root (node 0). */
static int emit(const trie_edge *edges, uint32_t ne, uint32_t n, uint32_t final_node, xg2_dfa *out) {
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
    /* Grouped by node, stably (a counting sort): by node, then label. */
    for (uint32_t k = 0; k < ne; k++) first[edges[k].from + 1]++;
    for (uint32_t v = 0; v < n; v++) first[v + 1] += first[v];
    for (uint32_t k = 0; k < ne; k++) e[first[edges[k].from]++] = edges[k];
    for (uint32_t v = n; v > 0; v--) first[v] = first[v - 1];
    first[0] = 0;
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

/* The trie of the sorted paths, then the tail from LEAF: each path shares its
 * longest common prefix with the one before it, so a node's edges are made in
 * ascending label order.  0 when a path runs on past another's end. */
static int build_trie(const trie_path *paths, uint32_t np, const uint32_t *tail, uint32_t n_tail,
                      edge_vec *edges, uint32_t *n_nodes, uint32_t *final_node, int *ok) {
    uint32_t max_len = 0;
    for (uint32_t i = 0; i < np; i++)
        if (paths[i].n > max_len) max_len = paths[i].n;
    uint32_t *node_at = xg2__malloc(sizeof(uint32_t) * ((size_t)max_len + 1));
    if (!node_at) return XG2_NOMEM();
    uint32_t nodes = 2; /* root, LEAF */
    node_at[0] = 0;
    *ok = 1;
    for (uint32_t i = 0; i < np && *ok; i++) {
        const trie_path *p = &paths[i], *q = i ? &paths[i - 1] : NULL;
        uint32_t l = 0;
        if (q) {
            uint32_t m = p->n < q->n ? p->n : q->n;
            while (l < m && p->a[l] == q->a[l]) l++;
            if (l == q->n) { /* a repeated alternative is the same path; a longer one runs past its end */
                *ok = l == p->n;
                continue;
            }
        }
        for (uint32_t k = l; k < p->n; k++) {
            trie_edge e = {node_at[k], p->a[k], k + 1 == p->n ? LEAF : nodes++};
            if (vec_push(edges, e)) { xg2__free(node_at); return XG2_NOMEM(); }
            node_at[k + 1] = e.to;
        }
    }
    uint32_t node = LEAF;
    for (uint32_t k = 0; k < n_tail && *ok; k++) {
        trie_edge e = {node, tail[k], nodes++};
        if (vec_push(edges, e)) { xg2__free(node_at); return XG2_NOMEM(); }
        node = e.to;
    }
    xg2__free(node_at);
    *n_nodes = nodes;
    *final_node = node;
    return XG2_OK;
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
    /* Each alternative's labels (the tail's last), then their trie. */
    xg2_u32vec pool = {0}, at = {0};
    edge_vec edges = {0};
    trie_path *paths = NULL;
    int rc = XG2_OK, ok = 1;
    for (uint32_t i = 0; i < c->n && ok && !rc; i++) {
        uint32_t n = path_items(ir, ir->pool.a[c->a + i], inline_rule, &one, &items);
        /* (only tags' shape: literal text first, a rule later -- other choices keep the
         * generic route, which merges their common suffixes and caches their automata) */
        uint32_t refs = 0;
        for (uint32_t k = 1; k < n; k++) refs += ir->exprs.a[items[k]].kind == XE_REF;
        ok = n >= 2 && ir->exprs.a[items[0]].kind == XE_BYTES && refs > 0;
        if (ok) rc = vec_push(&at, pool.n) ? XG2_NOMEM() : add_labels(ir, items, n, &pool);
    }
    if (ok && !rc) rc = vec_push(&at, pool.n) ? XG2_NOMEM() : add_labels(ir, tail, n_tail, &pool);
    if (ok && !rc && (vec_push(&at, pool.n) || !(paths = xg2__malloc(sizeof *paths * c->n)))) rc = XG2_NOMEM();
    if (ok && !rc) {
        uint32_t final_node = LEAF, n_nodes = 0;
        for (uint32_t i = 0; i < c->n; i++) paths[i] = (trie_path){pool.a + at.a[i], at.a[i + 1] - at.a[i]};
        qsort(paths, c->n, sizeof *paths, cmp_path);
        rc = build_trie(paths, c->n, pool.a + at.a[c->n], at.a[c->n + 1] - at.a[c->n], &edges, &n_nodes, &final_node, &ok);
        if (!rc && ok) {
            rc = emit(edges.a, edges.n, n_nodes, final_node, out);
            *built = !rc;
        }
    }
    vec_free(&pool);
    vec_free(&at);
    vec_free(&edges);
    xg2__free(paths);
    return rc;
}
