/*
 * grammar.c -- from normalised IR to the linked runtime grammar.
 *
 *   1. analyse references: strongly connected components of the rule graph
 *      (a rule's tail references to itself are loops, not recursion);
 *   2. decide inlining: small non-recursive rules without lookahead are
 *      expanded into their callers, children before parents;
 *   3. build a minimal DFA for every rule still referenced (from the root);
 *   4. link: global state ids, byte classes, transition table, rule edges;
 *   5. compile lookahead assertions to byte DFAs; compute nullable rules.
 */
#include <stdio.h>
#include <pthread.h>

#include "grammar.h"

#include "fsm.h"
#include "literal_fans.h"

XG2_HIDDEN int xg2__ebnf_parse(xg2_ir *ir, const char *text, size_t len, const char *root);

/* ---- reference analysis ---- */

typedef struct {
    xg2_u32vec off, adj; /* rule graph in CSR form */
    VEC(uint8_t) tail;   /* per edge: the reference is in tail position */
    VEC(uint8_t) loop;   /* per edge: the reference is inside a repetition */
    uint8_t *self_loop;  /* a non-tail reference to itself */
} rule_graph;

static int collect_refs(const xg2_ir *ir, uint32_t id, uint32_t self, int tail, int loop, rule_graph *gr,
                        uint8_t *self_loop, int depth) {
    if (depth > 8 * XG2_MAX_NEST_DEPTH) return xg2__fail(XG2_ERR_LIMIT, "grammar expression nested too deeply");
    const xg2_expr *e = &ir->exprs.a[id];
    switch (e->kind) {
    case XE_REF:
        if (e->a == self) {
            if (!tail) *self_loop = 1;
            return 0;
        }
        return vec_push(&gr->adj, e->a) || vec_push(&gr->tail, (uint8_t)tail) || vec_push(&gr->loop, (uint8_t)loop)
                   ? XG2_NOMEM() : 0;
    case XE_REPEAT: /* (an optional `x?` ends where it would: its tail references stay tail references) */
        return collect_refs(ir, e->a, self, tail && e->max == 1, loop || e->max < 0 || e->max > 1, gr, self_loop,
                            depth + 1);
    case XE_LENGTH: /* (its body is built into its own automaton: never a tail reference) */
    case XE_EXCEPT: /* (built as calls from inside the trie: never tail references) */
        for (uint32_t i = 0; i < (e->kind == XE_EXCEPT ? 3 : 2); i++) {
            int rc = collect_refs(ir, ir->pool.a[e->a + i], self, 0, loop, gr, self_loop, depth + 1);
            if (rc) return rc;
        }
        return 0;
    case XE_DISPATCH: /* (rule edges of its own automaton, taken again and again) */
        for (uint32_t i = 0; i < e->n; i++) {
            uint32_t r = ir->pool.a[e->a + 3 * i + 2];
            if (r & XG2_DEAD_TRIGGER) continue;
            if (r == self) { *self_loop = 1; continue; }
            if (vec_push(&gr->adj, r) || vec_push(&gr->tail, 0) || vec_push(&gr->loop, 1)) return XG2_NOMEM();
        }
        return 0;
    case XE_SEQ:
    case XE_CHOICE:
        for (uint32_t i = 0; i < e->n; i++) {
            int t = tail && (e->kind == XE_CHOICE || i + 1 == e->n);
            int rc = collect_refs(ir, ir->pool.a[e->a + i], self, t, loop, gr, self_loop, depth + 1);
            if (rc) return rc;
        }
        return 0;
    }
    return 0;
}

/* Tarjan's algorithm without recursion; components come out children first. */
static int scc(const rule_graph *gr, uint32_t n, uint32_t *comp, uint32_t *comp_size) {
    int rc = XG2_OK;
    int64_t *idx = xg2__malloc(sizeof(int64_t) * (n ? n : 1));
    int64_t *low = xg2__malloc(sizeof(int64_t) * (n ? n : 1));
    uint8_t *on = xg2__calloc(n ? n : 1, 1);
    xg2_u32vec st = {0}, cv = {0}, ci = {0};
    if (!idx || !low || !on) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t v = 0; v < n; v++) idx[v] = -1;
    int64_t counter = 0;
    uint32_t ncomp = 0;
    for (uint32_t root = 0; root < n; root++) {
        if (idx[root] >= 0) continue;
        idx[root] = low[root] = counter++;
        if (vec_push(&st, root) || vec_push(&cv, root) || vec_push(&ci, gr->off.a[root])) goto oom;
        on[root] = 1;
        while (cv.n) {
            uint32_t v = cv.a[cv.n - 1];
            if (ci.a[ci.n - 1] < gr->off.a[v + 1]) {
                uint32_t w = gr->adj.a[ci.a[ci.n - 1]++];
                if (idx[w] < 0) {
                    idx[w] = low[w] = counter++;
                    on[w] = 1;
                    if (vec_push(&st, w) || vec_push(&cv, w) || vec_push(&ci, gr->off.a[w])) goto oom;
                } else if (on[w] && idx[w] < low[v]) {
                    low[v] = idx[w];
                }
                continue;
            }
            cv.n--;
            ci.n--;
            if (cv.n) {
                uint32_t u = cv.a[cv.n - 1];
                if (low[v] < low[u]) low[u] = low[v];
            }
            if (low[v] == idx[v]) {
                uint32_t size = 0, x;
                do {
                    x = st.a[--st.n];
                    on[x] = 0;
                    comp[x] = ncomp;
                    size++;
                } while (x != v);
                comp_size[ncomp++] = size;
            }
        }
    }
    goto out;
oom:
    rc = XG2_NOMEM();
out:
    xg2__free(idx);
    xg2__free(low);
    xg2__free(on);
    vec_free(&st);
    vec_free(&cv);
    vec_free(&ci);
    return rc;
}

/* Rough NFA size of an expression if the rules marked in inl[] (NULL: none)
 * are expanded.  A repetition written out copy by copy whose copies would
 * pass XG2_UNROLL_BUDGET with those rules expanded keeps the references inside
 * it as rule edges (marked in flat[], which the automaton builder reads; the
 * IR's unroll test counted each reference as one state). */
static uint64_t est_size(const xg2_ir *ir, uint32_t id, const uint8_t *inl, const uint64_t *rsize, uint8_t *flat,
                         int depth) {
    const xg2_expr *e = &ir->exprs.a[id];
    uint64_t s = 1;
    if (depth > 8 * XG2_MAX_NEST_DEPTH) return UINT32_MAX;
    switch (e->kind) {
    case XE_BYTES: return e->n;
    case XE_CLASS: /* ASCII ranges are single edges; others add UTF-8 continuation states */
        for (uint32_t i = 0; i < e->n; i++)
            if (ir->pool.a[e->a + 2 * i + 1] >= 0x80 || (e->flags & XF_NEGATED)) return 12;
        return 1;
    case XE_REF: return inl && inl[e->a] ? rsize[e->a] : 1;
    case XE_DISPATCH: /* a state per trie node */
        for (uint32_t i = 0; i < e->n; i++) s += ir->pool.a[e->a + 3 * i + 1];
        for (uint32_t i = 0; i < (uint32_t)e->min; i++) s += ir->pool.a[e->a + 3 * e->n + 2 * i + 1];
        return s > UINT32_MAX ? UINT32_MAX : s;
    case XE_EXCEPT: /* a state per trie node, and each way out once */
        for (uint32_t i = 0; i < e->n; i++) s += ir->pool.a[e->a + 4 + 2 * i];
        for (uint32_t i = 0; i < 3; i++) s += est_size(ir, ir->pool.a[e->a + i], inl, rsize, flat, depth + 1);
        return s > UINT32_MAX ? UINT32_MAX : s;
    case XE_REPEAT: {
        if (e->flags & XF_COUNTED) return est_size(ir, e->a, inl, rsize, flat, depth + 1) + 3; /* a counted loop */
        uint64_t k = e->max >= 0 ? (uint64_t)e->max : (uint64_t)e->min + 1;
        uint64_t c = est_size(ir, e->a, inl, rsize, flat, depth + 1);
        if (inl && flat && k > 1 && c * k > XG2_UNROLL_BUDGET) {
            flat[id] = 1;
            c = est_size(ir, e->a, NULL, NULL, NULL, depth + 1);
        }
        s = c * (k ? k : 1) + 2;
        return s > UINT32_MAX ? UINT32_MAX : s;
    }
    case XE_SEQ:
    case XE_CHOICE:
        for (uint32_t i = 0; i < e->n; i++) {
            s += est_size(ir, ir->pool.a[e->a + i], inl, rsize, flat, depth + 1);
            if (s > UINT32_MAX) return UINT32_MAX;
        }
        return s;
    }
    return 1;
}

/* Right-linear regions (see fsm.h).  A component of the rule graph can be
 * built as part of an automaton when its rules are plain (no lookahead, no
 * counter) and reference each other only in tail position.  Components are
 * visited callers first: one whose every reference from outside is a tail
 * reference from a single region joins that region, so it is built once,
 * inside that region's automaton; any other starts a region of its own.
 * region[r] is the region (a component id), UINT32_MAX outside any.  A region
 * stops growing at XG2_REGION_MAX_NFA estimated states (a bigger component
 * stays in none): its automaton is built whole, minimisation included. */
