/*
 * fsm.c -- per-rule automata: expression -> NFA (Thompson), then its DFA from
 * the cross-grammar cache or built by fsm_dfa.c (subset construction, minimal
 * DFA, trimmed, renumbered breadth-first); Length(...) is fsm_length.c's.
 *
 * The alphabet is bytes plus rule references.  Minimal, canonically numbered
 * DFAs make equal sub-structures identical, which the structural hash of the
 * cross-grammar cache relies on.
 */
#include "fsm_internal.h"

#include "dfacache.h"
#include "utf8.h"


#define MAX_BUILD_DEPTH (8 * XG2_MAX_NEST_DEPTH)

void xg2__dfa_free(xg2_dfa *d) {
    xg2__free(d->boff);
    xg2__free(d->br);
    xg2__free(d->roff);
    xg2__free(d->re);
    xg2__free(d->final);
    xg2__free(d->tag);
    xg2__free(d->loops);
    xg2__free(d->rest);
    memset(d, 0, sizeof *d);
}

int xg2__dfa_copy(const xg2_dfa *src, xg2_dfa *dst) {
    memset(dst, 0, sizeof *dst);
    dst->n = src->n;
    dst->n_loops = src->n_loops;
    dst->conflict_expr = src->conflict_expr;
    if (!src->n) return XG2_OK;
    uint32_t nb = src->boff[src->n], nr = src->roff[src->n];
    dst->boff = xg2__malloc(sizeof(uint32_t) * (src->n + 1));
    dst->roff = xg2__malloc(sizeof(uint32_t) * (src->n + 1));
    dst->br = xg2__malloc(sizeof(xg2_brange) * (nb ? nb : 1));
    dst->re = xg2__malloc(sizeof(xg2_redge) * (nr ? nr : 1));
    dst->final = xg2__malloc(src->n);
    dst->tag = xg2__malloc(sizeof(uint32_t) * src->n);
    dst->loops = src->n_loops ? xg2__malloc(sizeof(xg2_loop_info) * src->n_loops) : NULL;
    if (!dst->boff || !dst->roff || !dst->br || !dst->re || !dst->final || !dst->tag || (src->n_loops && !dst->loops)) {
        xg2__dfa_free(dst);
        return XG2_NOMEM();
    }
    memcpy(dst->boff, src->boff, sizeof(uint32_t) * (src->n + 1));
    memcpy(dst->roff, src->roff, sizeof(uint32_t) * (src->n + 1));
    if (nb) memcpy(dst->br, src->br, sizeof(xg2_brange) * nb);
    if (nr) memcpy(dst->re, src->re, sizeof(xg2_redge) * nr);
    memcpy(dst->final, src->final, src->n);
    if (src->tag) memcpy(dst->tag, src->tag, sizeof(uint32_t) * src->n);
    else memset(dst->tag, 0, sizeof(uint32_t) * src->n);
    if (src->n_loops) memcpy(dst->loops, src->loops, sizeof(xg2_loop_info) * src->n_loops);
    if (src->rest) {
        if (!(dst->rest = xg2__malloc(sizeof(uint32_t) * 2 * src->n))) {
            xg2__dfa_free(dst);
            return XG2_NOMEM();
        }
        memcpy(dst->rest, src->rest, sizeof(uint32_t) * 2 * src->n);
    }
    return XG2_OK;
}

/* ---- NFA construction ---- */

static uint32_t new_state(nfa_builder *b) {
    if (b->n >= XG2_MAX_NFA_STATES) {
        if (!b->rc) b->rc = xg2__fail(XG2_ERR_LIMIT, "a rule needs more than %d automaton states", XG2_MAX_NFA_STATES);
        return 0;
    }
    if ((b->n & 4095) == 0 && !b->rc && (b->rc = xg2__budget_check("building an automaton", NULL))) return 0;
    if (vec_push(&b->tag, b->cur_tag)) {
        if (!b->rc) b->rc = XG2_NOMEM();
        return 0;
    }
    return b->n++;
}

static void add_edge(nfa_builder *b, int kind, uint32_t from, uint32_t to, uint32_t a, uint32_t bb) {
    if (b->rc) return;
    nedge e = {from, to, a, bb, (uint8_t)kind};
    if (vec_push(&b->e, e)) b->rc = XG2_NOMEM();
}

typedef struct {
    nfa_builder *b;
    uint32_t from, to;
    uint32_t tail[4]; /* tail[k]: k more bytes 80-BF, then `to` (0: not made yet) */
} seq_ctx;

