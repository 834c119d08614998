/*
 * maskcache.c -- compute and keep the accepted / uncertain split of kernel items.
 *
 * The split of one item comes from a walk of the token trie against a local
 * parser that holds only that item (its rule instance started "before"
 * history: completing it marks the depth instead of continuing in a parent).
 * The walk runs as a plain DFA while the item stays inside its rule's byte
 * edges, and switches to the Earley parser below a node where the rule calls
 * another rule.  A failing byte rejects the node's subtree, unless the rule
 * could have ended earlier on the path with a byte of its FOLLOW set next: then
 * the subtree is uncertain.
 *
 * Dense states are sped up by slices: if every string over a slice's class is
 * alive from the item's state (a product walk of the two automata), the
 * slice's tokens are accepted in bulk and only the rest are walked.
 */
#include "maskcache.h"

#define SLICE_PAIR_LIMIT 4096

XG2_HIDDEN int xg2__parser_reinit_local(xg2_parser *p, uint32_t state, uint32_t count);

/* ---- keys ---- */

uint64_t xg2__mask_key(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it) {
    const xg2_state *st = &g->states[it->state];
    int32_t min, max;
    if (st->flags & SF_REPEAT) {
        min = g->rules[st->rule].min;
        max = g->rules[st->rule].max;
    } else if (st->loop) {
        min = g->loops[(st->loop >> 1) - 1].min;
        max = g->loops[(st->loop >> 1) - 1].max;
    } else {
        return (uint64_t)it->state << 32;
    }
    uint32_t far = xg2__count_far(v);
    uint32_t lo = it->count < (uint32_t)min ? (uint32_t)min - it->count : 0;
    uint32_t hi = max < 0 ? far : (uint32_t)max - it->count;
    if (lo > far) lo = far;
    if (hi > far) hi = far;
    return (uint64_t)it->state << 32 | lo << 16 | hi;
}

/* ---- slices ---- */

/* Is every string over the slice's class alive from DFA state q (with the
 * item's loop count)?  A walk of the product of the slice automaton and the
 * rule's byte edges.  Counts are not tracked, so the walk gives up when they
 * could matter: the item's loop near its maximum, leaving the loop before its
 * minimum, or entering a loop. */
static int slice_contained(const xg2_grammar *g, const xg2_vocab *v, const xg2_slice *s, uint32_t q, uint32_t count) {
    uint32_t loop = g->states[q].loop >> 1;
    int may_leave = 1;
    if (loop) {
        const xg2_loop *l = &g->loops[loop - 1];
        if (l->max >= 0 && (uint32_t)l->max - count < xg2__count_far(v)) return 0;
        may_leave = count >= (uint32_t)l->min;
    }
    uint64_t seen[SLICE_PAIR_LIMIT];
    uint32_t stack_a[SLICE_PAIR_LIMIT], stack_q[SLICE_PAIR_LIMIT];
    uint32_t n_seen = 0, sp = 0;
    seen[n_seen++] = (uint64_t)q;
    stack_a[sp] = 0;
    stack_q[sp++] = q;
    while (sp) {
        sp--;
        uint32_t a = stack_a[sp], r = stack_q[sp];
        if (!(g->states[r].flags & SF_BYTES)) return 0;
        const int32_t *row = s->dfa + 256 * a;
        for (int c = 0; c < 256; c++) {
            if (row[c] < 0) continue;
            uint32_t t = xg2__step(g, r, (uint8_t)c);
            if (t == XG2_NONE) return 0;
            uint32_t lr = g->states[r].loop, lt = g->states[t].loop;
            if (lr & 1 && !byteset_has(&g->loops[(lr >> 1) - 1].first, (unsigned)c)) { /* leaves the loop */
                if (!may_leave || lt) return 0;
            } else if (lt && (lt >> 1) != loop) {
                return 0; /* enters another loop */
            }
            uint64_t key = (uint64_t)row[c] << 32 | t;
            uint32_t k = 0;
            while (k < n_seen && seen[k] != key) k++;
            if (k < n_seen) continue;
            if (n_seen == SLICE_PAIR_LIMIT) return 0;
            seen[n_seen++] = key;
            stack_a[sp] = (uint32_t)row[c];
            stack_q[sp++] = t;
        }
    }
    return 1;
}

/* ---- the local walk ---- */

typedef struct {
    const xg2_grammar *g;
    xg2_parser *p;       /* used below earley_from */
    uint32_t earley_from; /* depth where the Earley parser took over, or UINT32_MAX */
    uint32_t *qs;        /* DFA state per depth */
    uint32_t *cs;        /* loop count per depth */
    uint8_t *cand;       /* cand[d]: some token through depth d may be uncertain */
    uint8_t *comp;       /* comp[d]: the root rule can have ended after d bytes */
    const xg2_byteset *follow;
} walker;