static int find_regions(const xg2_ir *ir, const rule_graph *gr, const uint32_t *comp, const uint32_t *order,
                        const uint32_t *cstart, uint32_t *region) {
    uint32_t n = ir->rules.n, m = n ? n : 1;
    uint8_t *plain = xg2__malloc(m);                      /* per component */
    uint32_t *owner = xg2__malloc(sizeof(uint32_t) * m);  /* per component: its region */
    uint64_t *size = xg2__calloc(m, sizeof(uint64_t));    /* per region */
    uint64_t *own = xg2__calloc(m, sizeof(uint64_t));     /* per component */
    uint32_t *members = xg2__calloc(m, sizeof(uint32_t)); /* per region */
    uint32_t *in_off = xg2__calloc((size_t)n + 1, sizeof(uint32_t)); /* incoming edges (CSR) */
    uint32_t *in_edge = xg2__malloc(sizeof(uint32_t) * (gr->adj.n ? gr->adj.n : 1));
    uint32_t *src = xg2__malloc(sizeof(uint32_t) * (gr->adj.n ? gr->adj.n : 1));
    int rc = XG2_OK;
    if (!plain || !owner || !size || !own || !members || !in_off || !in_edge || !src) {
        rc = XG2_NOMEM();
        goto out;
    }
    memset(plain, 1, m);
    for (uint32_t r = 0; r < n; r++) {
        const xg2_rule_ir *ru = &ir->rules.a[r];
        if (ru->kind != RK_FSM || ru->lookahead >= 0 || gr->self_loop[r] || xg2__own_automaton(ir, r))
            plain[comp[r]] = 0;
        own[comp[r]] += est_size(ir, ru->body, NULL, NULL, NULL, 0);
        for (uint32_t j = gr->off.a[r]; j < gr->off.a[r + 1]; j++) {
            src[j] = r;
            in_off[gr->adj.a[j] + 1]++;
            if (comp[gr->adj.a[j]] == comp[r] && !gr->tail.a[j]) plain[comp[r]] = 0;
        }
    }
    for (uint32_t r = 0; r < n; r++) in_off[r + 1] += in_off[r];
    for (uint32_t j = 0; j < gr->adj.n; j++) in_edge[in_off[gr->adj.a[j]]++] = j;
    memmove(in_off + 1, in_off, sizeof(uint32_t) * n); /* the fill moved each start to the next */
    in_off[0] = 0;
    for (uint32_t c = n; c-- > 0;) { /* callers first */
        owner[c] = UINT32_MAX;
        if (cstart[c] == cstart[c + 1] || !plain[c] || own[c] > XG2_REGION_MAX_NFA) continue;
        uint32_t o = UINT32_MAX;
        int alone = 0, referenced = 0;
        for (uint32_t i = cstart[c]; i < cstart[c + 1] && !alone; i++) {
            uint32_t r = order[i];
            if (r == ir->root) alone = 1;
            for (uint32_t k = in_off[r]; k < in_off[r + 1] && !alone; k++) {
                uint32_t j = in_edge[k], u = src[j];
                if (comp[u] == c) continue;
                referenced = 1;
                uint32_t ou = owner[comp[u]];
                if (!gr->tail.a[j] || ou == UINT32_MAX || (o != UINT32_MAX && o != ou)) alone = 1;
                o = ou;
            }
        }
        if (alone || !referenced || size[o] + own[c] > XG2_REGION_MAX_NFA) o = c;
        owner[c] = o;
        size[o] += own[c];
        members[o] += cstart[c + 1] - cstart[c];
    }
    /* A region of one rule is just that rule. */
    for (uint32_t r = 0; r < n; r++) {
        uint32_t o = owner[comp[r]];
        region[r] = o != UINT32_MAX && members[o] > 1 ? o : UINT32_MAX;
    }
out:
    xg2__free(plain);
    xg2__free(owner);
    xg2__free(size);
    xg2__free(own);
    xg2__free(members);
    xg2__free(in_off);
    xg2__free(in_edge);
    xg2__free(src);
    return rc;
}

static int decide_inlining(const xg2_ir *ir, uint8_t *inl, uint8_t *flat, uint32_t *region, int use_regions) {
    uint32_t n = ir->rules.n;
    rule_graph gr = {0};
    int rc = XG2_OK;
    uint32_t *comp = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *csize = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *order = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *cstart = xg2__calloc((size_t)n + 1, sizeof(uint32_t)); /* component c: order[cstart[c] .. cstart[c + 1]) */
    uint64_t *rsize = xg2__calloc(n ? n : 1, sizeof(uint64_t));
    uint8_t *comp_inlined = xg2__calloc(n ? n : 1, 1); /* per component: a dispatcher of it is inlined */
    uint64_t *regsize = xg2__calloc(n ? n : 1, sizeof(uint64_t)); /* per region: its members' size */
    uint32_t *region_refs = xg2__calloc(n ? n : 1, sizeof(uint32_t));
    gr.self_loop = xg2__calloc(n ? n : 1, 1);
    if (!comp || !csize || !order || !cstart || !rsize || !comp_inlined || !regsize || !region_refs || !gr.self_loop) {
        rc = XG2_NOMEM();
        goto out;
    }
    for (uint32_t r = 0; r < n; r++) {
        if (vec_push(&gr.off, gr.adj.n)) { rc = XG2_NOMEM(); goto out; }
        if ((rc = collect_refs(ir, ir->rules.a[r].body, r, 1, 0, &gr, &gr.self_loop[r], 0))) goto out;
    }
    if (vec_push(&gr.off, gr.adj.n)) { rc = XG2_NOMEM(); goto out; }
    if ((rc = scc(&gr, n, comp, csize))) goto out;
    /* Visit rules children-first: component ids are already in that order
     * (a counting sort by component). */
    for (uint32_t r = 0; r < n; r++) cstart[comp[r] + 1]++;
    for (uint32_t c = 0; c < n; c++) cstart[c + 1] += cstart[c];
    for (uint32_t r = 0; r < n; r++) order[cstart[comp[r]]++] = r;
    memmove(cstart + 1, cstart, sizeof(uint32_t) * n); /* the fill moved each start to the next */
    cstart[0] = 0;
    if (use_regions) {
        if ((rc = find_regions(ir, &gr, comp, order, cstart, region))) goto out;
    } else {
        for (uint32_t r = 0; r < n; r++) region[r] = UINT32_MAX;
    }
    /* Per rule: its references from rules in regions, or UINT32_MAX when a
     * repetition calls it anywhere. */
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t j = gr.off.a[r]; j < gr.off.a[r + 1]; j++) {
            uint32_t t = gr.adj.a[j];
            if (gr.loop.a[j]) region_refs[t] = UINT32_MAX;
            else if (region[r] != UINT32_MAX && region_refs[t] != UINT32_MAX) region_refs[t]++;
        }
    }
    for (uint32_t k = 0; k < n; k++) {
        uint32_t r = order[k];
        const xg2_rule_ir *ru = &ir->rules.a[r];
        if (region[r] != UINT32_MAX && region[r] != comp[r]) { /* built inside its region only */
            regsize[region[r]] += est_size(ir, ru->body, inl, rsize, flat, 0);
            continue;
        }
        if (region[r] != UINT32_MAX) {
            /* The region's entry component (callers come after their callees
             * in `order`, so its other members are counted): inlined whole or
             * not at all, each entry sized as the region. */
            uint32_t m = csize[comp[r]];
            uint64_t total = regsize[comp[r]];
            for (uint32_t i = k; i < k + m; i++) total += est_size(ir, ir->rules.a[order[i]].body, inl, rsize, flat, 0);
            for (uint32_t i = k; i < k + m; i++) {
                rsize[order[i]] = total;
                inl[order[i]] = order[i] != ir->root && total <= XG2_INLINE_MAX_NFA;
            }
            k += m - 1;
            continue;
        }
        rsize[r] = est_size(ir, ru->body, inl, rsize, flat, 0);
        /* A recursive rule is expanded into its callers (once: the builder never
         * expands a rule into itself) only if it is a dispatcher -- a choice, like
         * JSON's value -- so that what follows each alternative stays in the
         * caller's automaton.  Other recursive rules stay rules. */
        int recursive = csize[comp[r]] > 1 || gr.self_loop[r];
        int dispatcher = ir->exprs.a[ru->body].kind == XE_CHOICE;
        /* One dispatcher per cycle of rules at most: sizes of cycle members not
         * yet visited are unknown here, and dispatchers expanded into each other
         * (the remainder automaton of a multipleOf, say) would multiply. */
        int cycle_taken = csize[comp[r]] > 1 && dispatcher && comp_inlined[comp[r]];
        /* A rule that right-linear regions would copy past a budget (the value
         * type of hundreds of properties of one object) stays one rule: each
         * copy would be determinised, minimised and tabled again.  Not one that
         * a repetition calls: a call per iteration (a string's characters)
         * would leave the plain DFA walk of the mask. */
        int many_copies = !recursive && region_refs[r] != UINT32_MAX &&
                          rsize[r] * region_refs[r] > XG2_REGION_COPIES_MAX_NFA;
        /* A Length rule counts in its own items, a TagDispatch is an automaton
         * built whole: never expanded into a caller.  Nor are a TokenTagDispatch's
         * tags: a rule of their own is keyed as a tag rule (residual keys, fans). */
        inl[r] = ru->kind == RK_FSM && ru->lookahead < 0 && r != ir->root && (!recursive || dispatcher) &&
                 !xg2__own_automaton(ir, r) && !ru->tagged &&
                 !cycle_taken && !many_copies && rsize[r] <= XG2_INLINE_MAX_NFA;
        if (inl[r] && recursive) comp_inlined[comp[r]] = 1;
    }
    /* A choice that inlining would make huge -- the tags of a request's tool set, each
     * with its arguments' grammar -- keeps its alternatives' rules as rules: each
     * rule's automaton (and its token masks) is then the same in every grammar that
     * uses it and comes from the caches, and only the choice, unique to its grammar,
     * is determinised (XGrammar-2 §3.3).  Small helpers stay inlined. */
    for (uint32_t r = 0; r < n; r++) {
        if (ir->exprs.a[ir->rules.a[r].body].kind != XE_CHOICE || rsize[r] <= XG2_CHOICE_INLINE_MAX_NFA) continue;
        for (uint32_t j = gr.off.a[r]; j < gr.off.a[r + 1]; j++) {
            uint32_t t = gr.adj.a[j];
            /* (a region is inlined whole or not at all: its entry may go) */
            if (inl[t] && (region[t] == UINT32_MAX || region[t] == comp[t]) && csize[comp[t]] == 1 && !gr.self_loop[t] &&
                rsize[t] >= XG2_CHOICE_KEEP_INLINED_NFA)
                inl[t] = 0;
        }
    }
    /* The child of a counted repetition is entered by the parser, not inlined. */
    for (uint32_t r = 0; r < n; r++)
        if (ir->rules.a[r].kind == RK_REPEAT) inl[ir->exprs.a[ir->exprs.a[ir->rules.a[r].body].a].a] = 0;