/* The state from which k continuation bytes (80-BF each) lead to c->to, shared
 * by the class's sequences: a class of many ranges past ASCII (JSON string
 * characters) is about half the states and edges it is with a chain per
 * sequence, and determinises to the same automaton. */
static uint32_t continuation(seq_ctx *c, int k) {
    if (!k) return c->to;
    if (!c->tail[k]) {
        uint32_t next = continuation(c, k - 1);
        c->tail[k] = new_state(c->b);
        add_edge(c->b, NE_BYTE, c->tail[k], next, 0x80, 0xBF);
    }
    return c->tail[k];
}

static int emit_seq(void *vctx, const uint8_t *seq, int n) {
    seq_ctx *c = vctx;
    int k = 0; /* trailing full continuation ranges (never the lead byte) */
    while (k < n - 1 && seq[2 * (n - 1 - k)] == 0x80 && seq[2 * (n - 1 - k) + 1] == 0xBF) k++;
    uint32_t s = c->from, last = continuation(c, k);
    for (int i = 0; i < n - k; i++) {
        uint32_t t = i == n - k - 1 ? last : new_state(c->b);
        add_edge(c->b, NE_BYTE, s, t, seq[2 * i], seq[2 * i + 1]);
        s = t;
    }
    return c->b->rc;
}

static void build(nfa_builder *b, uint32_t id, uint32_t from, uint32_t to, uint32_t self_rule,
                  uint32_t self_start, int tail, int depth);

static uint32_t region_of(const nfa_builder *b, uint32_t r) {
    return b->regions && r != UINT32_MAX ? b->regions->region[r] : UINT32_MAX;
}

/* The innermost open expansion of region k, or NULL. */
static const region_ctx *open_ctx(const nfa_builder *b, uint32_t k) {
    for (uint32_t i = b->ctxs.n; i-- > 0;)
        if (b->ctxs.a[i].region == k) return &b->ctxs.a[i];
    return NULL;
}

/* The NFA state where member r of the open expansion x starts (made on first
 * use; its body is built from the pending list, not recursively, so a long
 * chain of members does not deepen the stack). */
static uint32_t fragment(nfa_builder *b, const region_ctx *x, uint32_t r) {
    xg2_regions *R = b->regions;
    if (R->stamp[r] == x->serial) return R->frag[r];
    uint32_t s = new_state(b);
    R->frag[r] = s;
    R->stamp[r] = x->serial;
    if (vec_push(&b->pending, r) && !b->rc) b->rc = XG2_NOMEM();
    return s;
}

/* Expand region member r between `start` (already made) and `to`: the member
 * and every member its tail references reach. */
static void build_region(nfa_builder *b, uint32_t r, uint32_t start, uint32_t to, int depth) {
    xg2_regions *R = b->regions;
    region_ctx x = {R->region[r], to, ++R->serial};
    if (vec_push(&b->ctxs, x)) { if (!b->rc) b->rc = XG2_NOMEM(); return; }
    R->frag[r] = start;
    R->stamp[r] = x.serial;
    uint32_t base = b->pending.n;
    if (vec_push(&b->pending, r)) { if (!b->rc) b->rc = XG2_NOMEM(); }
    while (b->pending.n > base && !b->rc) {
        uint32_t m = b->pending.a[--b->pending.n];
        build(b, b->ir->rules.a[m].body, R->frag[m], to, m, R->frag[m], 1, depth + 1);
    }
    b->pending.n = base;
    b->ctxs.n--;
}