static int is_pure(const xg2_grammar *g, uint32_t s) {
    return !(g->states[s].flags & (SF_REFS | SF_REPEAT));
}

/* Walk trie t from the item's start configuration; OR accepted tokens into
 * acc, append uncertain ones to unc. */
typedef VEC(int32_t) i32vec;

static int walk(walker *w, const xg2_trie *t, uint32_t *acc, i32vec *unc) {
    const xg2_grammar *g = w->g;
    const xg2_trie_node *nodes = t->nodes;
    uint32_t pushed = 0; /* parser pushes since earley_from */
    for (uint32_t i = 1; i < t->n_nodes;) {
        const xg2_trie_node *nd = &nodes[i];
        uint32_t d = nd->depth; /* the node's depth; its parent is at d - 1 */
        uint8_t c = nd->byte;
        if (w->earley_from != UINT32_MAX) {
            if (d - 1 < w->earley_from) {
                w->earley_from = UINT32_MAX; /* back above the switch: DFA mode again */
                pushed = 0;
            } else if (pushed > d - 1 - w->earley_from) {
                xg2__parser_pop(w->p, pushed - (d - 1 - w->earley_from));
                pushed = d - 1 - w->earley_from;
            }
        }
        int alive;
        if (w->earley_from == UINT32_MAX) {
            uint32_t s = xg2__step(g, w->qs[d - 1], c), n = 0;
            if (s != XG2_NONE && g->n_loops) n = xg2__loop_step(g, w->qs[d - 1], s, c, w->cs[d - 1]);
            alive = s != XG2_NONE && n != UINT32_MAX;
            if (alive) {
                if (is_pure(g, s)) {
                    w->qs[d] = s;
                    w->cs[d] = n;
                    w->comp[d] = (g->states[s].flags & SF_FINAL) && xg2__loop_may_end(g, s, n);
                } else {
                    int rc = xg2__parser_reinit_local(w->p, s, 0);
                    if (rc) return rc;
                    w->earley_from = d;
                    pushed = 0;
                    w->comp[d] = (uint8_t)w->p->root_done;
                }
            }
        } else {
            int r = xg2__parser_push(w->p, c);
            if (r < 0) return -r;
            alive = r;
            if (alive) {
                pushed++;
                w->comp[d] = (uint8_t)w->p->root_done;
            }
        }
        /* May a token through this node end the rule before its last byte? */
        uint8_t cand = w->cand[d - 1] || (d >= 2 && w->comp[d - 1] && byteset_has(w->follow, c));
        if (alive) {
            w->cand[d] = cand;
            for (uint32_t k = nd->tok_begin; k < (uint32_t)nd->tok_begin + nd->tok_count; k++) {
                uint32_t id = (uint32_t)t->ids[k];
                acc[id >> 5] |= 1u << (id & 31);
            }
            i++;
        } else {
            if (cand)
                for (uint32_t k = nd->tok_begin; k < nd->tok_end; k++)
                    if (vec_push(unc, t->ids[k])) return XG2_NOMEM();
            i += nd->subtree;
        }
    }
    if (w->earley_from != UINT32_MAX && pushed) xg2__parser_pop(w->p, pushed);
    return XG2_OK;
}