out:
    xg2__free(comp_inlined);
    xg2__free(regsize);
    xg2__free(region_refs);
    xg2__free(comp);
    xg2__free(csize);
    xg2__free(order);
    xg2__free(cstart);
    xg2__free(rsize);
    xg2__free(gr.self_loop);
    vec_free(&gr.off);
    vec_free(&gr.adj);
    vec_free(&gr.tail);
    vec_free(&gr.loop);
    return rc;
}

/* ---- lookahead assertions ---- */

/* Each lookahead becomes a byte DFA with dense 256-entry rows. */
static int build_lookaheads(xg2_grammar *g, const uint8_t *want) {
    const xg2_ir *ir = &g->ir;
    VEC(int32_t) trans = {0};
    VEC(uint8_t) fin = {0};
    xg2_u32vec start = {0};
    xg2_dfa la = {0};
    int rc = XG2_OK;
    for (uint32_t r = 0; r < ir->rules.n && !rc; r++) {
        if (!want[r] || ir->rules.a[r].lookahead < 0) continue;
        if ((rc = xg2__fsm_build(ir, (uint32_t)ir->rules.a[r].lookahead, NULL, NULL, UINT32_MAX, 1, &la))) {
            char msg[900];
            snprintf(msg, sizeof msg, "%s", xg2_last_error());
            rc = xg2__fail(rc, "in the lookahead assertion of rule \"%s\": %s", xg2__ir_name(ir, r), msg);
            break;
        }
        if (la.n == 0) {
            rc = xg2__fail(XG2_ERR_GRAMMAR, "the lookahead assertion of rule \"%s\" matches nothing",
                           xg2__ir_name(ir, r));
            break;
        }
        if (!la.final[0]) { /* a lookahead that matches "" asserts nothing */
            uint32_t base = fin.n;
            if (vec_reserve(&trans, (uint64_t)(base + la.n) * 256) || vec_reserve(&fin, (uint64_t)base + la.n) ||
                vec_push(&start, base)) {
                rc = XG2_NOMEM();
                break;
            }
            for (uint32_t s = 0; s < la.n; s++) {
                int32_t *row = trans.a + (size_t)(base + s) * 256;
                for (int c = 0; c < 256; c++) row[c] = -1;
                for (uint32_t j = la.boff[s]; j < la.boff[s + 1]; j++)
                    for (uint32_t c = la.br[j].lo; c <= la.br[j].hi; c++) row[c] = (int32_t)(base + la.br[j].to);
                fin.a[base + s] = la.final[s];
            }
            trans.n = (base + la.n) * 256;
            fin.n = base + la.n;
            g->rules[r].lookahead = (int32_t)(start.n - 1);
        }
        xg2__dfa_free(&la);
    }
    xg2__dfa_free(&la);
    g->la_trans = trans.a;
    g->la_final = fin.a;
    g->la_start = start.a;
    g->n_la = start.n;
    g->n_la_states = fin.n;
    return rc;
}

/* ---- FIRST and FOLLOW byte sets ---- */

static int bs_or(xg2_byteset *a, const xg2_byteset *b) {
    int changed = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t w = a->w[i] | b->w[i];
        changed |= w != a->w[i];
        a->w[i] = w;
    }
    return changed;
}

/* Fixpoint rounds sweep the states forwards and backwards in turn, so chains
 * of rules propagate in a few rounds whichever way they are numbered. */
#define SWEEP(i) (round & 1 ? ns - 1 - (i) : (i))

/* first[s]: bytes that can start what state s still matches (through rule
 * edges and nullable rules); follow[r]: bytes that can come after rule r.
 * Both are least fixpoints. */
static int compute_follow(xg2_grammar *g, const xg2_dfa *dfa) {
    uint32_t ns = g->n_states, nr = g->n_rules;
    uint8_t *ends = NULL;
    xg2_byteset *first = xg2__calloc(ns ? ns : 1, sizeof(xg2_byteset));
    g->follow = xg2__calloc(nr ? nr : 1, sizeof(xg2_byteset));
    if (!first || !g->follow) { xg2__free(first); return XG2_NOMEM(); }
    g->follow[g->root] = g->root_follow; /* (what a grammar linked in as a piece is followed by) */
    for (uint32_t r = 0; r < nr; r++) {
        const xg2_rule *rt = &g->rules[r];
        if (rt->start == XG2_NONE || rt->kind != RK_FSM) continue;
        const xg2_dfa *d = &dfa[r];
        for (uint32_t i = 0; i < d->n; i++)
            for (uint32_t j = d->boff[i]; j < d->boff[i + 1]; j++)
                byteset_add_range(&first[rt->start + i], d->br[j].lo, d->br[j].hi);
    }
    for (int changed = 1, round = 0; changed; round++) {
        int rc = xg2__budget_check("computing FIRST and FOLLOW sets", NULL);
        if (rc) { xg2__free(first); xg2__free(ends); return rc; }
        changed = 0;
        for (uint32_t i = 0; i < ns; i++) {
            uint32_t s = SWEEP(i);
            const xg2_state *st = &g->states[s];
            if (st->flags & SF_REPEAT) {
                const xg2_rule *rr = &g->rules[st->rule];
                changed |= bs_or(&first[s], &first[g->rules[rr->child].start]);
                continue;
            }
            const xg2_ref *e = g->refs_tab + st->ref_off;
            for (uint32_t j = 0; j < st->ref_n; j++) {
                changed |= bs_or(&first[s], &first[g->rules[e[j].rule].start]);
                if (g->rules[e[j].rule].nullable) changed |= bs_or(&first[s], &first[e[j].to]);
            }
        }
    }
    if (g->rules[g->root].start != XG2_NONE) g->root_first = first[g->rules[g->root].start];
    /* follow: after R in parent P at q --R--> q': first[q'], and follow[P] when
     * P can end at q'; a repetition's child is followed by itself or by what
     * follows the repetition. */
    ends = xg2__calloc(ns ? ns : 1, 1); /* state can complete its rule through nullable edges */
    if (!ends) { xg2__free(first); return XG2_NOMEM(); }
    for (uint32_t s = 0; s < ns; s++) ends[s] = (g->states[s].flags & SF_FINAL) != 0;
    for (int changed = 1, round = 0; changed; round++) {
        int rc = xg2__budget_check("computing FIRST and FOLLOW sets", NULL);
        if (rc) { xg2__free(first); xg2__free(ends); return rc; }
        changed = 0;
        for (uint32_t i = 0; i < ns; i++) {
            uint32_t s = SWEEP(i);
            if (ends[s] || (g->states[s].flags & SF_REPEAT)) continue;
            const xg2_ref *e = g->refs_tab + g->states[s].ref_off;
            for (uint32_t j = 0; j < g->states[s].ref_n && !ends[s]; j++)
                if (g->rules[e[j].rule].nullable && ends[e[j].to]) ends[s] = changed = 1;
        }
    }
    for (int changed = 1, round = 0; changed; round++) {
        int rc = xg2__budget_check("computing FIRST and FOLLOW sets", NULL);
        if (rc) { xg2__free(first); xg2__free(ends); return rc; }
        changed = 0;
        for (uint32_t i = 0; i < ns; i++) {
            uint32_t s = SWEEP(i);
            const xg2_state *st = &g->states[s];
            if (st->flags & SF_REPEAT) {
                const xg2_rule *rr = &g->rules[st->rule];
                changed |= bs_or(&g->follow[rr->child], &first[g->rules[rr->child].start]);
                changed |= bs_or(&g->follow[rr->child], &g->follow[st->rule]);
                continue;
            }
            const xg2_ref *e = g->refs_tab + st->ref_off;
            for (uint32_t j = 0; j < st->ref_n; j++) {
                changed |= bs_or(&g->follow[e[j].rule], &first[e[j].to]);
                if (ends[e[j].to]) changed |= bs_or(&g->follow[e[j].rule], &g->follow[st->rule]);
            }
        }
    }
    /* A rule's own lookahead limits what may follow it to the lookahead's first bytes. */
    for (uint32_t r = 0; r < nr; r++) {
        int32_t la = g->rules[r].lookahead;
        if (la < 0) continue;
        xg2_byteset lf = {{0, 0, 0, 0}};
        const int32_t *row = g->la_trans + (size_t)g->la_start[la] * 256;
        for (int c = 0; c < 256; c++)
            if (row[c] >= 0) byteset_add(&lf, (unsigned)c);
        for (int i = 0; i < 4; i++) g->follow[r].w[i] &= lf.w[i];
    }
    xg2__free(ends);
    xg2__free(first);
    return XG2_OK;
}
#undef SWEEP

/* ---- structural keys (the cross-grammar cache) ---- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The rule-level part of a rule's key: kind, budgets, lookahead automaton. */
static void rule_header(const xg2_grammar *g, uint32_t r, uint64_t h[2]) {
    const xg2_rule *rt = &g->rules[r];
    h[0] = 0x243f6a8885a308d3ull;
    h[1] = 0x13198a2e03707344ull;
#define MIX2(v) do { uint64_t v_ = (v); h[0] = xg2__mix64(h[0], v_); h[1] = xg2__mix64(h[1], v_); } while (0)
    MIX2(rt->kind);
    if (rt->kind == RK_REPEAT) {
        MIX2((uint64_t)(uint32_t)rt->min << 32 | (uint32_t)rt->max);
        return;
    }
    if (rt->max_tokens >= 0 || rt->max_chars >= 0) /* (masks of items calling it depend on its budget) */
        MIX2((uint64_t)(uint32_t)rt->max_tokens << 32 | (uint32_t)rt->max_chars);
    if (rt->lookahead >= 0) {
        uint32_t base = g->la_start[rt->lookahead];
        uint32_t end = (uint32_t)rt->lookahead + 1 < g->n_la ? g->la_start[rt->lookahead + 1] : g->n_la_states;
        for (uint32_t q = base; q < end; q++) {
            MIX2(g->la_final[q]);
            for (int c = 0; c < 256; c++) MIX2((uint64_t)(uint32_t)(g->la_trans[(size_t)q * 256 + c] - (int32_t)base));
        }
    }
#undef MIX2
}