static void build_ref(nfa_builder *b, uint32_t r, uint32_t from, uint32_t to, uint32_t self_rule,
                      uint32_t self_start, int tail, int depth) {
    const xg2_ir *ir = b->ir;
    uint32_t k = region_of(b, r);
    if (tail && k != UINT32_MAX && k == region_of(b, self_rule)) { /* a move inside the region */
        const region_ctx *x = open_ctx(b, k);
        if (x) {
            add_edge(b, NE_EPS, from, fragment(b, x, r), 0, 0);
            return;
        }
    }
    if (r == self_rule && tail) {
        add_edge(b, NE_EPS, from, self_start, 0, 0);
        return;
    }
    int expand = b->bytes_only || (b->inline_rule && b->inline_rule[r] && !b->flat);
    if (!expand) {
        add_edge(b, NE_RULE, from, to, r, 0);
        return;
    }
    if (k != UINT32_MAX) {
        uint32_t s0 = new_state(b);
        add_edge(b, NE_EPS, from, s0, 0, 0);
        build_region(b, r, s0, to, depth);
        return;
    }
    if (!b->bytes_only && b->sp >= MAX_INLINE_DEPTH) { /* deep chains stay references */
        add_edge(b, NE_RULE, from, to, r, 0);
        return;
    }
    for (int i = 0; i < b->sp; i++) {
        if (b->stack[i] == r && !b->bytes_only) { /* a recursive rule expands once */
            add_edge(b, NE_RULE, from, to, r, 0);
            return;
        }
        if (b->stack[i] == r) {
            b->rc = xg2__fail(XG2_ERR_GRAMMAR,
                              "a lookahead assertion must be regular, but it reaches rule \"%s\", which is recursive",
                              xg2__ir_name(ir, r));
            return;
        }
    }
    if (b->sp >= MAX_INLINE_DEPTH) {
        b->rc = xg2__fail(XG2_ERR_LIMIT, "rules nested more than %d deep inside a lookahead assertion", MAX_INLINE_DEPTH);
        return;
    }
    /* An expansion depends on the rule, where it ends, the rules around it (a
     * recursive rule inside stays a reference), the loop tag and flat mode; a
     * second expansion of the same kind (both arms of `(x r)? | r`, say) goes
     * into the first one's copy instead of building another. */
    uint64_t context = xg2__mix64(b->stack_hash[b->sp], (uint64_t)b->cur_tag << 1 | (b->flat > 0));
    xg2_expansion *memo = b->regions && b->regions->expansion ? &b->regions->expansion[r] : NULL;
    if (memo && memo->serial == b->regions->build_serial && memo->to == to && memo->context == context) {
        add_edge(b, NE_EPS, from, memo->start, 0, 0);
        return;
    }
    b->stack_hash[b->sp + 1] = xg2__mix64(b->stack_hash[b->sp], r);
    b->stack[b->sp++] = r;
    uint32_t s0 = new_state(b);
    add_edge(b, NE_EPS, from, s0, 0, 0);
    build(b, ir->rules.a[r].body, s0, to, r, s0, 1, depth + 1);
    b->sp--;
    if (memo) {
        memo->serial = b->regions->build_serial;
        memo->to = to;
        memo->context = context;
        memo->start = s0;
    }
}

/* A repetition written out: min mandatory copies, then either a loop or
 * (max - min) optional copies.  Loops use fresh states so nothing re-enters
 * `from`. */
static void build_repeat(nfa_builder *b, const xg2_expr *e, uint32_t from, uint32_t to, uint32_t self_rule,
                         uint32_t self_start, int tail, int depth) {
    uint32_t s = from;
    for (int32_t i = 0; i < e->min && !b->rc; i++) {
        uint32_t t = new_state(b);
        build(b, e->a, s, t, self_rule, self_start, 0, depth + 1);
        s = t;
    }
    if (e->max < 0) {
        uint32_t loop = new_state(b), back = new_state(b);
        add_edge(b, NE_EPS, s, loop, 0, 0);
        build(b, e->a, loop, back, self_rule, self_start, 0, depth + 1);
        add_edge(b, NE_EPS, back, loop, 0, 0);
        add_edge(b, NE_EPS, loop, to, 0, 0);
        return;
    }
    for (int32_t i = e->min; i < e->max && !b->rc; i++) {
        add_edge(b, NE_EPS, s, to, 0, 0);
        if (i + 1 == e->max) { /* the last copy ends at `to` itself (an `x?` in tail position: x's end too) */
            build(b, e->a, s, to, self_rule, self_start, tail && e->max == 1, depth + 1);
            return;
        }
        uint32_t t = new_state(b);
        build(b, e->a, s, t, self_rule, self_start, 0, depth + 1);
        s = t;
    }
    add_edge(b, NE_EPS, s, to, 0, 0);
}

/* StringExcept's `any` is a rule whose body is `one*`, both rules expanded in
 * place as plain rules (the JSON string's characters: json-chars ::= json-char*). */