static int compute(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it, xg2_mask_entry **out) {
    int rc = XG2_OK;
    size_t words = v->words;
    uint32_t depth = v->max_token_len + 2;
    xg2_parser p;
    i32vec unc = {0};
    uint32_t *acc = xg2__calloc(words, sizeof(uint32_t));
    walker w = {g, &p, UINT32_MAX, NULL, NULL, NULL, NULL, &g->follow[g->states[it->state].rule]};
    w.qs = xg2__malloc(sizeof(uint32_t) * depth);
    w.cs = xg2__malloc(sizeof(uint32_t) * depth);
    w.cand = xg2__calloc(depth, 1);
    w.comp = xg2__calloc(depth, 1);
    memset(&p, 0, sizeof p);
    if (!acc || !w.qs || !w.cs || !w.cand || !w.comp) { rc = XG2_NOMEM(); goto out; }
    if ((rc = xg2__parser_init_local(&p, g, it->state, it->count))) goto out;

    const xg2_trie *t = &v->trie;
    if (is_pure(g, it->state)) {
        w.qs[0] = it->state;
        w.cs[0] = it->count;
        for (int k = 0; k < XG2_N_SLICES; k++) {
            const xg2_slice *s = &v->slices[k];
            if (s->rest.nodes && slice_contained(g, v, s, it->state, it->count)) {
                for (size_t i = 0; i < words; i++) acc[i] |= s->all[i];
                t = &s->rest;
                break;
            }
        }
    } else {
        w.earley_from = 0;
    }
    if ((rc = walk(&w, t, acc, &unc))) goto out;

    xg2_mask_entry *e = xg2__calloc(1, sizeof *e);
    if (!e) { rc = XG2_NOMEM(); goto out; }
    uint32_t n_acc = 0;
    for (size_t i = 0; i < words; i++) n_acc += (uint32_t)__builtin_popcount(acc[i]);
    if (n_acc < words / 16) { /* few tokens: setting bits from a list beats OR-ing a bitset */
        e->acc = xg2__malloc(sizeof(int32_t) * (n_acc ? n_acc : 1));
        if (!e->acc) { xg2__free(e); rc = XG2_NOMEM(); goto out; }
        for (size_t i = 0; i < words; i++)
            for (uint32_t b = acc[i]; b; b &= b - 1) e->acc[e->n_acc++] = (int32_t)(i * 32 + (uint32_t)__builtin_ctz(b));
        e->bytes = sizeof(int32_t) * n_acc;
    } else {
        e->bits = acc;
        acc = NULL;
        e->bytes = sizeof(uint32_t) * words;
    }
    e->unc = unc.a;
    e->n_unc = unc.n;
    unc.a = NULL;
    e->bytes += sizeof *e + sizeof(int32_t) * e->n_unc;
    *out = e;
out:
    xg2__parser_free(&p);
    xg2__free(acc);
    xg2__free(w.qs);
    xg2__free(w.cs);
    xg2__free(w.cand);
    xg2__free(w.comp);
    vec_free(&unc);
    return rc;
}

/* ---- the cache ---- */

static void entry_free(xg2_mask_entry *e) {
    if (!e) return;
    xg2__free(e->bits);
    xg2__free(e->acc);
    xg2__free(e->unc);
    xg2__free(e);
}

int xg2__mask_cache_init(xg2_mask_cache *c) {
    memset(c, 0, sizeof *c);
    return pthread_mutex_init(&c->lock, NULL) ? xg2__fail(XG2_ERR_INTERNAL, "mutex init failed") : XG2_OK;
}

void xg2__mask_cache_free(xg2_mask_cache *c) {
    for (uint32_t i = 0; i < c->cap; i++) entry_free(c->slots[i].entry);
    xg2__free(c->slots);
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof *c);
}

static uint32_t slot_of(const xg2_mask_cache *c, uint64_t key) {
    uint32_t h = (uint32_t)(xg2__mix64(0x6a09e667u, key) >> 32) & (c->cap - 1);
    while (c->slots[h].entry && c->slots[h].key != key) h = (h + 1) & (c->cap - 1);
    return h;
}

static int grow(xg2_mask_cache *c) {
    uint32_t ncap = c->cap ? c->cap * 2 : 256;
    xg2_mask_slot *old = c->slots;
    uint32_t ocap = c->cap;
    c->slots = xg2__calloc(ncap, sizeof(xg2_mask_slot));
    if (!c->slots) { c->slots = old; return XG2_NOMEM(); }
    c->cap = ncap;
    for (uint32_t i = 0; i < ocap; i++)
        if (old[i].entry) c->slots[slot_of(c, old[i].key)] = old[i];
    xg2__free(old);
    return XG2_OK;
}

int xg2__mask_entry_get(xg2_mask_cache *c, const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it,
                        const xg2_mask_entry **out) {
    uint64_t key = xg2__mask_key(g, v, it);
    pthread_mutex_lock(&c->lock);
    if (c->cap) {
        const xg2_mask_slot *s = &c->slots[slot_of(c, key)];
        if (s->entry) {
            *out = s->entry;
            pthread_mutex_unlock(&c->lock);
            return XG2_OK;
        }
    }
    pthread_mutex_unlock(&c->lock);
    /* Compute outside the lock; if another thread got there first, keep theirs. */
    xg2_mask_entry *e = NULL;
    int rc = compute(g, v, it, &e);
    if (rc) return rc;
    pthread_mutex_lock(&c->lock);
    if ((uint64_t)(c->n + 1) * 2 > c->cap && (rc = grow(c))) {
        pthread_mutex_unlock(&c->lock);
        entry_free(e);
        return rc;
    }
    xg2_mask_slot *s = &c->slots[slot_of(c, key)];
    if (s->entry) {
        entry_free(e);
    } else {
        s->key = key;
        s->entry = e;
        c->n++;
        c->bytes += e->bytes;
    }
    *out = s->entry;
    pthread_mutex_unlock(&c->lock);
    return XG2_OK;
}