/* What a state is by itself: flags, loop (bounds, first bytes, Length rest)
 * and the number of its rule edges; its edges' labels and targets are mixed
 * in by the callers (targets as rule-local ids or as their own keys). */
static void state_local(const xg2_grammar *g, uint32_t s, uint64_t h[2]) {
    const xg2_state *st = &g->states[s];
#define MIX2(v) do { uint64_t v_ = (v); h[0] = xg2__mix64(h[0], v_); h[1] = xg2__mix64(h[1], v_); } while (0)
    MIX2((uint64_t)(st->flags & (SF_FINAL | SF_BYTES | SF_REFS | SF_TOKEN)) << 32 | st->ref_n);
    if (st->loop) {
        const xg2_loop *l = &g->loops[(st->loop >> 1) - 1];
        MIX2((uint64_t)(st->loop & 1) << 63 | (uint64_t)(uint32_t)l->min << 32 | (uint32_t)l->max);
        for (int w = 0; w < 4; w++) MIX2(l->first.w[w]);
        if (l->rest_checked) MIX2((uint64_t)g->rest[2 * (size_t)s] << 32 | g->rest[2 * (size_t)s + 1]);
    }
#undef MIX2
}

/* Hash of a rule's own automaton: states in canonical order, byte ranges with
 * targets, rule edges without their targets' identity (those come in by
 * refinement).  Two seeds give 128 bits. */
static void rule_h0(const xg2_grammar *g, uint32_t r, const xg2_dfa *d, uint64_t out[2]) {
    const xg2_rule *rt = &g->rules[r];
    uint64_t h[2];
    rule_header(g, r, h);
    if (rt->kind != RK_REPEAT) {
#define MIX2(v) do { uint64_t v_ = (v); h[0] = xg2__mix64(h[0], v_); h[1] = xg2__mix64(h[1], v_); } while (0)
        MIX2(rt->n_states);
        for (uint32_t i = 0; i < rt->n_states; i++) {
            uint32_t s = rt->start + i;
            state_local(g, s, h);
            /* maximal byte runs with one target (the DFA's ranges are merged so):
             * independent of how classes are cut */
            for (uint32_t j = d->boff[i]; j < d->boff[i + 1]; j++)
                MIX2((uint64_t)d->br[j].lo << 40 | (uint64_t)d->br[j].hi << 32 | d->br[j].to);
            const xg2_ref *e = g->refs_tab + g->states[s].ref_off;
            for (uint32_t j = 0; j < g->states[s].ref_n; j++) MIX2(e[j].to - rt->start);
        }
#undef MIX2
    }
    out[0] = h[0];
    out[1] = h[1];
}

/* A rule key and what may follow the rule, as one key. */
static void with_follow(const uint64_t h[2], const xg2_byteset *follow, uint64_t out[2]) {
    out[0] = h[0];
    out[1] = h[1];
    for (int w = 0; w < 4; w++) {
        out[0] = xg2__mix64(out[0], follow->w[w]);
        out[1] = xg2__mix64(out[1], follow->w[w] ^ 0x5bd1e995u);
    }
}

/* ---- residual keys ----
 * A state's masks depend only on what can come after it: the part of its
 * rule's automaton it reaches (the rules it calls by their keys), the rule's
 * header and its FOLLOW set.  So a state is keyed by that suffix, and states
 * with equal suffixes in different rules share masks -- the `</function>` that
 * ends a tool call in every request's tag group, or a tool name's last bytes
 * once the name is the only one left.  Keys are built from the sinks up over
 * the strongly connected components (Tarjan's, iterative): a state outside
 * cycles, or whose only cycle is a loop on itself, is keyed by itself and its
 * targets' keys; the states of larger cycles keep the rule-wide key (the rule
 * key with the state's index), which is exact but shared only by equal rules.
 * (Used for the rules a TagDispatch calls: see compute_skeys.) */
typedef struct {
    uint32_t *index, *low, *stack, *cs_state, *cs_edge;
    uint8_t *on;
    uint64_t (*res)[2];
    uint32_t cap;
} scc_work;

static void scc_work_free(scc_work *w) {
    xg2__free(w->index);
    xg2__free(w->low);
    xg2__free(w->stack);
    xg2__free(w->cs_state);
    xg2__free(w->cs_edge);
    xg2__free(w->on);
    xg2__free(w->res);
    memset(w, 0, sizeof *w);
}

static int scc_work_reserve(scc_work *w, uint32_t n) {
    if (n <= w->cap) return XG2_OK;
    scc_work_free(w);
    w->index = xg2__malloc(sizeof(uint32_t) * n);
    w->low = xg2__malloc(sizeof(uint32_t) * n);
    w->stack = xg2__malloc(sizeof(uint32_t) * n);
    w->cs_state = xg2__malloc(sizeof(uint32_t) * n);
    w->cs_edge = xg2__malloc(sizeof(uint32_t) * n);
    w->on = xg2__malloc(n);
    w->res = xg2__malloc(sizeof *w->res * n);
    if (!w->index || !w->low || !w->stack || !w->cs_state || !w->cs_edge || !w->on || !w->res) {
        scc_work_free(w);
        return XG2_NOMEM();
    }
    w->cap = n;
    return XG2_OK;
}

#define RES_SELF 0x73656c666c6f6f70ull /* a target that is the state itself */

/* The key of local state v (a component of its own) from its targets' keys. */
static void residual_of(const xg2_grammar *g, uint32_t r, const xg2_dfa *d, const uint64_t (*h)[2],
                        const uint64_t head[2], scc_work *w, uint32_t v) {
    const xg2_rule *rt = &g->rules[r];
    const xg2_state *st = &g->states[rt->start + v];
    uint64_t k[2] = {head[0], head[1]};
    state_local(g, rt->start + v, k);
    for (uint32_t j = d->boff[v]; j < d->boff[v + 1]; j++) {
        uint32_t to = d->br[j].to;
        const xg2_state *tt = &g->states[rt->start + to];
        uint64_t label = (uint64_t)d->br[j].lo << 40 | (uint64_t)d->br[j].hi << 32 |
                         (uint64_t)(st->loop && (st->loop >> 1) == (tt->loop >> 1));
        k[0] = xg2__mix64(xg2__mix64(k[0], label), to == v ? RES_SELF : w->res[to][0]);
        k[1] = xg2__mix64(xg2__mix64(k[1], label), to == v ? RES_SELF : w->res[to][1]);
    }
    const xg2_ref *e = g->refs_tab + st->ref_off;
    for (uint32_t j = 0; j < st->ref_n; j++) {
        uint32_t to = e[j].to - rt->start;
        k[0] = xg2__mix64(xg2__mix64(k[0], h[e[j].rule][0]), to == v ? RES_SELF : w->res[to][0]);
        k[1] = xg2__mix64(xg2__mix64(k[1], h[e[j].rule][1]), to == v ? RES_SELF : w->res[to][1]);
    }
    w->res[v][0] = k[0];
    w->res[v][1] = k[1];
}

/* Local state v's k-th edge target (byte edges first, then rule edges). */
static inline uint32_t edge_target(const xg2_grammar *g, const xg2_rule *rt, const xg2_dfa *d, uint32_t v, uint32_t k) {
    uint32_t nb = d->boff[v + 1] - d->boff[v];
    if (k < nb) return d->br[d->boff[v] + k].to;
    return g->refs_tab[g->states[rt->start + v].ref_off + (k - nb)].to - rt->start;
}

/* Residual keys of rule r's states into its run of g->skey_tab (`key`: the rule-wide key). */
static int residual_keys(xg2_grammar *g, uint32_t r, const xg2_dfa *d, const uint64_t (*h)[2], const uint64_t key[2],
                         scc_work *w) {
    const xg2_rule *rt = &g->rules[r];
    uint32_t n = rt->n_states, next = 0, sp = 0, csp = 0;
    int rc = scc_work_reserve(w, n);
    if (rc) return rc;
    uint64_t head[2], tagged[2];
    rule_header(g, r, head);
    head[0] = xg2__mix64(head[0], 0x7265736964756531ull); /* (apart from rule-wide keys) */
    head[1] = xg2__mix64(head[1], 0x7265736964756532ull);
    with_follow(head, &g->follow[r], tagged);
    for (uint32_t i = 0; i < n; i++) w->index[i] = UINT32_MAX;
    for (uint32_t root = 0; root < n; root++) {
        if (w->index[root] != UINT32_MAX) continue;
        w->index[root] = w->low[root] = next++;
        w->stack[sp++] = root;
        w->on[root] = 1;
        w->cs_state[csp] = root;
        w->cs_edge[csp++] = 0;
        while (csp) {
            uint32_t v = w->cs_state[csp - 1], k = w->cs_edge[csp - 1];
            if (k < (d->boff[v + 1] - d->boff[v]) + g->states[rt->start + v].ref_n) {
                w->cs_edge[csp - 1]++;
                uint32_t u = edge_target(g, rt, d, v, k);
                if (w->index[u] == UINT32_MAX) {
                    w->index[u] = w->low[u] = next++;
                    w->stack[sp++] = u;
                    w->on[u] = 1;
                    w->cs_state[csp] = u;
                    w->cs_edge[csp++] = 0;
                } else if (w->on[u] && w->index[u] < w->low[v]) {
                    w->low[v] = w->index[u];
                }
                continue;
            }
            csp--;
            if (csp && w->low[v] < w->low[w->cs_state[csp - 1]]) w->low[w->cs_state[csp - 1]] = w->low[v];
            if (w->low[v] != w->index[v]) continue;
            uint32_t top = sp;
            do w->on[w->stack[--sp]] = 0; while (w->stack[sp] != v);
            if (top - sp == 1) {
                residual_of(g, r, d, h, tagged, w, v);
            } else {
                for (uint32_t j = sp; j < top; j++) {
                    w->res[w->stack[j]][0] = xg2__mix64(key[0], w->stack[j]);
                    w->res[w->stack[j]][1] = xg2__mix64(key[1], w->stack[j]);
                }
            }
        }
    }
    memcpy(g->skey_tab + rt->keys_at - 1, w->res, sizeof *w->res * n);
    return XG2_OK;
}