static int any_is_one_star(const nfa_builder *b, uint32_t any, uint32_t one) {
    const xg2_ir *ir = b->ir;
    const xg2_expr *a = &ir->exprs.a[any], *o = &ir->exprs.a[one];
    if (a->kind != XE_REF || o->kind != XE_REF || b->bytes_only || b->flat || !b->inline_rule) return 0;
    uint32_t r0 = a->a, r1 = o->a;
    if (!b->inline_rule[r0] || !b->inline_rule[r1] || region_of(b, r0) != UINT32_MAX || region_of(b, r1) != UINT32_MAX ||
        ir->rules.a[r0].kind != RK_FSM)
        return 0;
    for (int i = 0; i < b->sp; i++)
        if (b->stack[i] == r0 || b->stack[i] == r1) return 0;
    const xg2_expr *body = &ir->exprs.a[ir->rules.a[r0].body];
    if (body->kind != XE_REPEAT || body->min != 0 || body->max >= 0 || (body->flags & XF_COUNTED)) return 0;
    const xg2_expr *c = &ir->exprs.a[body->a];
    return c->kind == XE_REF && c->a == r1;
}

/* StringExcept (ir.h) as a trie of NFA states.  The three ways out are built
 * once each; every node reaches `escape` through copies of the edges that
 * leave its start (not an epsilon edge), so a node's subset during
 * determinisation is the node alone, not the node plus escape's first states. */
#define EXCEPT_COPY_MAX_EDGES 4096
static void build_except(nfa_builder *b, const xg2_expr *e, uint32_t from, uint32_t to, uint32_t self_rule,
                         uint32_t self_start, int depth) {
    const xg2_ir *ir = b->ir;
    const uint32_t *arg = ir->pool.a + e->a, *words = arg + 3;
    uint32_t s_any = new_state(b);
    uint32_t s_one;
    if (any_is_one_star(b, arg[0], arg[1])) {
        /* any = one*: its loop and `one` share one expansion of the character
         * (the second goes to the same exit, s_any: the expansion memo), so the
         * states inside a character are the same whichever way it was entered. */
        add_edge(b, NE_EPS, s_any, to, 0, 0);
        build(b, arg[1], s_any, s_any, self_rule, self_start, 0, depth + 1);
        s_one = new_state(b);
        build(b, arg[1], s_one, s_any, self_rule, self_start, 0, depth + 1);
    } else {
        build(b, arg[0], s_any, to, self_rule, self_start, 0, depth + 1);
        s_one = new_state(b);
        build(b, arg[1], s_one, s_any, self_rule, self_start, 0, depth + 1);
    }
    uint32_t n0 = b->n, s_esc = new_state(b), e0 = b->e.n;
    build(b, arg[2], s_esc, s_any, self_rule, self_start, 0, depth + 1);
    uint32_t e1 = b->e.n;
    if (b->rc) return;

    /* The closure of escape's start, if it stays inside what was just built
     * and inside this loop context (else: epsilon edges). */
    xg2_u32vec clo = {0};
    VEC(nedge) out = {0};
    int copy = e1 - e0 <= EXCEPT_COPY_MAX_EDGES && !vec_push(&clo, s_esc);
    for (uint32_t k = 0; copy && k < clo.n; k++) {
        uint32_t m = clo.a[k];
        if (m < n0 || m == s_any || b->tag.a[m] != b->cur_tag) { copy = 0; break; }
        for (uint32_t j = e0; j < e1 && copy; j++) {
            const nedge x = b->e.a[j];
            if (x.from != m) continue;
            if (x.kind != NE_EPS) { copy = !vec_push(&out, x); continue; }
            uint32_t i = 0;
            while (i < clo.n && clo.a[i] != x.to) i++;
            if (i == clo.n) copy = clo.n < 64 && !vec_push(&clo, x.to);
        }
    }

    /* The trie: node k is NFA state node[k] (the root is `from`); children
     * are linked in byte order (the words are sorted). */
    uint64_t total = 1;
    for (uint32_t i = 0; i < e->n; i++) total += words[2 * i + 1];
    uint32_t *node = xg2__malloc(sizeof(uint32_t) * 3 * total), *child = node + total, *sib = child + total;
    uint8_t *byte = xg2__malloc(2 * total), *ended = byte + total;
    uint32_t nn = 1;
    if (!node || !byte) { if (!b->rc) b->rc = XG2_NOMEM(); goto out; }
    node[0] = from;
    child[0] = sib[0] = UINT32_MAX;
    ended[0] = 0;
    for (uint32_t i = 0; i < e->n && !b->rc; i++) {
        const uint8_t *w = ir->bytes.a + words[2 * i];
        uint32_t cur = 0;
        for (uint32_t j = 0; j < words[2 * i + 1]; j++) {
            uint32_t c = child[cur], last = UINT32_MAX;
            while (c != UINT32_MAX && byte[c] != w[j]) last = c, c = sib[c];
            if (c == UINT32_MAX) {
                c = nn++;
                node[c] = new_state(b);
                byte[c] = w[j];
                child[c] = sib[c] = UINT32_MAX;
                ended[c] = 0;
                if (last == UINT32_MAX) child[cur] = c;
                else sib[last] = c;
            }
            cur = c;
        }
        ended[cur] = 1;
    }
    for (uint32_t k = 0; k < nn && !b->rc; k++) {
        uint32_t st = node[k];
        if (child[k] == UINT32_MAX) { /* a whole word with nothing below: one character, then any */
            add_edge(b, NE_EPS, st, s_one, 0, 0);
            if (!ended[k]) add_edge(b, NE_EPS, st, to, 0, 0);
            continue;
        }
        xg2_byteset taken = {{0}};
        for (uint32_t c = child[k]; c != UINT32_MAX; c = sib[c]) {
            add_edge(b, NE_BYTE, st, node[c], byte[c], byte[c]);
            byteset_add(&taken, byte[c]);
        }
        byteset_add(&taken, '"');
        byteset_add(&taken, '\\');
        for (uint32_t lo = 0x20; lo <= 0x7E;) { /* printable characters no word continues with */
            if (byteset_has(&taken, lo)) { lo++; continue; }
            uint32_t hi = lo;
            while (hi + 1 <= 0x7E && !byteset_has(&taken, hi + 1)) hi++;
            add_edge(b, NE_BYTE, st, s_any, lo, hi);
            lo = hi + 1;
        }
        if (copy)
            for (uint32_t j = 0; j < out.n; j++) add_edge(b, out.a[j].kind, st, out.a[j].to, out.a[j].a, out.a[j].b);
        else
            add_edge(b, NE_EPS, st, s_esc, 0, 0);
        if (!ended[k]) add_edge(b, NE_EPS, st, to, 0, 0); /* the string may close here */
    }
out:
    xg2__free(node);
    xg2__free(byte);
    vec_free(&clo);
    vec_free(&out);
}

