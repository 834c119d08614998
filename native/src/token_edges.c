/*
 * token_edges.c -- Token(id, ...) and ExcludeToken(id, ...): edges that take
 * one whole token of a set, never bytes.
 *
 * The parser lifts each into a rule of its own (ebnf.c) whose automaton is two
 * states: the start, with no edge (SF_TOKEN), and the final state.  A caller
 * predicts the rule like any other; the item sits at the start until a token
 * step moves it to the final state (earley.c, xg2__parser_push_token), which
 * completes the rule and so moves its callers on.  Byte steps never move it:
 * a special token (no text) can come only this way, and its spelled-out text
 * is just text.
 *
 * Token(...) takes exactly its ids, special and stop tokens included (Harmony's
 * <|call|> is both the grammar's last terminal and a stop token: XGrammar issue
 * 701).  ExcludeToken(...) takes every token of the vocabulary but its ids, and
 * never a special, padding or stop token -- as XGrammar 0.2.8, whose
 * ExcludeToken ranges over its sorted decoded vocabulary only.
 *
 * Masks: the byte-level fill never sets a token edge's tokens (no bytes), so
 * the cached entries stay exact; the fill then adds the sets of the token-rule
 * starts in the current set (xg2__token_mask_add) -- an item there is always
 * a prediction made in this set, so each such set is taken exactly.
 */
#include "token_edges.h"

int xg2__token_dfa(xg2_dfa *out) {
    memset(out, 0, sizeof *out);
    out->n = 2;
    out->boff = xg2__calloc(3, sizeof(uint32_t));
    out->roff = xg2__calloc(3, sizeof(uint32_t));
    out->final = xg2__calloc(2, 1);
    if (!out->boff || !out->roff || !out->final) {
        xg2__dfa_free(out);
        return XG2_NOMEM();
    }
    out->final[1] = 1;
    return XG2_OK;
}

static const xg2_expr *token_expr(const xg2_grammar *g, uint32_t state) {
    return &g->ir.exprs.a[g->ir.rules.a[g->states[state].rule].body];
}

static int ids_have(const uint32_t *ids, uint32_t n, uint32_t t) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && ids[lo] == t;
}

#define NOT_PLAIN (XG2_TOKEN_SPECIAL | XG2_TOKEN_STOP | XG2_TOKEN_PADDING)

int xg2__token_takes(const xg2_grammar *g, uint32_t state, int32_t t, uint8_t flags) {
    const xg2_expr *e = token_expr(g, state);
    int in = ids_have(g->ir.pool.a + e->a, e->n, (uint32_t)t);
    if (e->flags & XF_EXCLUDE) return !in && !(flags & NOT_PLAIN);
    return in && !(flags & XG2_TOKEN_PADDING);
}

int xg2__token_edge_items(const xg2_parser *p, const xg2_vocab *v, int32_t t, xg2_u32vec *out) {
    const xg2_grammar *g = p->g;
    uint32_t k = p->ns - 1;
    out->n = 0;
    for (uint32_t i = p->set_start.a[k]; i < p->set_start.a[k + 1]; i++) {
        uint32_t s = p->items.a[i].state;
        if ((g->states[s].flags & SF_TOKEN) && xg2__token_takes(g, s, t, v->flags[t]) && vec_push(out, i))
            return XG2_NOMEM();
    }
    return XG2_OK;
}

int xg2__token_mask_add(const xg2_parser *p, const xg2_compiled *c, uint32_t *row, int empty) {
    const xg2_grammar *g = p->g;
    const xg2_vocab *v = c->v;
    uint32_t k = p->ns - 1;
    xg2_u32vec done = {0}; /* rules already added (one set per rule) */
    VEC(uint8_t) had = {0}; /* ExcludeToken: the bits of its ids before the plain tokens are added */
    int rc = XG2_OK;
    for (uint32_t i = p->set_start.a[k]; i < p->set_start.a[k + 1]; i++) {
        uint32_t s = p->items.a[i].state;
        if (!(g->states[s].flags & SF_TOKEN)) continue;
        uint32_t rule = g->states[s].rule, seen = 0;
        for (uint32_t j = 0; j < done.n && !seen; j++) seen = done.a[j] == rule;
        if (seen) continue;
        if (vec_push(&done, rule)) { rc = XG2_NOMEM(); break; }
        const xg2_expr *e = token_expr(g, s);
        const uint32_t *ids = g->ir.pool.a + e->a;
        if (!(e->flags & XF_EXCLUDE)) {
            if (empty) memset(row, 0, sizeof(uint32_t) * v->words);
            for (uint32_t j = 0; j < e->n; j++)
                if (!(v->flags[ids[j]] & XG2_TOKEN_PADDING)) row[ids[j] >> 5] |= 1u << (ids[j] & 31);
            empty = 0;
            continue;
        }
        if (empty) { /* every plain token but the ids, into an empty row: one pass */
            memcpy(row, v->plain, sizeof(uint32_t) * v->words);
            for (uint32_t j = 0; j < e->n; j++) row[ids[j] >> 5] &= ~(1u << (ids[j] & 31));
            empty = 0;
            continue;
        }
        /* every plain token but the ids: add them all, then put the ids' bits back */
        if (vec_reserve(&had, e->n)) { rc = XG2_NOMEM(); break; }
        for (uint32_t j = 0; j < e->n; j++) had.a[j] = (uint8_t)((row[ids[j] >> 5] >> (ids[j] & 31)) & 1);
        for (uint32_t w = 0; w < v->words; w++) row[w] |= v->plain[w];
        for (uint32_t j = 0; j < e->n; j++)
            row[ids[j] >> 5] = (row[ids[j] >> 5] & ~(1u << (ids[j] & 31))) | (uint32_t)had.a[j] << (ids[j] & 31);
    }
    if (empty && !rc) memset(row, 0, sizeof(uint32_t) * v->words); /* (no token edge here either) */
    vec_free(&had);
    vec_free(&done);
    return rc;
}

int xg2__token_bind(xg2_compiled *c) {
    const xg2_grammar *g = c->g;
    const xg2_vocab *v = c->v;
    if (!g->token_kinds) return XG2_OK;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        if (g->rules[r].start == XG2_NONE) continue;
        const xg2_expr *e = &g->ir.exprs.a[g->ir.rules.a[r].body];
        if (e->kind != XE_TOKEN || !e->n) continue;
        uint32_t last = g->ir.pool.a[e->a + e->n - 1]; /* (sorted) */
        const xg2_rule_ir *ru = &g->ir.rules.a[r];
        if (last >= (uint32_t)v->vocab_size)
            return xg2__fail(XG2_ERR_GRAMMAR, "EBNF line %u, column %u (rule \"%s\"): %s(...) names token id %u, beyond this "
                             "vocabulary's %d tokens", ru->line, ru->col, xg2__ir_name(&g->ir, r),
                             (e->flags & XF_EXCLUDE) ? "ExcludeToken" : "Token", last, v->vocab_size);
    }
    return XG2_OK;
}