/* Whether rule rt's states are keyed one by one (skey_tab): a TagDispatch's, and
 * the rules one calls (tag_rule: residual keys) but repetitions. */
static int keyed_by_state(const xg2_rule *rt, int tag_rule) {
    return rt->start != XG2_NONE && (rt->dispatch || (tag_rule && rt->kind != RK_REPEAT));
}

/* Rule keys refined until stable: h_{i+1}(r) = mix(h0(r), h_i of the rules r
 * references, in edge order) -- equal keys after the last round mean equal
 * languages of the whole reference structure, cycles included. */
static int compute_skeys(xg2_grammar *g, const xg2_dfa *dfa) {
    uint32_t nr = g->n_rules;
    uint64_t (*h0)[2] = xg2__malloc(sizeof *h0 * (nr ? nr : 1));
    uint64_t (*h)[2] = xg2__malloc(sizeof *h * (nr ? nr : 1));
    uint64_t (*hn)[2] = xg2__malloc(sizeof *hn * (nr ? nr : 1));
    uint64_t *sorted = xg2__malloc(sizeof(uint64_t) * (nr ? nr : 1));
    scc_work scc = {0};
    uint8_t *tag_rule = NULL;
    int rc = XG2_OK;
    if (!h0 || !h || !hn || !sorted) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t r = 0; r < nr; r++) {
        if (g->rules[r].start == XG2_NONE) { h0[r][0] = h0[r][1] = 0; continue; }
        if (g->ir.rules.a[r].ext) { /* a piece linked in later: keyed as in its own grammar */
            memcpy(h0[r], g->ext[g->ir.rules.a[r].ext - 1]->root_h, sizeof h0[r]);
            continue;
        }
        rule_h0(g, r, &dfa[r], h0[r]);
    }
    memcpy(h, h0, sizeof *h * nr);
    uint32_t classes = 0;
    for (uint32_t round = 0; round <= nr; round++) {
        for (uint32_t r = 0; r < nr; r++) {
            const xg2_rule *rt = &g->rules[r];
            hn[r][0] = h0[r][0];
            hn[r][1] = h0[r][1];
            if (rt->start == XG2_NONE || g->ir.rules.a[r].ext) continue;
            if (rt->kind == RK_REPEAT) {
                hn[r][0] = xg2__mix64(hn[r][0], h[rt->child][0]);
                hn[r][1] = xg2__mix64(hn[r][1], h[rt->child][1]);
                continue;
            }
            /* (a rule's rule edges are one run of refs_tab, in state order) */
            const xg2_state *last = &g->states[rt->start + rt->n_states - 1];
            for (uint32_t j = g->states[rt->start].ref_off; j < last->ref_off + last->ref_n; j++) {
                hn[r][0] = xg2__mix64(hn[r][0], h[g->refs_tab[j].rule][0]);
                hn[r][1] = xg2__mix64(hn[r][1], h[g->refs_tab[j].rule][1]);
            }
        }
        memcpy(h, hn, sizeof *h * nr);
        /* Stable once the number of distinct keys stops growing. */
        for (uint32_t r = 0; r < nr; r++) sorted[r] = h[r][0];
        if (nr > 1) qsort(sorted, nr, sizeof(uint64_t), cmp_u64);
        uint32_t distinct = nr ? 1 : 0;
        for (uint32_t i = 1; i < nr; i++) distinct += sorted[i] != sorted[i - 1];
        if (distinct == classes && round > 0) break;
        classes = distinct;
        if (round >= 64) break; /* deep reference chains: 64 levels of context is plenty */
    }
    memcpy(g->root_h, h[g->root], sizeof g->root_h);
    /* Residual keys (see above) for the rules a TagDispatch calls: the tags,
     * whose suffixes recur across requests with other tool sets (elsewhere a
     * suffix rarely goes without the rest of its rule, and they cost a second
     * pass over the automaton at every compile). */
    tag_rule = xg2__calloc(nr ? nr : 1, 1);
    if (!tag_rule) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t r = 0; r < nr; r++) {
        const xg2_rule *rt = &g->rules[r];
        if (rt->tagged) tag_rule[r] = 1; /* (a TokenTagDispatch is token edges and calls: no rule of its own) */
        if (!rt->dispatch || rt->start == XG2_NONE) continue;
        const xg2_state *last = &g->states[rt->start + rt->n_states - 1]; /* (its rule edges: one run) */
        for (uint32_t j = g->states[rt->start].ref_off; j < last->ref_off + last->ref_n; j++)
            tag_rule[g->refs_tab[j].rule] = 1;
    }
    /* Keyed state by state (in skey_tab): the dispatches and the residual rules. */
    uint64_t n_tab = 0;
    for (uint32_t r = 0; r < nr; r++)
        if (keyed_by_state(&g->rules[r], tag_rule[r])) n_tab += g->rules[r].n_states;
    g->skey_tab = xg2__malloc(sizeof *g->skey_tab * (n_tab ? n_tab : 1));
    if (!g->skey_tab) { rc = XG2_NOMEM(); goto out; }
    g->n_skey_tab = (uint32_t)n_tab;
    uint32_t at = 0;
    for (uint32_t r = 0; r < nr && !rc; r++) {
        xg2_rule *rt = &g->rules[r];
        if (rt->start == XG2_NONE) continue;
        uint64_t own[2];
        with_follow(h[r], &g->follow[r], rt->key);
        rt->keys_at = 0;
        if (!keyed_by_state(rt, tag_rule[r])) continue;
        rt->keys_at = at + 1;
        at += rt->n_states;
        if (!rt->dispatch) {
            rc = residual_keys(g, r, &dfa[r], (const uint64_t(*)[2])h, rt->key, &scc);
            continue;
        }
        /* A TagDispatch's free-text states (no rule edges) are keyed by the
         * dispatch's own automaton alone (h0, tagged apart): their walks stop
         * where a tag begins (maskcache.c), so grammars with other tags share them. */
        uint64_t tagged[2] = {xg2__mix64(h0[r][0], 0x6f70617175650001ull), xg2__mix64(h0[r][1], 0x6f70617175650002ull)};
        with_follow(tagged, &g->follow[r], own);
        for (uint32_t i = 0; i < rt->n_states; i++) {
            const uint64_t *k = !(g->states[rt->start + i].flags & (SF_REFS | SF_REPEAT)) ? own : rt->key;
            g->skey_tab[rt->keys_at - 1 + i][0] = xg2__mix64(k[0], i);
            g->skey_tab[rt->keys_at - 1 + i][1] = xg2__mix64(k[1], i);
        }
    }
    if (!rc) rc = xg2__fans_build(g, dfa, tag_rule);
out:
    scc_work_free(&scc);
    xg2__free(tag_rule);
    xg2__free(h0);
    xg2__free(h);
    xg2__free(hn);
    xg2__free(sorted);
    return rc;
}

/* ---- linking ---- */

/* The bytes of each group (xg2__byte_group), made once. */
static xg2_byteset group_bytes[XG2_N_GROUPS];
static pthread_once_t group_once = PTHREAD_ONCE_INIT;
static void make_group_bytes(void) {
    for (unsigned c = 0; c < 256; c++) byteset_add(&group_bytes[xg2__byte_group(c)], c);
}

uint64_t xg2__whole_groups(const xg2_byteset *bytes) {
    pthread_once(&group_once, make_group_bytes);
    uint64_t in = 0;
    for (unsigned k = 0; k < XG2_N_GROUPS; k++) {
        const uint64_t *w = group_bytes[k].w;
        if (!((w[0] & ~bytes->w[0]) | (w[1] & ~bytes->w[1]) | (w[2] & ~bytes->w[2]) | (w[3] & ~bytes->w[3])))
            in |= 1ull << k;
    }
    return in;
}

/* The byte classes of every FSM state: the coarsest split of 0..255 its byte
 * edges respect (a state in a key literal tells 3 classes apart, where its rule
 * may tell 70).  Equal splits share one class map; a state's row has one entry
 * per class of its map, so the table stays near the edges' count. */
