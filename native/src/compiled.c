/*
 * compiled.c -- the grammar/vocabulary pair.
 */
#include "token_edges.h"

int xg2_compiled_new(const xg2_grammar *g, const xg2_vocab *v, xg2_compiled **out) {
    xg2__clear_error();
    if (!g || !v || !out) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    xg2_compiled *c = xg2__calloc(1, sizeof *c);
    if (!c) return XG2_NOMEM();
    c->refs = 1;
    xg2__grammar_retain(g);
    xg2__vocab_retain(v);
    c->g = g;
    c->v = v;
    int rc = xg2__token_bind(c);
    if (rc) {
        xg2_compiled_free(c);
        return rc;
    }
    *out = c;
    return XG2_OK;
}

void xg2__compiled_retain(const xg2_compiled *c) { XG2_REF_INC((xg2_compiled *)c); }

void xg2_compiled_free(xg2_compiled *c) {
    if (!c || XG2_REF_DEC(c) != 0) return;
    xg2_grammar_free((xg2_grammar *)c->g);
    xg2_vocab_free((xg2_vocab *)c->v);
    xg2__free(c);
}

size_t xg2_compiled_memory_bytes(const xg2_compiled *c) {
    return c ? sizeof *c + c->g->memory_bytes : 0;
}

/* States in breadth-first order from the root's start (byte edges, the starts
 * of called rules, the states calls return to), so the first ones are those a
 * generation meets first; each state a waiting item can sit in gets its mask
 * entry computed into the shared pool (a kernel item at loop count 0, no guard:
 * what a fill there looks up).  Entries already in the pool cost a lookup. */
int xg2_compiled_precompute(const xg2_compiled *c, int32_t max_states, int64_t max_ns, int32_t *done) {
    xg2__clear_error();
    if (!c || !done) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    *done = 0;
    int64_t start = xg2__now_ns(), deadline = max_ns < 0 || max_ns > INT64_MAX - start ? INT64_MAX : start + max_ns;
    const xg2_grammar *g = c->g;
    uint32_t n = g->n_states, head = 0, tail = 0;
    if (!n || max_states == 0) return XG2_OK;
    uint32_t *queue = xg2__malloc(sizeof(uint32_t) * n);
    uint8_t *seen = xg2__calloc(n, 1);
    int rc = XG2_OK;
    if (!queue || !seen) { rc = XG2_NOMEM(); goto out; }
#define VISIT(t) do { uint32_t t_ = (t); if (t_ != XG2_NONE && t_ < n && !seen[t_]) { seen[t_] = 1; queue[tail++] = t_; } } while (0)
    VISIT(g->rules[g->root].start);
    while (head < tail && (max_states < 0 || *done < max_states) && xg2__now_ns() < deadline) {
        uint32_t s = queue[head++];
        const xg2_state *st = &g->states[s];
        if (st->flags & (SF_BYTES | SF_REFS | SF_REPEAT)) {
            xg2_item it = xg2__mask_item(g, (xg2_item){s, 0, 0, 0});
            uint64_t k1, k2;
            xg2_mask_entry *e;
            xg2__mask_key(g, c->v, &it, &k1, &k2);
            if ((rc = xg2__mask_entry_get(g, c->v, &it, k1, k2, NULL, &e))) goto out;
            xg2__pool_release(e);
            (*done)++;
        }
        if (st->flags & SF_BYTES)
            for (unsigned b = 0; b < 256; b++) VISIT(xg2__step(g, s, (uint8_t)b));
        for (uint32_t j = st->ref_off; j < st->ref_off + st->ref_n; j++) {
            VISIT(g->rules[g->refs_tab[j].rule].start);
            VISIT(g->refs_tab[j].to);
        }
        if (st->flags & SF_REPEAT) VISIT(g->rules[g->rules[st->rule].child].start);
    }
#undef VISIT
out:
    xg2__free(queue);
    xg2__free(seen);
    return rc;
}