static void build(nfa_builder *b, uint32_t id, uint32_t from, uint32_t to, uint32_t self_rule,
                  uint32_t self_start, int tail, int depth) {
    if (b->rc) return;
    if (depth > MAX_BUILD_DEPTH) {
        b->rc = xg2__fail(XG2_ERR_LIMIT, "grammar expression nested deeper than %d", MAX_BUILD_DEPTH);
        return;
    }
    const xg2_ir *ir = b->ir;
    const xg2_expr e = ir->exprs.a[id];
    switch (e.kind) {
    case XE_EMPTY:
        add_edge(b, NE_EPS, from, to, 0, 0);
        return;
    case XE_FAIL:
        return;
    case XE_BYTES: {
        uint32_t s = from;
        for (uint32_t i = 0; i < e.n; i++) {
            uint32_t t = i + 1 == e.n ? to : new_state(b);
            uint8_t c = ir->bytes.a[e.a + i];
            add_edge(b, NE_BYTE, s, t, c, c);
            s = t;
        }
        return;
    }
    case XE_CLASS: {
        if ((b->rc = xg2__class_ranges(ir, &ir->exprs.a[id], &b->ranges))) return;
        seq_ctx c = {b, from, to, {0, 0, 0, 0}};
        for (uint32_t i = 0; i + 1 < b->ranges.n && !b->rc; i += 2)
            xg2__utf8_sequences(b->ranges.a[i], b->ranges.a[i + 1], emit_seq, &c);
        return;
    }
    case XE_REF:
        build_ref(b, e.a, from, to, self_rule, self_start, tail, depth);
        return;
    case XE_SEQ: {
        uint32_t s = from, n = e.n, end = to;
        if (tail && n >= 2) {
            /* `x member` in tail position inside a region: x ends at the member's
             * fragment itself, so that the same x before the same member (a key
             * automaton's "other character" back to its first state, in every
             * state) is one expansion, not one per state */
            const xg2_expr *le = &ir->exprs.a[ir->pool.a[e.a + n - 1]];
            uint32_t k = le->kind == XE_REF ? region_of(b, le->a) : UINT32_MAX;
            const region_ctx *x = k != UINT32_MAX && k == region_of(b, self_rule) ? open_ctx(b, k) : NULL;
            if (x) {
                end = fragment(b, x, le->a);
                n--;
            }
        }
        for (uint32_t i = 0; i < n && !b->rc; i++) {
            int last = i + 1 == e.n;
            uint32_t t = i + 1 == n ? end : new_state(b);
            build(b, ir->pool.a[e.a + i], s, t, self_rule, self_start, tail && last, depth + 1);
            s = t;
        }
        return;
    }
    case XE_CHOICE:
        for (uint32_t i = 0; i < e.n && !b->rc; i++)
            build(b, ir->pool.a[e.a + i], from, to, self_rule, self_start, tail, depth + 1);
        return;
    case XE_REPEAT: {
        if ((e.flags & XF_COUNTED) && !b->bytes_only) { /* byte-only automata (lookaheads) unroll */
            /* from -> head; head -> [child] -> head (one iteration); head -> to. */
            uint32_t k = b->loops.n + 1, saved = b->cur_tag;
            b->cur_tag = k << 1 | 1;
            uint32_t head = new_state(b);
            b->cur_tag = k << 1;
            uint32_t cs = new_state(b), ce = new_state(b);
            add_edge(b, NE_EPS, from, head, 0, 0);
            add_edge(b, NE_EPS, head, cs, 0, 0);
            build(b, e.a, cs, ce, self_rule, self_start, 0, depth + 1);
            add_edge(b, NE_EPS, ce, head, 0, 0);
            b->cur_tag = saved;
            add_edge(b, NE_EPS, head, to, 0, 0);
            loop_rec lr = {head, from, to, e.min, e.max, id};
            if (!b->rc && vec_push(&b->loops, lr)) b->rc = XG2_NOMEM();
            return;
        }
        /* Written out; inside copies marked flat (too many for the rules they
         * reference to be expanded in each) references stay rule edges. */
        int flat = b->regions && b->regions->flat_repeat && b->regions->flat_repeat[id];
        b->flat += flat;
        build_repeat(b, &e, from, to, self_rule, self_start, tail, depth);
        b->flat -= flat;
        return;
    }
    case XE_TOKEN: /* (the parser gives each its own rule, never expanded) */
        b->rc = xg2__fail(XG2_ERR_GRAMMAR, "%s(...) %s", (e.flags & XF_EXCLUDE) ? "ExcludeToken" : "Token",
                          b->bytes_only ? "cannot be used inside a lookahead assertion or a Length body"
                                        : "must be a rule of its own and cannot be expanded in place");
        return;
    case XE_MACRO:
        b->rc = xg2__fail(XG2_ERR_GRAMMAR, "%s(...) is not supported in this version", ir->names.a + e.a);
        return;
    case XE_EXCEPT:
        build_except(b, &ir->exprs.a[id], from, to, self_rule, self_start, depth);
        return;
    case XE_DISPATCH: /* (likewise) */
        b->rc = xg2__fail(XG2_ERR_GRAMMAR, "TagDispatch(...) %s", b->bytes_only
                              ? "cannot be used inside a lookahead assertion or a Length body"
                              : "must be a rule of its own and cannot be expanded in place");
        return;
    case XE_LENGTH: /* (the parser gives each its own rule, never expanded) */
        b->rc = xg2__fail(XG2_ERR_GRAMMAR, "Length(...) must be a rule of its own and cannot be expanded in place%s",
                          b->bytes_only ? " (as inside a lookahead assertion or a Length body)" : "");
        return;
    }
}

