/*
 * fsm_length.c -- the automaton of Length(body, unit, min, max).
 *
 * The body's automaton times the unit's, run over and over: every unit
 * boundary a head of one counted loop, and every state knowing how many units
 * it needs at least and may take at most, so that the parser refuses a step
 * that could no longer end within [min, max] and no prefix is a dead end.
 * Where the body's counts have gaps ((ab)+) the count is written out as
 * states instead.  Minimisation and numbering are fsm_dfa.c's.
 */
#include "fsm_internal.h"


/* ---- Length(body, unit, min, max) ---- */

static int length_error(const xg2_ir *ir, uint32_t rule, const char *what) {
    return xg2__fail(XG2_ERR_GRAMMAR, "rule \"%s\": Length(...) %s",
                     rule != UINT32_MAX ? xg2__ir_name(ir, rule) : "(expression)", what);
}

/* The body's automaton: a reference to a plain rule builds that rule's own
 * automaton (a pattern's states written as rules: their right-linear region
 * expanded in place); anything else is expanded byte by byte. */
static int length_body(const xg2_ir *ir, uint32_t id, const uint8_t *inline_rule, xg2_regions *regions, xg2_dfa *out) {
    const xg2_expr *e = &ir->exprs.a[id];
    if (e->kind == XE_REF && ir->rules.a[e->a].kind == RK_FSM && ir->rules.a[e->a].lookahead < 0) {
        if (ir->exprs.a[ir->rules.a[e->a].body].kind == XE_LENGTH) /* (and no recursion through a chain of them) */
            return xg2__fail(XG2_ERR_GRAMMAR, "the body of a Length(...) cannot be another Length(...) (rule \"%s\")",
                             xg2__ir_name(ir, e->a));
        return xg2__fsm_build(ir, ir->rules.a[e->a].body, inline_rule, regions, e->a, 0, out);
    }
    return xg2__fsm_build(ir, id, NULL, NULL, UINT32_MAX, 1, out);
}

/* Fewest and most units from each state to the end (rest[2s], rest[2s + 1];
 * XG2_REST_ANY: unbounded), a step into a head being one unit.  *contiguous:
 * every state's counts to the end form one interval -- checked locally (the
 * end itself and each edge's target interval, shifted, must join up), which
 * by induction on the count shows every count between the two is reached. */
