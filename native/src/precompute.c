/*
 * precompute.c -- token masks computed ahead, off a request's critical path (a
 * background thread while the engine runs the prompt's prefill): the states of
 * a grammar in breadth-first order, or those a sample text passes through.
 */
#include "literal_fans.h"
#include "token_edges.h"

/* States in breadth-first order from the root's start (byte edges, the starts
 * of called rules, the states calls return to), so the first ones are those a
 * generation meets first; each state a waiting item can sit in gets its mask
 * entry computed into the shared pool (a kernel item at loop count 0, no guard:
 * what a fill there looks up).  Entries already in the pool cost a lookup.  A
 * fan state gets its literals' entries, which a fill there unites (its own key
 * names every literal below it: new with each tool set).  Flags: see xg2.h. */
int xg2_compiled_precompute_states(const xg2_compiled *c, int32_t max_states, int64_t max_ns, uint32_t flags,
                                   int32_t *done) {
    xg2__clear_error();
    if (!c || !done) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    *done = 0;
    int64_t start = xg2__now_ns(), deadline = max_ns < 0 || max_ns > INT64_MAX - start ? INT64_MAX : start + max_ns;
    const xg2_grammar *g = c->g;
    uint32_t n = g->n_states, head = 0, tail = 0;
    if (!n || max_states == 0) return XG2_OK;
    uint32_t *queue = xg2__malloc(sizeof(uint32_t) * n);
    uint8_t *seen = xg2__calloc(n, 1);
    xg2_mask_entry **lits = NULL;
    uint32_t lits_cap = 0;
    int rc = XG2_OK;
    if (!queue || !seen) { rc = XG2_NOMEM(); goto out; }
    int skip_pieces = !!(flags & XG2_PRECOMPUTE_OWN), plain = !!(flags & XG2_PRECOMPUTE_PLAIN);
#define VISIT(t) do { uint32_t t_ = (t); if (t_ != XG2_NONE && t_ < n && !seen[t_] && \
                      !(skip_pieces && g->rules[g->states[t_].rule].piece)) { seen[t_] = 1; queue[tail++] = t_; } } while (0)
    VISIT(g->rules[g->root].start);
    while (head < tail && (max_states < 0 || *done < max_states) && xg2__now_ns() < deadline) {
        uint32_t s = queue[head++];
        const xg2_state *st = &g->states[s];
        uint32_t fan = (st->flags & SF_FAN) && !g->has_budgets ? xg2__fan_of(g, s) : XG2_NONE;
        if (fan != XG2_NONE) {
            uint32_t k = g->fans[fan].hi - g->fans[fan].lo;
            if (k > lits_cap) {
                xg2_mask_entry **more = xg2__realloc(lits, sizeof *lits * k);
                if (!more) { rc = XG2_NOMEM(); goto out; }
                lits = more;
                lits_cap = k;
            }
            if ((rc = xg2__fan_entries(g, c->v, fan, NULL, lits))) goto out;
            for (uint32_t i = 0; i < k; i++) xg2__pool_release(lits[i]);
            (*done)++;
        } else if (st->flags & (SF_BYTES | SF_REFS | SF_REPEAT)) {
            xg2_item it = xg2__mask_item(g, (xg2_item){s, 0, 0, 0});
            uint64_t k1, k2;
            xg2_mask_entry *e;
            xg2__mask_key(g, c->v, &it, &k1, &k2);
            if ((rc = xg2__mask_entry_get(g, c->v, &it, k1, k2, NULL, &e))) goto out;
            xg2__pool_release(e);
            (*done)++;
        }
        if (st->flags & SF_BYTES)
            for (unsigned b = 0; b < 256; b++)
                if (!plain || (b >= 0x20 && b < 0x7f && b != '\\') || b == '\t' || b == '\n' || b == '\r')
                    VISIT(xg2__step(g, s, (uint8_t)b));
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
    xg2__free(lits);
    return rc;
}

int xg2_compiled_precompute(const xg2_compiled *c, int32_t max_states, int64_t max_ns, int32_t *done) {
    return xg2_compiled_precompute_states(c, max_states, max_ns, 0, done);
}

/* The states a sample text passes through (a tool's arguments as a model
 * writes them): a matcher fed the text a byte at a time, its mask filled
 * before each byte and after the last, so that every kernel item met on the
 * way -- a superset of where a tokenised copy of the text stops -- has its
 * entry in the pool.  Far fewer states than all of a JSON schema's, whose
 * number expressions alone (fractions, exponents) are ~40 states a value.
 * Stops at the first byte the grammar refuses. */
int xg2_compiled_precompute_text(const xg2_compiled *c, const char *text, size_t len, int64_t max_ns,
                                 int32_t *done) {
    xg2__clear_error();
    if (!c || !done || (len && !text)) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    *done = 0;
    int64_t start = xg2__now_ns(), deadline = max_ns < 0 || max_ns > INT64_MAX - start ? INT64_MAX : start + max_ns;
    size_t words = (size_t)(c->v->vocab_size + 31) / 32;
    int32_t *row = xg2__malloc(sizeof(int32_t) * (words ? words : 1));
    xg2_matcher *m = NULL;
    int rc = row ? xg2_matcher_new(c, NULL, -1, 0, &m) : XG2_NOMEM();
    for (size_t i = 0; !rc && i <= len && xg2__now_ns() < deadline; i++) {
        int need, accepted = 0;
        if ((rc = xg2_matcher_fill_mask(m, row, (int64_t)words, &need))) break;
        (*done)++;
        if (i == len || (rc = xg2_matcher_accept_bytes(m, text + i, 1, &accepted)) || !accepted) break;
    }
    xg2_matcher_free(m);
    xg2__free(row);
    return rc;
}