/* ---- the cross-grammar cache ---- */

#define KEY_MAX_EDGES (1u << 18) /* bigger NFAs are built, not cached */
#define KEY_MAX_SLOTS 1024       /* distinct rules referenced */

/* Index of rule in slots, or slots->n if absent. */
static uint32_t slot_of(const xg2_u32vec *slots, uint32_t rule) {
    uint32_t k = 0;
    while (k < slots->n && slots->a[k] != rule) k++;
    return k;
}

/* The NFA as a cache key: sizes, edges in build order with rule references
 * renumbered by first appearance (slots[k] is the rule of slot k), loop tags,
 * loops without their IR expression.  Returns 0, 1 if the NFA is not to be
 * cached, or -1 on allocation failure. */
static int nfa_key(const nfa_builder *b, uint32_t final, xg2_u32vec *key, xg2_u32vec *slots) {
    if (b->e.n > KEY_MAX_EDGES) return 1;
    if (vec_reserve(key, 4 + 5ull * b->e.n + b->n + 5ull * b->loops.n)) return -1;
    key->a[key->n++] = b->n;
    key->a[key->n++] = final;
    key->a[key->n++] = b->e.n;
    key->a[key->n++] = b->loops.n;
    for (uint32_t i = 0; i < b->e.n; i++) {
        const nedge *e = &b->e.a[i];
        uint32_t a = e->a;
        if (e->kind == NE_RULE) {
            uint32_t k = slot_of(slots, a);
            if (k == slots->n) {
                if (slots->n == KEY_MAX_SLOTS) return 1;
                if (vec_push(slots, a)) return -1;
            }
            a = k;
        }
        key->a[key->n++] = e->from;
        key->a[key->n++] = e->to;
        key->a[key->n++] = e->kind;
        key->a[key->n++] = a;
        key->a[key->n++] = e->b;
    }
    for (uint32_t s = 0; s < b->n; s++) key->a[key->n++] = b->tag.a[s];
    for (uint32_t k = 0; k < b->loops.n; k++) {
        const loop_rec *l = &b->loops.a[k];
        key->a[key->n++] = l->head;
        key->a[key->n++] = l->entry;
        key->a[key->n++] = l->exit;
        key->a[key->n++] = (uint32_t)l->min;
        key->a[key->n++] = (uint32_t)l->max;
    }
    return 0;
}