static int length_rest(const xg2_dfa *d, uint32_t *rest, int *contiguous, uint32_t *slack) {
    uint32_t n = d->n, ne = d->boff[n], nc = 0;
    int rc = XG2_OK;
    uint32_t *roff = xg2__calloc((size_t)n + 1, sizeof(uint32_t)), *rsrc = xg2__malloc(sizeof(uint32_t) * ((size_t)ne + n + 1));
    uint32_t *comp = xg2__malloc(sizeof(uint32_t) * n), *csize = xg2__calloc(n, sizeof(uint32_t));
    xg2_u32vec cur = {0}, next = {0};
    VEC(uint64_t) iv = {0};
    if (!roff || !rsrc || !comp || !csize) { rc = XG2_NOMEM(); goto out; }
#define HEAD(t) (d->tag[t] & 1u)
    /* fewest: breadth-first backwards from the ends, one layer per unit */
    for (uint32_t j = 0; j < ne; j++) roff[d->br[j].to + 1]++;
    for (uint32_t s = 0; s < n; s++) roff[s + 1] += roff[s];
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) rsrc[roff[d->br[j].to]++] = s;
    for (uint32_t s = n; s > 0; s--) roff[s] = roff[s - 1];
    roff[0] = 0;
    for (uint32_t s = 0; s < n; s++) {
        rest[2 * s] = d->final[s] ? 0 : XG2_REST_ANY;
        if (d->final[s] && vec_push(&cur, s)) { rc = XG2_NOMEM(); goto out; }
    }
    for (uint32_t layer = 0; cur.n; layer++) {
        for (uint32_t i = 0; i < cur.n; i++) { /* steps within a unit cost nothing */
            uint32_t t = cur.a[i];
            if (HEAD(t)) continue;
            for (uint32_t j = roff[t]; j < roff[t + 1]; j++)
                if (rest[2 * rsrc[j]] > layer) {
                    rest[2 * rsrc[j]] = layer;
                    if (vec_push(&cur, rsrc[j])) { rc = XG2_NOMEM(); goto out; }
                }
        }
        next.n = 0;
        for (uint32_t i = 0; i < cur.n; i++) {
            uint32_t t = cur.a[i];
            if (!HEAD(t) || rest[2 * t] != layer) continue;
            for (uint32_t j = roff[t]; j < roff[t + 1]; j++)
                if (rest[2 * rsrc[j]] == XG2_REST_ANY) {
                    rest[2 * rsrc[j]] = layer + 1;
                    if (vec_push(&next, rsrc[j])) { rc = XG2_NOMEM(); goto out; }
                }
        }
        xg2_u32vec tmp = cur; cur = next; next = tmp;
    }
    /* most: components sinks first; a cycle (through a head: units are finite)
     * can be taken any number of times */
    if ((rc = xg2__dfa_scc(d, comp, &nc))) goto out;
    for (uint32_t s = 0; s < n; s++) csize[comp[s]]++;
    uint32_t *order = rsrc; /* (reused, n entries: states by component) */
    {
        uint32_t *pos = roff;
        memset(pos, 0, sizeof(uint32_t) * (n + 1));
        for (uint32_t s = 0; s < n; s++) pos[comp[s] + 1]++;
        for (uint32_t c = 0; c < nc; c++) pos[c + 1] += pos[c];
        for (uint32_t s = 0; s < n; s++) order[pos[comp[s]]++] = s;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = order[i], most = 0;
        int any = csize[comp[s]] > 1;
        for (uint32_t j = d->boff[s]; j < d->boff[s + 1] && !any; j++) {
            uint32_t t = d->br[j].to;
            if (t == s || rest[2 * t + 1] == XG2_REST_ANY) { any = 1; break; }
            if (rest[2 * t + 1] + HEAD(t) > most) most = rest[2 * t + 1] + HEAD(t);
        }
        rest[2 * s + 1] = any ? XG2_REST_ANY : most;
    }
    /* contiguity, state by state */
    *contiguous = 1;
    *slack = 0;
    for (uint32_t s = 0; s < n && *contiguous; s++) {
        iv.n = 0;
        if (d->final[s] && vec_push(&iv, 0)) { rc = XG2_NOMEM(); goto out; }
        for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) {
            uint32_t t = d->br[j].to, w = HEAD(t);
            uint64_t lo = (uint64_t)rest[2 * t] + w, hi = rest[2 * t + 1] == XG2_REST_ANY ? 0xFFFFFFFFu : rest[2 * t + 1] + w;
            if (vec_push(&iv, lo << 32 | hi)) { rc = XG2_NOMEM(); goto out; }
        }
        for (uint32_t a = 1; a < iv.n; a++) { /* (a few targets per state) */
            uint64_t x = iv.a[a];
            uint32_t b = a;
            for (; b > 0 && iv.a[b - 1] > x; b--) iv.a[b] = iv.a[b - 1];
            iv.a[b] = x;
        }
        uint64_t reach = iv.a[0] & 0xFFFFFFFFu;
        for (uint32_t a = 1; a < iv.n; a++) {
            uint64_t lo = iv.a[a] >> 32, hi = iv.a[a] & 0xFFFFFFFFu;
            if (reach != 0xFFFFFFFFu && lo > reach + 1) { *contiguous = 0; break; }
            if (hi > reach) reach = hi;
        }
        for (int k = 0; k < 2; k++)
            if (rest[2 * s + k] != XG2_REST_ANY && rest[2 * s + k] > *slack) *slack = rest[2 * s + k];
    }
#undef HEAD
out:
    xg2__free(roff);
    xg2__free(rsrc);
    xg2__free(comp);
    xg2__free(csize);
    vec_free(&cur);
    vec_free(&next);
    vec_free(&iv);
    return rc;
}

/* Minimised (and trimmed) automaton of the parts; the parts are consumed. */
typedef VEC(uint8_t) flagvec;

static int length_finish(xg2_u32vec *boff, brvec *br, flagvec *fin, xg2_u32vec *tag, const xg2_loop_info *loop,
                         xg2_dfa *out) {
    xg2_dfa d = {0};
    uint32_t *block = NULL, nblk = 0;
    int rc = XG2_OK;
    d.n = fin->n;
    d.boff = boff->a;
    d.br = br->a;
    d.final = fin->a;
    d.tag = tag->a;
    boff->a = NULL, boff->n = boff->cap = 0;
    br->a = NULL, br->n = br->cap = 0;
    fin->a = NULL, fin->n = fin->cap = 0;
    tag->a = NULL, tag->n = tag->cap = 0;
    d.roff = xg2__calloc((size_t)d.n + 1, sizeof(uint32_t));
    block = xg2__malloc(sizeof(uint32_t) * (d.n ? d.n : 1));
    if (loop) {
        d.loops = xg2__malloc(sizeof *loop);
        if (d.loops) { *d.loops = *loop; d.n_loops = 1; }
    }
    if (!d.roff || !block || (loop && !d.loops)) { rc = XG2_NOMEM(); goto out; }
    if (!(rc = xg2__minimize(&d, NULL, block, &nblk))) rc = xg2__rebuild(&d, block, nblk, out);
out:
    xg2__dfa_free(&d);
    xg2__free(block);
    return rc;
}