static int state_classes(xg2_grammar *g, const xg2_dfa *dfa, const uint8_t *want, uint64_t *n_trans) {
    const xg2_ir *ir = &g->ir;
    uint32_t cap = 64;
    uint32_t *tab = xg2__calloc(cap, sizeof(uint32_t)); /* open addressing: map id + 1, 0 = empty */
    VEC(uint64_t) hashes = {0};
    VEC(xg2_byteset) cuts = {0};
    VEC(uint8_t) maps = {0};
    uint64_t total = 0;
    int rc = tab ? XG2_OK : XG2_NOMEM();
    for (uint32_t r = 0; r < ir->rules.n && !rc; r++) {
        if (!want[r] || g->rules[r].kind != RK_FSM) continue;
        const xg2_dfa *d = &dfa[r];
        for (uint32_t s = 0; s < d->n && !rc; s++) {
            xg2_byteset cut = {{1}}; /* a class starts at byte 0 and at every edge boundary */
            for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) {
                byteset_add(&cut, d->br[j].lo);
                if (d->br[j].hi < 255) byteset_add(&cut, d->br[j].hi + 1u);
            }
            uint64_t h = xg2__mix64(xg2__mix64(cut.w[0], cut.w[1]), xg2__mix64(cut.w[2], cut.w[3]));
            uint32_t i = (uint32_t)h & (cap - 1);
            for (; tab[i]; i = (i + 1) & (cap - 1))
                if (hashes.a[tab[i] - 1] == h && !memcmp(&cuts.a[tab[i] - 1], &cut, sizeof cut)) break;
            if (!tab[i]) { /* a new split: its map */
                if (vec_push(&hashes, h) || vec_push(&cuts, cut) || vec_reserve(&maps, 256ull * cuts.n)) {
                    rc = XG2_NOMEM();
                    break;
                }
                uint8_t *cm = maps.a + maps.n;
                unsigned c = 0, from = 0; /* class c covers bytes from .. the next cut */
                for (unsigned b = byteset_next(&cut, 1); b < 256; b = byteset_next(&cut, b + 1), c++) {
                    memset(cm + from, (int)c, b - from);
                    from = b;
                }
                memset(cm + from, (int)c, 256 - from);
                maps.n += 256;
                tab[i] = cuts.n;
                if ((uint64_t)cuts.n * 2 > cap) { /* grow: rehash every map */
                    uint32_t ncap = cap * 2, *t2 = xg2__calloc(ncap, sizeof(uint32_t));
                    if (!t2) { rc = XG2_NOMEM(); break; }
                    for (uint32_t k = 0; k < cuts.n; k++) {
                        uint32_t q = (uint32_t)hashes.a[k] & (ncap - 1);
                        while (t2[q]) q = (q + 1) & (ncap - 1);
                        t2[q] = k + 1;
                    }
                    xg2__free(tab);
                    tab = t2;
                    cap = ncap;
                    for (i = (uint32_t)h & (cap - 1); tab[i] != cuts.n; i = (i + 1) & (cap - 1)) {}
                }
            }
            xg2_state *st = &g->states[g->rules[r].start + s];
            st->cls = 256u * (tab[i] - 1);
            st->row = (uint32_t)total;
            total += (uint32_t)maps.a[st->cls + 255] + 1;
            if (total > UINT32_MAX / 2) rc = xg2__fail(XG2_ERR_LIMIT, "transition table too large");
        }
    }
    /* (the grammar owns the maps either way: unlink_grammar frees them) */
    g->classmaps = maps.a;
    g->class_cuts = cuts.a;
    g->n_classmaps = cuts.n;
    *n_trans = total;
    xg2__free(tab);
    vec_free(&hashes);
    return rc;
}

/* The stand-in automaton of a piece's root while the linking grammar is built
 * (grammar_link.c): its first bytes into a final state, the start final if the
 * piece is nullable -- what FIRST, FOLLOW and nullability see of it. */
static int stand_in_dfa(const xg2_grammar *piece, xg2_dfa *d) {
    memset(d, 0, sizeof *d);
    d->n = 2;
    d->boff = xg2__calloc(3, sizeof(uint32_t));
    d->br = xg2__malloc(sizeof(xg2_brange) * 128);
    d->roff = xg2__calloc(3, sizeof(uint32_t));
    d->final = xg2__calloc(2, 1);
    if (!d->boff || !d->br || !d->roff || !d->final) return XG2_NOMEM();
    uint32_t k = 0;
    const xg2_byteset *first = &piece->root_first;
    for (unsigned c = byteset_next(first, 0); c < 256;) { /* (runs of first bytes, one range each) */
        unsigned end = c + 1;
        while (end < 256 && byteset_has(first, end)) end++;
        d->br[k++] = (xg2_brange){c, end - 1, 1};
        c = end < 256 ? byteset_next(first, end) : 256;
    }
    d->boff[1] = d->boff[2] = k;
    d->final[0] = piece->rules[piece->root].nullable;
    d->final[1] = 1;
    return XG2_OK;
}

/* Bytes a linked grammar holds (tables, IR, memos). */
size_t xg2__grammar_memory(const xg2_grammar *g) {
    const xg2_ir *ir = &g->ir;
    return sizeof *g + sizeof(xg2_loop) * g->n_loops + 8u * g->n_group_tab + 16u * g->n_skey_tab +
           sizeof(xg2_fan) * g->n_fan + sizeof(xg2_fan_lit) * g->n_fan_lits + g->n_fan_text + (g->rest ? 8u * g->n_states : 0) +
           (g->head_groups ? 8u * g->n_states : 0) +
           sizeof(xg2_rule) * g->n_rules + sizeof(xg2_state) * g->n_states + sizeof(uint32_t) * g->n_trans +
           (256u + sizeof(xg2_byteset)) * g->n_classmaps + 1u * g->n_states +
           sizeof(xg2_ref) * g->n_refs + sizeof(int32_t) * 256u * g->n_la_states + ir->exprs.n * sizeof(xg2_expr) +
           ir->pool.n * 4u + ir->bytes.n + ir->names.n;
}

/* Link with right-linear regions merged (use_regions; *merged: some region
 * was) or each rule on its own. */
/* Build the automaton of every rule the root can still reach (want[r] set for
 * each), in breadth-first order, within XG2_MAX_TOTAL_STATES states in all (a
 * counted repetition: one); *n_ref: their rule edges. */
static int build_reachable(xg2_grammar *g, const uint8_t *inl, xg2_regions *regions, uint8_t *want, xg2_dfa *dfa,
                           uint32_t *conflict, uint64_t *n_ref) {
    const xg2_ir *ir = &g->ir;
    const uint32_t *region = regions->region;
    xg2_u32vec queue = {0};
    uint64_t total = 0, refs = 0;
    int rc = XG2_OK;
    want[ir->root] = 1;
    if (vec_push(&queue, ir->root)) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t qi = 0; qi < queue.n; qi++) {
        uint32_t r = queue.a[qi];
        if ((qi & 15) == 0 && (rc = xg2__budget_check("building rule", xg2__ir_name(ir, r)))) goto out;
        const xg2_rule_ir *ru = &ir->rules.a[r];
        xg2_rule *rt = &g->rules[r];
        rt->kind = ru->kind;
        rt->dispatch = ru->kind == RK_FSM && ir->exprs.a[ru->body].kind == XE_DISPATCH;
        rt->tagged = ru->tagged;
        rt->max_tokens = ru->max_tokens;
        rt->max_chars = ru->max_chars;
        if (ru->max_tokens >= 0 || ru->max_chars >= 0) {
            g->has_budgets = 1;
            if (ru->kind != RK_FSM) {
                rc = xg2__fail(XG2_ERR_GRAMMAR, "rule \"%s\": max_tokens / max_chars on a counted repetition is not supported",
                               xg2__ir_name(ir, r));
                goto out;
            }
        }
        if (ru->kind == RK_REPEAT) {
            const xg2_expr *rep = &ir->exprs.a[ru->body];
            rt->child = ir->exprs.a[rep->a].a;
            rt->min = rep->min;
            rt->max = rep->max;
            rt->n_states = 1;
            total += 1;
            if (!want[rt->child]) {
                want[rt->child] = 1;
                if (vec_push(&queue, rt->child)) { rc = XG2_NOMEM(); goto out; }
            }
            continue;
        }
        int built = 0;
        if (ru->ext) {
            if ((rc = stand_in_dfa(g->ext[ru->ext - 1], &dfa[r]))) goto out;
        } else if (region[r] == UINT32_MAX && ru->lookahead < 0 &&
                   (rc = xg2__trie_dfa(ir, ru->body, inl, &dfa[r], &built))) {
            goto out;
        } else if (!built && (rc = xg2__fsm_build(ir, ru->body, inl, regions, r, 0, &dfa[r]))) {
            if (rc == XG2__LOOP_CONFLICT) *conflict = dfa[r].conflict_expr;
            goto out;
        }
        if (dfa[r].n == 0)
            { rc = xg2__fail(XG2_ERR_INTERNAL, "rule \"%s\" has an empty automaton", xg2__ir_name(ir, r)); goto out; }
        if ((rt->max_tokens >= 0 || rt->max_chars >= 0) && dfa[r].roff[dfa[r].n]) {
            /* (a budget counts the rule's own items: one that calls others would need it inherited) */
            rc = xg2__fail(XG2_ERR_GRAMMAR, "rule \"%s\": max_tokens / max_chars on a rule that calls other rules "
                           "(not expanded in place) is not supported", xg2__ir_name(ir, r));
            goto out;
        }
        rt->n_states = dfa[r].n;
        total += dfa[r].n;
        refs += dfa[r].roff[dfa[r].n];
        for (uint32_t j = 0; j < dfa[r].roff[dfa[r].n]; j++) {
            uint32_t t = dfa[r].re[j].rule;
            if (!want[t]) {
                want[t] = 1;
                if (vec_push(&queue, t)) { rc = XG2_NOMEM(); goto out; }
            }
        }
    }
    if (total > XG2_MAX_TOTAL_STATES)
        rc = xg2__fail(XG2_ERR_LIMIT, "the grammar needs %llu automaton states (limit %d)",
                       (unsigned long long)total, XG2_MAX_TOTAL_STATES);
    *n_ref = refs;
out:
    vec_free(&queue);
    return rc;
}

/* Counted loops get global ids: loop_base[r], the first of rule r's. */
static int number_loops(xg2_grammar *g, const xg2_dfa *dfa, const uint8_t *want, uint32_t *loop_base) {
    uint32_t n = g->n_rules;
    for (uint32_t r = 0; r < n; r++) {
        loop_base[r] = g->n_loops;
        if (want[r] && g->rules[r].kind == RK_FSM) g->n_loops += dfa[r].n_loops;
    }
    g->loops = xg2__calloc(g->n_loops ? g->n_loops : 1, sizeof(xg2_loop));
    if (!g->loops) return XG2_NOMEM();
    for (uint32_t r = 0; r < n; r++) {
        if (!want[r] || g->rules[r].kind != RK_FSM) continue;
        for (uint32_t k = 0; k < dfa[r].n_loops; k++) {
            xg2_loop *l = &g->loops[loop_base[r] + k];
            l->min = dfa[r].loops[k].min;
            l->max = dfa[r].loops[k].max;
            l->first = dfa[r].loops[k].first;
            l->rest_checked = dfa[r].loops[k].rest_checked;
            l->slack = dfa[r].loops[k].slack;
        }
    }
    return XG2_OK;
}