/* A cached DFA for this use: slots back to rules (each state's rule edges kept
 * sorted by rule), loops pointing at this IR's expressions. */
static void from_slots(xg2_dfa *d, const uint32_t *slots, const loop_rec *loops) {
    for (uint32_t s = 0; s < d->n; s++) {
        xg2_redge *re = d->re + d->roff[s];
        uint32_t n = d->roff[s + 1] - d->roff[s];
        for (uint32_t j = 0; j < n; j++) re[j].rule = slots[re[j].rule];
        for (uint32_t j = 1; j < n; j++) { /* insertion sort: a few edges per state */
            xg2_redge x = re[j];
            uint32_t i = j;
            for (; i > 0 && re[i - 1].rule > x.rule; i--) re[i] = re[i - 1];
            re[i] = x;
        }
    }
    for (uint32_t k = 0; k < d->n_loops; k++) d->loops[k].expr = loops[k].expr;
}

static void store(const xg2_u32vec *key, uint64_t hash, const xg2_u32vec *slots, const xg2_dfa *d) {
    if (!xg2__dfa_cache_fits(key->n, d)) return;
    xg2_dfa canon;
    if (xg2__dfa_copy(d, &canon)) { xg2__clear_error(); return; }
    uint32_t nr = canon.n ? canon.roff[canon.n] : 0;
    for (uint32_t j = 0; j < nr; j++) canon.re[j].rule = slot_of(slots, canon.re[j].rule); /* all present */
    for (uint32_t k = 0; k < canon.n_loops; k++) canon.loops[k].expr = 0;
    xg2__dfa_cache_add(key->a, key->n, hash, &canon);
    xg2__dfa_free(&canon);
}

int xg2__dfa_finish(const xg2_dfa *d, const char *name, int minimise, xg2_dfa *out) {
    uint32_t nblk = d->n, *block = xg2__malloc(sizeof(uint32_t) * (d->n ? d->n : 1));
    if (!block) return XG2_NOMEM();
    int rc = XG2_OK;
    if (minimise) rc = xg2__minimize(d, name, block, &nblk);
    else for (uint32_t s = 0; s < d->n; s++) block[s] = s;
    if (!rc) rc = xg2__rebuild(d, block, nblk, out);
    xg2__free(block);
    return rc;
}