/* Length(body, unit, min, max): the product of the body's automaton with the
 * unit's (run over and over), every unit boundary a head of one counted loop;
 * each state keeps how many units it needs at least and may take at most, so
 * a step that could no longer end within [min, max] is refused.  Exact when
 * every state's counts to the end form an interval (patterns do); else the
 * count is written out as states (body x 0..max: like any product, limited). */
int xg2__build_length(const xg2_ir *ir, uint32_t expr, const uint8_t *inline_rule, xg2_regions *regions,
                        uint32_t rule, xg2_dfa *out) {
    const xg2_expr e = ir->exprs.a[expr];
    xg2_dfa B = {0}, U = {0}, P = {0};
    uint32_t *map = NULL, *rest = NULL;
    xg2_u32vec pb = {0}, pu = {0}, boff = {0}, tag = {0};
    brvec br = {0};
    flagvec fin = {0};
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = length_body(ir, ir->pool.a[e.a], inline_rule, regions, &B))) {
        out->conflict_expr = B.conflict_expr; /* (a counted loop in the body: resolved like the rule's own) */
        xg2__dfa_free(&B);
        return rc;
    }
    if ((rc = xg2__fsm_build(ir, ir->pool.a[e.a + 1], NULL, NULL, UINT32_MAX, 1, &U))) goto out;
    if (B.n_loops || (B.n && B.roff[B.n])) {
        rc = length_error(ir, rule, "needs a regular body: no recursion, no counted repetition");
        goto out;
    }
    int unit_ok = self_delimiting(&U); /* (built byte by byte: no rule edges) */
    if (unit_ok) { /* finite: no cycle (every component one state, none with a self edge) */
        uint32_t *cmp = xg2__malloc(sizeof(uint32_t) * U.n), nc = 0;
        if (!cmp || xg2__dfa_scc(&U, cmp, &nc)) { xg2__free(cmp); rc = XG2_NOMEM(); goto out; }
        unit_ok = nc == U.n;
        for (uint32_t s = 0; s < U.n && unit_ok; s++)
            for (uint32_t j = U.boff[s]; j < U.boff[s + 1]; j++) unit_ok &= U.br[j].to != s;
        xg2__free(cmp);
    }
    if (!unit_ok) {
        rc = length_error(ir, rule, "needs a unit that is a finite byte pattern, none of whose strings is a prefix of another");
        goto out;
    }
    if (!B.n) { rc = length_error(ir, rule, "matches no string"); goto out; }
    if ((uint64_t)B.n * U.n > (1u << 22)) { rc = length_error(ir, rule, "is too large: its body and unit automata multiply past 4M states"); goto out; }
    /* body x unit, breadth first; a completed unit goes back to the unit's start */
    map = xg2__malloc(sizeof(uint32_t) * B.n * U.n);
    if (!map) { rc = XG2_NOMEM(); goto out; }
    memset(map, 0xFF, sizeof(uint32_t) * B.n * U.n);
    map[0] = 0;
    if (vec_push(&pb, 0) || vec_push(&pu, 0)) goto oom;
    for (uint32_t i = 0; i < pb.n; i++) {
        uint32_t b = pb.a[i], u = pu.a[i];
        if (i >= XG2_MAX_DFA_STATES) { rc = length_error(ir, rule, "is too large: more than 20000 automaton states"); goto out; }
        if (vec_push(&boff, br.n) || vec_push(&fin, (uint8_t)(B.final[b] && u == 0)) || vec_push(&tag, u == 0 ? 3u : 2u)) goto oom;
        uint32_t j = B.boff[b], k = U.boff[u];
        while (j < B.boff[b + 1] && k < U.boff[u + 1]) {
            uint32_t lo = B.br[j].lo > U.br[k].lo ? B.br[j].lo : U.br[k].lo;
            uint32_t hi = B.br[j].hi < U.br[k].hi ? B.br[j].hi : U.br[k].hi;
            if (lo <= hi) {
                uint32_t tb = B.br[j].to, tu = U.final[U.br[k].to] ? 0 : U.br[k].to;
                uint32_t *slot = &map[(size_t)tb * U.n + tu];
                if (*slot == UINT32_MAX) {
                    *slot = pb.n;
                    if (vec_push(&pb, tb) || vec_push(&pu, tu)) goto oom;
                }
                xg2_brange r = {lo, hi, *slot};
                if (vec_push(&br, r)) goto oom;
            }
            if (B.br[j].hi < U.br[k].hi) j++;
            else k++;
        }
    }
    if (vec_push(&boff, br.n)) goto oom;
    xg2_loop_info loop = {0};
    loop.min = e.min;
    loop.max = e.max;
    loop.expr = expr;
    for (uint32_t j = U.boff[0]; j < U.boff[1]; j++) byteset_add_range(&loop.first, U.br[j].lo, U.br[j].hi);
    if ((rc = length_finish(&boff, &br, &fin, &tag, &loop, &P))) goto out;
    if (!P.n) { rc = length_error(ir, rule, "matches no string"); goto out; }
    rest = xg2__malloc(sizeof(uint32_t) * 2 * P.n);
    if (!rest) goto oom;
    int contiguous = 0;
    uint32_t slack = 0;
    if ((rc = length_rest(&P, rest, &contiguous, &slack))) goto out;
    if (contiguous) {
        if ((e.max >= 0 && rest[0] > (uint32_t)e.max) || (rest[1] != XG2_REST_ANY && rest[1] < (uint32_t)e.min)) {
            rc = length_error(ir, rule, "matches no string: its body has no string of that many units");
            goto out;
        }
        P.loops[0].rest_checked = 1;
        P.loops[0].slack = slack;
        P.rest = rest;
        rest = NULL;
        *out = P;
        memset(&P, 0, sizeof P);
        goto out;
    }
    /* The count written out: states (p, c), c the units so far (capped at min
     * when there is no maximum). */
    {
        uint32_t K = e.max >= 0 ? (uint32_t)e.max : (uint32_t)e.min;
        if ((uint64_t)P.n * (K + 1ull) > XG2_MAX_DFA_STATES) {
            rc = length_error(ir, rule, "is too large: its body's lengths are irregular (not every count between "
                                        "its shortest and longest), so the count is spelled out as states, past 20000");
            goto out;
        }
        xg2__free(map);
        map = xg2__malloc(sizeof(uint32_t) * P.n * (K + 1));
        if (!map) goto oom;
        memset(map, 0xFF, sizeof(uint32_t) * P.n * (K + 1));
        pb.n = pu.n = boff.n = br.n = fin.n = tag.n = 0;
        map[0] = 0;
        if (vec_push(&pb, 0) || vec_push(&pu, 0)) goto oom;
        for (uint32_t i = 0; i < pb.n; i++) {
            uint32_t p = pb.a[i], c = pu.a[i];
            if (vec_push(&boff, br.n) || vec_push(&fin, (uint8_t)(P.final[p] && c >= (uint32_t)e.min))) goto oom;
            for (uint32_t j = P.boff[p]; j < P.boff[p + 1]; j++) {
                uint32_t q = P.br[j].to, c2 = c + (P.tag[q] & 1u);
                if (e.max >= 0 && c2 > (uint32_t)e.max) continue;
                if (e.max < 0 && c2 > (uint32_t)e.min) c2 = (uint32_t)e.min;
                uint32_t *slot = &map[(size_t)q * (K + 1) + c2];
                if (*slot == UINT32_MAX) {
                    *slot = pb.n;
                    if (vec_push(&pb, q) || vec_push(&pu, c2)) goto oom;
                }
                xg2_brange r = {P.br[j].lo, P.br[j].hi, *slot};
                if (vec_push(&br, r)) goto oom;
            }
        }
        if (vec_push(&boff, br.n)) goto oom;
        tag.n = 0;
        for (uint32_t i = 0; i < fin.n; i++)
            if (vec_push(&tag, 0u)) goto oom;
        if ((rc = length_finish(&boff, &br, &fin, &tag, NULL, out))) goto out;
        if (!out->n) rc = length_error(ir, rule, "matches no string: its body has no string of that many units");
    }
    goto out;
oom:
    rc = XG2_NOMEM();
out:
    xg2__dfa_free(&B);
    xg2__dfa_free(&U);
    xg2__dfa_free(&P);
    xg2__free(map);
    xg2__free(rest);
    vec_free(&pb);
    vec_free(&pu);
    vec_free(&boff);
    vec_free(&tag);
    vec_free(&br);
    vec_free(&fin);
    if (rc) xg2__dfa_free(out);
    return rc;
}