/* Global state numbering (each wanted rule's states from its start) and the
 * grammar's per-state tables, allocated; then each state's byte classes and the
 * transition table, sized and allocated (filled by fill_states). */
static int allocate_tables(xg2_grammar *g, const xg2_dfa *dfa, const uint8_t *want, uint64_t n_ref) {
    uint32_t n = g->n_rules, base = 0;
    for (uint32_t r = 0; r < n; r++) {
        xg2_rule *rt = &g->rules[r];
        rt->start = XG2_NONE;
        if (!want[r]) continue;
        rt->start = base;
        base += rt->n_states;
    }
    g->n_states = base;
    g->states = xg2__calloc(base ? base : 1, sizeof(xg2_state));
    g->group_tab = xg2__malloc(sizeof(uint64_t) * XG2_MAX_GROUP_SETS);
    /* (head_groups only for counted loops' heads: none without loops) */
    if (g->n_loops && !(g->head_groups = xg2__calloc(base ? base : 1, sizeof(uint64_t)))) return XG2_NOMEM();
    g->contained = xg2__calloc(base ? base : 1, 1);
    g->proofs_spent = xg2__calloc(1, 1);
    g->refs_tab = xg2__malloc(sizeof(xg2_ref) * (n_ref ? n_ref : 1));
    int any_rest = 0;
    for (uint32_t r = 0; r < n; r++) any_rest |= want[r] && g->rules[r].kind == RK_FSM && dfa[r].rest;
    if (any_rest && !(g->rest = xg2__calloc(2 * (size_t)base, sizeof(uint32_t)))) return XG2_NOMEM();
    if (!g->states || !g->group_tab || !g->contained || !g->proofs_spent || !g->refs_tab) return XG2_NOMEM();
    uint64_t n_trans = 0;
    int rc = state_classes(g, dfa, want, &n_trans);
    if (rc) return rc;
    if (n_trans > UINT32_MAX / 2) return xg2__fail(XG2_ERR_LIMIT, "transition table too large");
    g->n_trans = (uint32_t)n_trans;
    g->trans = xg2__malloc(sizeof(uint32_t) * (n_trans ? n_trans : 1));
    if (!g->trans) return XG2_NOMEM();
    memset(g->trans, 0xFF, sizeof(uint32_t) * n_trans);
    return XG2_OK;
}

/* Each state's transitions, rule edges, flags, loop and loop byte groups. */
static int fill_states(xg2_grammar *g, const xg2_dfa *dfa, const uint8_t *want, const uint32_t *loop_base) {
    const xg2_ir *ir = &g->ir;
    uint32_t ref_i = 0;
    xg2_byteset last_self = {{0}};
    uint8_t last_groups = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        xg2_rule *rt = &g->rules[r];
        if (!want[r]) continue;
        if (rt->kind == RK_REPEAT) {
            xg2_state *st = &g->states[rt->start];
            st->rule = r;
            st->flags = SF_REPEAT | (rt->min == 0 ? SF_FINAL : 0);
            continue;
        }
        const xg2_dfa *d = &dfa[r];
        for (uint32_t s = 0; s < d->n; s++) {
            xg2_state *st = &g->states[rt->start + s];
            const uint8_t *cm = g->classmaps + st->cls;
            st->rule = r;
            if (d->tag && d->tag[s]) st->loop = (loop_base[r] + (d->tag[s] >> 1)) << 1 | (d->tag[s] & 1);
            if (d->rest) {
                g->rest[2 * (size_t)(rt->start + s)] = d->rest[2 * s];
                g->rest[2 * (size_t)(rt->start + s) + 1] = d->rest[2 * s + 1];
            }
            st->flags = (d->final[s] ? SF_FINAL : 0) | (d->boff[s + 1] > d->boff[s] ? SF_BYTES : 0) |
                        (d->roff[s + 1] > d->roff[s] ? SF_REFS : 0);
            if (s == 0 && ir->exprs.a[ir->rules.a[r].body].kind == XE_TOKEN) {
                st->flags |= SF_TOKEN;
                g->token_kinds |= (ir->exprs.a[ir->rules.a[r].body].flags & XF_EXCLUDE) ? 2 : 1;
            }
            xg2_byteset self = {{0}};
            int loops = 0;
            for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) {
                for (uint32_t c = cm[d->br[j].lo]; c <= cm[d->br[j].hi]; c++)
                    g->trans[st->row + c] = rt->start + d->br[j].to;
                if (d->br[j].to == s) {
                    byteset_add_range(&self, d->br[j].lo, d->br[j].hi);
                    loops = 1;
                }
            }
            if (loops && !st->loop && d->roff[s + 1] == d->roff[s]) {
                /* (string bodies repeat one loop set: keep the last answer) */
                if (memcmp(&self, &last_self, sizeof self)) {
                    last_self = self;
                    last_groups = xg2__group_entry(g, xg2__whole_groups(&self));
                }
                st->groups = last_groups;
            } else if (loops && (st->loop & 1) && d->roff[s + 1] == d->roff[s]) {
                const xg2_byteset *first = &g->loops[(st->loop >> 1) - 1].first;
                for (int w = 0; w < 4; w++) self.w[w] &= first->w[w];
                g->head_groups[rt->start + s] = xg2__whole_groups(&self);
            }
            st->ref_off = ref_i;
            uint32_t nr = d->roff[s + 1] - d->roff[s];
            if (nr > UINT16_MAX)
                return xg2__fail(XG2_ERR_LIMIT, "a state of rule \"%s\" has more than 65535 rule edges", xg2__ir_name(ir, r));
            st->ref_n = (uint16_t)nr;
            for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++) {
                g->refs_tab[ref_i].rule = d->re[j].rule;
                g->refs_tab[ref_i].to = rt->start + d->re[j].to;
                ref_i++;
            }
        }
    }
    g->n_refs = ref_i;
    xg2__group_tab_fit(g);
    return XG2_OK;
}

/* Nullable rules: a path from the start to a final state over rule edges of
 * nullable rules only.  Fixpoint; each pass is a walk per rule. */
static int mark_nullable(xg2_grammar *g, const uint8_t *want) {
    xg2_u32vec stack = {0};
    int rc = XG2_OK;
    uint8_t *seen = xg2__calloc(g->n_states ? g->n_states : 1, 1);
    if (!seen) return XG2_NOMEM();
    for (int changed = 1; changed && !rc;) {
        changed = 0;
        for (uint32_t r = 0; r < g->n_rules && !rc; r++) {
            xg2_rule *rt = &g->rules[r];
            if (!want[r] || rt->nullable) continue;
            if (rt->kind == RK_REPEAT) {
                rt->nullable = rt->min == 0;
                changed |= rt->nullable;
                continue;
            }
            stack.n = 0;
            if (vec_push(&stack, rt->start)) { rc = XG2_NOMEM(); break; }
            seen[rt->start] = 1;
            int found = 0;
            for (uint32_t k = 0; k < stack.n && !rc; k++) {
                uint32_t s = stack.a[k];
                if (g->states[s].flags & SF_FINAL) { found = 1; break; }
                const xg2_ref *e = g->refs_tab + g->states[s].ref_off;
                for (uint32_t j = 0; j < g->states[s].ref_n; j++) {
                    if (!g->rules[e[j].rule].nullable || seen[e[j].to]) continue;
                    seen[e[j].to] = 1;
                    if (vec_push(&stack, e[j].to)) { rc = XG2_NOMEM(); break; }
                }
            }
            for (uint32_t k = 0; k < stack.n; k++) seen[stack.a[k]] = 0;
            if (found && !rc) { rt->nullable = 1; changed = 1; }
        }
    }
    xg2__free(seen);
    vec_free(&stack);
    return rc;
}

static int link_grammar(xg2_grammar *g, uint32_t *conflict, int use_regions, int *merged) {
    const xg2_ir *ir = &g->ir;
    uint32_t n = ir->rules.n;
    int rc = XG2_OK;
    xg2_regions regions = {0};
    uint32_t *region = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    regions.frag = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    regions.stamp = xg2__calloc(n ? n : 1, sizeof(uint32_t));
    regions.region = region;
    regions.expansion = xg2__calloc(n ? n : 1, sizeof(xg2_expansion));
    uint8_t *inl = xg2__calloc(n, 1);
    uint8_t *flat = xg2__calloc(ir->exprs.n ? ir->exprs.n : 1, 1);
    uint8_t *want = xg2__calloc(n, 1);
    xg2_dfa *dfa = xg2__calloc(n, sizeof(xg2_dfa));
    uint32_t *loop_base = xg2__calloc(n ? n : 1, sizeof(uint32_t));
    g->rules = xg2__calloc(n, sizeof(xg2_rule));
    if (!inl || !flat || !want || !dfa || !loop_base || !g->rules || !region || !regions.frag || !regions.stamp ||
        !regions.expansion) { rc = XG2_NOMEM(); goto out; }
    g->n_rules = n;
    g->root = ir->root;
    for (uint32_t r = 0; r < n; r++) g->rules[r].lookahead = -1;
    regions.flat_repeat = flat;
    regions.lookup_only = g->piece;
    if ((rc = decide_inlining(ir, inl, flat, region, use_regions))) goto out;
    *merged = 0;
    for (uint32_t r = 0; r < n; r++) *merged |= region[r] != UINT32_MAX;
    uint64_t n_ref = 0;
    if ((rc = build_reachable(g, inl, &regions, want, dfa, conflict, &n_ref))) goto out;
    if ((rc = number_loops(g, dfa, want, loop_base))) goto out;
    if ((rc = allocate_tables(g, dfa, want, n_ref))) goto out;
    if ((rc = fill_states(g, dfa, want, loop_base))) goto out;
    if ((rc = build_lookaheads(g, want))) goto out;
    if ((rc = mark_nullable(g, want))) goto out;
    if ((rc = compute_follow(g, dfa))) goto out;
    rc = compute_skeys(g, dfa);
    g->memory_bytes = xg2__grammar_memory(g);
out:
    if (dfa)
        for (uint32_t r = 0; r < n; r++) xg2__dfa_free(&dfa[r]);
    xg2__free(dfa);
    xg2__free(region);
    xg2__free(regions.frag);
    xg2__free(regions.stamp);
    xg2__free(regions.expansion);
    xg2__free(inl);
    xg2__free(flat);
    xg2__free(want);
    xg2__free(loop_base);
    return rc;
}