int xg2__fsm_build(const xg2_ir *ir, uint32_t expr, const uint8_t *inline_rule, xg2_regions *regions,
                   uint32_t self_rule, int bytes_only, xg2_dfa *out) {
    if (ir->exprs.a[expr].kind == XE_DISPATCH && !bytes_only)
        return xg2__dispatch_build(ir, expr, self_rule == UINT32_MAX ? NULL : xg2__ir_name(ir, self_rule), out);
    if (ir->exprs.a[expr].kind == XE_TOKEN && !bytes_only) return xg2__token_dfa(out);
    if (ir->exprs.a[expr].kind == XE_LENGTH) {
        if (bytes_only) return xg2__fail(XG2_ERR_GRAMMAR, "Length(...) cannot be used inside a lookahead assertion");
        return xg2__build_length(ir, expr, inline_rule, regions, self_rule, out);
    }
    nfa_builder b = {0};
    b.ir = ir;
    b.inline_rule = inline_rule;
    b.regions = bytes_only ? NULL : regions;
    b.bytes_only = bytes_only;
    nfa_csr c = {0};
    xg2_dfa d = {0};
    uint32_t *block = NULL;
    xg2_u32vec key = {0}, slots = {0};
    memset(out, 0, sizeof *out);
    /* (room for a typical rule's NFA from the start: grown by doubling from
     * nothing, these were ~80 reallocations a build) */
    if (vec_reserve(&b.e, 1024) || vec_reserve(&b.tag, 512)) b.rc = XG2_NOMEM(); /* (reported after build) */
    uint32_t start = new_state(&b), final = new_state(&b);
    (void)start;
    if (b.regions) b.regions->build_serial++;
    b.stack_hash[0] = 0x6a09e667f3bcc909ull;
    if (self_rule != UINT32_MAX) { /* never expand a rule into itself */
        b.stack_hash[1] = xg2__mix64(b.stack_hash[0], self_rule);
        b.stack[b.sp++] = self_rule;
    }
    if (region_of(&b, self_rule) != UINT32_MAX && expr == ir->rules.a[self_rule].body)
        build_region(&b, self_rule, 0, final, 0);
    else
        build(&b, expr, 0, final, self_rule, 0, 1, 0);
    int rc = b.rc;
    if (rc) goto out;
    /* The key is the whole NFA, so byte-only builds share the cache too. */
    uint64_t key_hash = 0;
    int k = nfa_key(&b, final, &key, &slots);
    if (k < 0) { rc = XG2_NOMEM(); goto out; }
    int cached = k == 0;
    if (cached) {
        key_hash = xg2__hash_u32s(key.a, key.n);
        int hit = xg2__dfa_cache_find(key.a, key.n, key_hash, out);
        if (hit < 0) { rc = XG2_NOMEM(); goto out; }
        if (hit) {
            from_slots(out, slots.a, b.loops.a);
            goto out;
        }
    }
    if ((rc = xg2__make_csr(&b, final, &c))) goto out;
    c.tag = b.tag.a;
    c.loops = b.loops.a;
    c.n_loops = b.loops.n;
    c.name = self_rule == UINT32_MAX ? NULL : xg2__ir_name(ir, self_rule);
    uint32_t limit = XG2_MAX_DFA_STATES;
    if (limit < 4 * b.n) limit = 4 * b.n;
    rc = xg2__determinize(&c, limit, &d);
    if (rc == XG2__LOOP_CONFLICT) {
        out->conflict_expr = d.conflict_expr;
        goto out;
    }
    if (rc == XG2_ERR_LIMIT) {
        rc = xg2__fail(XG2_ERR_LIMIT, "%s%s%s needs more than %u automaton states",
                       self_rule == UINT32_MAX ? "an expression" : "rule \"",
                       self_rule == UINT32_MAX ? "" : xg2__ir_name(ir, self_rule),
                       self_rule == UINT32_MAX ? "" : "\"", limit);
        goto out;
    }
    if (rc) goto out;
    block = xg2__malloc(sizeof(uint32_t) * (d.n ? d.n : 1));
    if (!block) { rc = XG2_NOMEM(); goto out; }
    uint32_t nblk = 0;
    if ((rc = xg2__minimize(&d, c.name, block, &nblk))) goto out;
    rc = xg2__rebuild(&d, block, nblk, out);
    if (!rc && cached && !(regions && regions->lookup_only)) store(&key, key_hash, &slots, out);
out:
    vec_free(&key);
    vec_free(&slots);
    vec_free(&b.ctxs);
    vec_free(&b.pending);
    vec_free(&b.e);
    vec_free(&b.ranges);
    vec_free(&b.tag);
    vec_free(&b.loops);
    xg2__free_csr(&c);
    xg2__dfa_free(&d);
    xg2__free(block);
    return rc;
}

int xg2__fsm_unit_pattern(const xg2_ir *ir, uint32_t expr) {
    xg2_dfa d = {0};
    int rc = xg2__fsm_build(ir, expr, NULL, NULL, UINT32_MAX, 1, &d);
    if (rc) {
        xg2__dfa_free(&d);
        return rc == XG2_ERR_NOMEM ? -1 : 0;
    }
    int ok = self_delimiting(&d);
    xg2__dfa_free(&d);
    return ok;
}