/* Free what link_grammar built, keeping the IR. */
static void unlink_grammar(xg2_grammar *g) {
    xg2__free(g->rules);
    xg2__free(g->states);
    xg2__free(g->trans);
    xg2__free(g->classmaps);
    xg2__free(g->class_cuts);
    xg2__free(g->group_tab);
    xg2__free(g->head_groups);
    xg2__free(g->contained);
    xg2__free(g->proofs_spent);
    xg2__free(g->refs_tab);
    xg2__free(g->la_trans);
    xg2__free(g->la_final);
    xg2__free(g->la_start);
    xg2__free(g->follow);
    xg2__free(g->skey_tab);
    xg2__free(g->fans);
    xg2__free(g->fan_lits);
    xg2__free(g->fan_text);
    xg2__free(g->loops);
    xg2__free(g->rest);
    xg2_ir ir = g->ir;
    int refs = g->refs;
    xg2_byteset root_follow = g->root_follow;
    const xg2_grammar *const *ext = g->ext;
    memset(g, 0, sizeof *g);
    g->ir = ir;
    g->refs = refs;
    g->root_follow = root_follow; /* (inputs of the build: kept for the next attempt) */
    g->ext = ext;
}

/* A counted loop that its rule's automaton cannot keep apart (another loop, or
 * other live states, beside it): written out if short; else its first
 * XG2_PEEL_ITERATIONS iterations written out ahead of it, so that whatever ran
 * beside it from the same start (a shorter bounded string: two `maxLength`s in
 * an anyOf) has ended before the loop begins; else -- already peeled once --
 * a counted rule, which the parser runs with a counter over child instances
 * (exact, but its tokens are resolved one by one).  A grammar writes out at
 * most XG2_PEEL_BUDGET iterations this way, of items of at most
 * XG2_PEEL_ITEM_BYTES bytes. */
static int resolve_loop_conflict(xg2_ir *ir, uint32_t expr, xg2_u32vec *peeled, uint32_t *written) {
    /* (a conflict names a repetition; anything else would make no progress) */
    if (expr >= ir->exprs.n || ir->exprs.a[expr].kind != XE_REPEAT)
        return xg2__fail(XG2_ERR_INTERNAL, "a loop conflict names expression %u, not a repetition", expr);
    const xg2_expr e = ir->exprs.a[expr];
    int again = 0;
    for (uint32_t i = 0; i < peeled->n; i++) again |= peeled->a[i] == expr;
    uint32_t cost = e.max >= 0 && e.max <= XG2_PEEL_ITERATIONS ? (uint32_t)e.max : XG2_PEEL_ITERATIONS;
    /* Only loops that count characters (a string's length: one JSON character,
     * escapes included, per iteration); a loop of larger items -- array elements
     * -- conflicts with itself (its exit and its next item start alike), which
     * peeling cannot help, and its written-out copies would be large. */
    if (e.kind != XE_REPEAT || !(e.flags & XF_COUNTED) || again || *written + cost > XG2_PEEL_BUDGET ||
        xg2__ir_max_bytes(ir, e.a, 0) > XG2_PEEL_ITEM_BYTES)
        return xg2__ir_uncount(ir, expr);
    *written += cost;
    if (e.max >= 0 && e.max <= XG2_PEEL_ITERATIONS) {
        ir->exprs.a[expr].flags &= (uint8_t)~XF_COUNTED;
        return XG2_OK;
    }
    const int32_t P = XG2_PEEL_ITERATIONS;
    uint32_t head = xg2__ir_repeat(ir, e.a, P, P);
    uint32_t rest = xg2__ir_repeat(ir, e.a, e.min > P ? e.min - P : 0, e.max < 0 ? -1 : e.max - P);
    if (ir->err) return XG2_NOMEM();
    ir->exprs.a[rest].flags |= XF_COUNTED;
    uint32_t kids[2] = {head, rest};
    uint32_t longer = xg2__ir_list(ir, XE_SEQ, kids, 2);
    uint32_t out = longer;
    if (e.min < P) {
        kids[0] = xg2__ir_repeat(ir, e.a, e.min, P - 1);
        kids[1] = longer;
        out = xg2__ir_list(ir, XE_CHOICE, kids, 2);
    }
    if (ir->err || vec_push(peeled, rest)) return XG2_NOMEM();
    ir->exprs.a[expr] = ir->exprs.a[out];
    return XG2_OK;
}

/* Link; a counted loop that its rule's automaton cannot keep apart is written
 * out or peeled, else becomes a counted rule (resolve_loop_conflict), and
 * linking starts over. */
int xg2__grammar_link_ir(xg2_grammar *g) {
    xg2_u32vec peeled = {0};
    uint32_t written = 0;
    int use_regions = 1, rc;
    for (uint32_t attempt = 0;; attempt++) {
        uint32_t conflict = 0;
        int merged = 0;
        rc = link_grammar(g, &conflict, use_regions, &merged);
        if (rc == XG2_ERR_LIMIT && merged) {
            /* A merged region can determinise past the limits where its rules
             * one by one do not (a right-linear NFA, not a DFA): run them as rules. */
            unlink_grammar(g);
            xg2__clear_error();
            use_regions = 0;
            continue;
        }
        if (rc != XG2__LOOP_CONFLICT) break;
        unlink_grammar(g);
        if (attempt >= 4096) { rc = xg2__fail(XG2_ERR_LIMIT, "too many counted repetitions to place"); break; }
        if ((rc = resolve_loop_conflict(&g->ir, conflict, &peeled, &written))) break;
    }
    vec_free(&peeled);
    return rc;
}

/* ---- public API ---- */

void xg2__grammar_destroy(xg2_grammar *g) {
    for (uint32_t i = 0; i < g->n_linked; i++) {
        xg2_grammar_free((xg2_grammar *)g->linked[i]);
        xg2__free(g->linked_rmap[i]);
        xg2__free(g->linked_prefix[i]);
    }
    xg2__free(g->linked);
    xg2__free(g->linked_rmap);
    xg2__free(g->linked_prefix);
    xg2__ir_free(&g->ir);
    unlink_grammar(g);
    xg2__free(g);
}

void xg2__grammar_retain(const xg2_grammar *g) { XG2_REF_INC((xg2_grammar *)g); }

void xg2_grammar_free(xg2_grammar *g) {
    if (g && XG2_REF_DEC(g) == 0) xg2__grammar_destroy(g);
}

int xg2__grammar_build(const char *text, size_t len, const char *root, const uint8_t *root_follow,
                       xg2_grammar **out) {
    xg2_grammar *g = xg2__calloc(1, sizeof *g);
    if (!g) return xg2__budget_status(XG2_NOMEM(), "starting");
    g->refs = 1;
    if (root_follow) memcpy(&g->root_follow, root_follow, sizeof g->root_follow);
    g->piece = root_follow != NULL;
    int rc = xg2__ir_init(&g->ir);
    if (rc) rc = XG2_NOMEM();
    if (!rc) rc = xg2__ebnf_parse(&g->ir, text, len, root);
    if (!rc) rc = xg2__grammar_link_ir(g);
    rc = xg2__budget_status(rc, "building the grammar");
    if (rc) {
        xg2__grammar_destroy(g);
        return rc;
    }
    *out = g;
    return XG2_OK;
}

int xg2_grammar_from_ebnf(const char *text, size_t len, const char *root, xg2_grammar **out) {
    xg2__clear_error();
    if (!text || !root || !out) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    return xg2__grammar_build(text, len, root, NULL, out);
}

/* A linked grammar's whole IR, its pieces' expressions written in (for printing). */
static int whole_ir(const xg2_grammar *g, xg2_ir *out) {
    uint32_t n = g->ir.rules.n;
    uint32_t *same = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    int rc = same ? xg2__ir_init(out) : XG2_NOMEM();
    if (!rc && vec_reserve(&out->rules, n)) rc = XG2_NOMEM();
    if (!rc) {
        out->rules.n = n;
        for (uint32_t r = 0; r < n; r++) same[r] = r;
        rc = xg2__ir_append(out, &g->ir, same, NULL);
    }
    for (uint32_t i = 0; i < g->n_linked && !rc; i++)
        rc = xg2__ir_append(out, &g->linked[i]->ir, g->linked_rmap[i], g->linked_prefix[i]);
    out->root = g->ir.root;
    xg2__free(same);
    return rc;
}

int xg2_grammar_print(const xg2_grammar *g, char *buf, size_t cap, size_t *len) {
    if (!g || !len || (cap && !buf)) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    xg2_charvec o = {0};
    xg2_ir whole = {0};
    int rc = g->n_linked ? whole_ir(g, &whole) : XG2_OK;
    if (!rc) rc = xg2__ir_print(g->n_linked ? &whole : &g->ir, &o);
    xg2__ir_free(&whole);
    if (rc) { vec_free(&o); return rc; }
    *len = o.n;
    if (cap) memcpy(buf, o.a, o.n < cap ? o.n : cap);
    vec_free(&o);
    return XG2_OK;
}

int32_t xg2_grammar_num_rules(const xg2_grammar *g) { return g ? (int32_t)g->n_rules : 0; }
int32_t xg2_grammar_num_states(const xg2_grammar *g) { return g ? (int32_t)g->n_states : 0; }
