/*
 * fsm.c -- expression -> NFA (Thompson) -> DFA (subset construction) ->
 * minimal DFA (Moore refinement) -> trimmed, renumbered breadth-first.
 *
 * The alphabet is bytes plus rule references.  Minimal, canonically numbered
 * DFAs make equal sub-structures identical, which the structural hash of the
 * cross-grammar cache relies on.
 */
#include "fsm.h"

#include "dfacache.h"
#include "utf8.h"

#define MAX_INLINE_DEPTH 64
#define MAX_BUILD_DEPTH (8 * XG2_MAX_NEST_DEPTH)

enum { NE_EPS, NE_BYTE, NE_RULE };

typedef struct {
    uint32_t from, to, a, b; /* byte edge: bytes a..b; rule edge: rule a */
    uint8_t kind;
} nedge;

typedef struct {
    uint32_t head, entry, exit; /* NFA states: the head, the state entering it, the exit */
    int32_t min, max;
    uint32_t expr;
} loop_rec;

/* An open expansion of a right-linear region: every member ends at `to`. */
typedef struct {
    uint32_t region, to, serial;
} region_ctx;

typedef struct {
    const xg2_ir *ir;
    const uint8_t *inline_rule;
    xg2_regions *regions;
    VEC(region_ctx) ctxs;  /* open expansions, innermost last */
    xg2_u32vec pending;    /* members whose fragment is still to build */
    int bytes_only;
    VEC(nedge) e;
    uint32_t n;
    xg2_u32vec tag;    /* loop tag of each NFA state */
    uint32_t cur_tag;  /* tag given to new states */
    VEC(loop_rec) loops;
    uint32_t stack[MAX_INLINE_DEPTH];
    uint64_t stack_hash[MAX_INLINE_DEPTH + 1]; /* [i]: the rules stack[0 .. i) */
    int sp;
    int rc;
    int flat;          /* inside copies of a repetition marked in regions->flat_repeat */
    xg2_u32vec ranges;
} nfa_builder;

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
} seq_ctx;

static int emit_seq(void *vctx, const uint8_t *seq, int n) {
    seq_ctx *c = vctx;
    uint32_t s = c->from;
    for (int i = 0; i < n; i++) {
        uint32_t t = i == n - 1 ? c->to : new_state(c->b);
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
    build(b, arg[0], s_any, to, self_rule, self_start, 0, depth + 1);
    uint32_t s_one = new_state(b);
    build(b, arg[1], s_one, s_any, self_rule, self_start, 0, depth + 1);
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
        seq_ctx c = {b, from, to};
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

/* ---- subset construction ---- */

typedef struct {
    uint32_t n, final;
    uint32_t *off; /* byte and rule edges of state s: e[off[s] .. off[s+1]) */
    nedge *e;
    uint32_t *eoff; /* epsilon edges of s, targets: eto[eoff[s] .. eoff[s+1]) */
    uint32_t *eto;
    uint32_t *mark;
    uint32_t stamp;
    xg2_u32vec stack;
    const uint32_t *tag;   /* loop tag per NFA state */
    const loop_rec *loops; /* loops[k - 1] */
    uint32_t n_loops;
    uint8_t *in_head_closure; /* n_loops rows of n: state is in the eps-closure of loop k's head */
    const char *name;         /* the rule's, for a compile-budget error (NULL: an expression) */
} nfa_csr;

static int make_csr(nfa_builder *b, uint32_t final, nfa_csr *c) {
    memset(c, 0, sizeof *c);
    c->n = b->n;
    c->final = final;
    c->off = xg2__calloc((size_t)b->n + 1, sizeof(uint32_t));
    c->eoff = xg2__calloc((size_t)b->n + 1, sizeof(uint32_t));
    c->e = xg2__malloc(sizeof(nedge) * (b->e.n ? b->e.n : 1));
    c->eto = xg2__malloc(sizeof(uint32_t) * (b->e.n ? b->e.n : 1));
    c->mark = xg2__calloc(b->n ? b->n : 1, sizeof(uint32_t));
    if (!c->off || !c->eoff || !c->e || !c->eto || !c->mark) return XG2_NOMEM();
    for (uint32_t i = 0; i < b->e.n; i++) {
        if (b->e.a[i].kind == NE_EPS) c->eoff[b->e.a[i].from + 1]++;
        else c->off[b->e.a[i].from + 1]++;
    }
    for (uint32_t s = 0; s < b->n; s++) {
        c->off[s + 1] += c->off[s];
        c->eoff[s + 1] += c->eoff[s];
    }
    uint32_t *fill = xg2__malloc(sizeof(uint32_t) * 2 * (b->n ? b->n : 1)), *efill = fill + b->n;
    if (!fill) return XG2_NOMEM();
    if (b->n) memcpy(fill, c->off, sizeof(uint32_t) * b->n);
    if (b->n) memcpy(efill, c->eoff, sizeof(uint32_t) * b->n);
    for (uint32_t i = 0; i < b->e.n; i++) { /* build order kept within each kind */
        const nedge *e = &b->e.a[i];
        if (e->kind == NE_EPS) c->eto[efill[e->from]++] = e->to;
        else c->e[fill[e->from]++] = *e;
    }
    xg2__free(fill);
    return XG2_OK;
}

static void free_csr(nfa_csr *c) {
    xg2__free(c->in_head_closure);
    xg2__free(c->off);
    xg2__free(c->e);
    xg2__free(c->eoff);
    xg2__free(c->eto);
    xg2__free(c->mark);
    vec_free(&c->stack);
}

/* Epsilon closure of seeds (in place): sorted, unique. */
static int closure(nfa_csr *c, xg2_u32vec *set) {
    if (++c->stamp == 0) {
        memset(c->mark, 0, sizeof(uint32_t) * c->n);
        c->stamp = 1;
    }
    c->stack.n = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < set->n; i++) {
        uint32_t s = set->a[i];
        if (c->mark[s] == c->stamp) continue;
        c->mark[s] = c->stamp;
        set->a[k++] = s;
        if (vec_push(&c->stack, s)) return XG2_NOMEM();
    }
    set->n = k;
    while (c->stack.n) {
        uint32_t s = c->stack.a[--c->stack.n];
        for (uint32_t j = c->eoff[s]; j < c->eoff[s + 1]; j++) {
            uint32_t t = c->eto[j];
            if (c->mark[t] == c->stamp) continue;
            c->mark[t] = c->stamp;
            if (vec_push(set, t) || vec_push(&c->stack, t)) return XG2_NOMEM();
        }
    }
    xg2__sort_u32(set->a, set->n);
    return XG2_OK;
}

/* ---- interning of u32 sequences: subset states, seed lists, signatures ---- */

/* Sequence k is pool[off[k] .. off[k+1]).  Ids go by insertion, so the hash
 * never shows in results. */
typedef struct {
    xg2_u32vec pool, off, hash; /* off.n = count + 1, or 0 while empty */
    uint32_t *tab;              /* open addressing: id + 1, 0 = empty */
    uint32_t cap;
} seqtab;

static uint32_t seq_count(const seqtab *t) { return t->off.n ? t->off.n - 1 : 0; }

/* Id of a[0..n) in t, or UINT32_MAX; *h gets its hash (for seq_add). */
static uint32_t seq_find(const seqtab *t, const uint32_t *a, uint32_t n, uint32_t *h) {
    *h = (uint32_t)xg2__hash_u32s(a, n);
    if (!t->cap) return UINT32_MAX;
    for (uint32_t i = *h & (t->cap - 1); t->tab[i]; i = (i + 1) & (t->cap - 1)) {
        uint32_t k = t->tab[i] - 1;
        if (t->hash.a[k] == *h && t->off.a[k + 1] - t->off.a[k] == n &&
            !memcmp(t->pool.a + t->off.a[k], a, sizeof(uint32_t) * n))
            return k;
    }
    return UINT32_MAX;
}

/* Add a[0..n), absent from t, with its hash h: its id is the old seq_count. */
static int seq_add(seqtab *t, const uint32_t *a, uint32_t n, uint32_t h) {
    uint32_t count = seq_count(t);
    if ((uint64_t)(count + 1) * 2 > t->cap) {
        uint32_t ncap = t->cap ? t->cap * 2 : 64;
        uint32_t *tab = xg2__calloc(ncap, sizeof(uint32_t));
        if (!tab) return XG2_NOMEM();
        for (uint32_t k = 0; k < count; k++) {
            uint32_t i = t->hash.a[k] & (ncap - 1);
            while (tab[i]) i = (i + 1) & (ncap - 1);
            tab[i] = k + 1;
        }
        xg2__free(t->tab);
        t->tab = tab;
        t->cap = ncap;
    }
    if (vec_reserve(&t->pool, (uint64_t)t->pool.n + n) || vec_reserve(&t->off, (uint64_t)count + 2) ||
        vec_reserve(&t->hash, (uint64_t)count + 1))
        return XG2_NOMEM();
    if (n) memcpy(t->pool.a + t->pool.n, a, sizeof(uint32_t) * n);
    if (!t->off.n) t->off.a[t->off.n++] = 0;
    t->pool.n += n;
    t->off.a[t->off.n++] = t->pool.n;
    t->hash.a[t->hash.n++] = h;
    uint32_t i = h & (t->cap - 1);
    while (t->tab[i]) i = (i + 1) & (t->cap - 1);
    t->tab[i] = count + 1;
    return XG2_OK;
}

/* Id of a[0..n) in t, adding it if new. */
static int seq_intern(seqtab *t, const uint32_t *a, uint32_t n, uint32_t *id) {
    uint32_t h;
    if ((*id = seq_find(t, a, n, &h)) != UINT32_MAX) return XG2_OK;
    *id = seq_count(t);
    return seq_add(t, a, n, h);
}

/* Empty t, keeping its memory. */
static void seq_clear(seqtab *t) {
    for (uint32_t k = 0, count = seq_count(t); k < count; k++) {
        uint32_t i = t->hash.a[k] & (t->cap - 1);
        while (t->tab[i] != k + 1) i = (i + 1) & (t->cap - 1);
        t->tab[i] = 0;
    }
    t->pool.n = t->off.n = t->hash.n = 0;
}

static void seq_free(seqtab *t) {
    vec_free(&t->pool);
    vec_free(&t->off);
    vec_free(&t->hash);
    xg2__free(t->tab);
    memset(t, 0, sizeof *t);
}

typedef VEC(xg2_brange) brvec;
typedef VEC(xg2_redge) revec;

static int cmp_redge(const void *a, const void *b) {
    const xg2_redge *x = a, *y = b;
    if (x->rule != y->rule) return x->rule < y->rule ? -1 : 1;
    return (x->to > y->to) - (x->to < y->to);
}

/* ---- counted loops: keeping them apart from their surroundings ---- */

/* An NFA state with only epsilon edges that does not end the rule: it never
 * acts on its own. */
static int inert(const nfa_csr *c, uint32_t s) {
    if (s == c->final) return 0;
    return c->off[s + 1] == c->off[s];
}

/* Per loop: which NFA states the eps-closure of its head reaches; and a loop
 * whose exit reaches its own head again without input (as in (x{0,50})*)
 * cannot keep a count. */
static int prepare_loops(nfa_csr *c, uint32_t *conflict) {
    if (!c->n_loops) return XG2_OK;
    c->in_head_closure = xg2__calloc((size_t)c->n_loops * c->n, 1);
    if (!c->in_head_closure) return XG2_NOMEM();
    xg2_u32vec set = {0};
    int rc = XG2_OK;
    for (uint32_t k = 0; k < c->n_loops && !rc; k++) {
        uint8_t *row = c->in_head_closure + (size_t)k * c->n;
        set.n = 0;
        if (vec_push(&set, c->loops[k].head)) { rc = XG2_NOMEM(); break; }
        if ((rc = closure(c, &set))) break;
        for (uint32_t i = 0; i < set.n; i++) row[set.a[i]] = 1;
        set.n = 0;
        if (vec_push(&set, c->loops[k].exit)) { rc = XG2_NOMEM(); break; }
        if ((rc = closure(c, &set))) break;
        for (uint32_t i = 0; i < set.n; i++)
            if (set.a[i] == c->loops[k].head) { *conflict = c->loops[k].expr; rc = XG2__LOOP_CONFLICT; }
    }
    vec_free(&set);
    return rc;
}

/* Entering a loop (a DFA state whose closure holds a loop head) is ambiguous
 * when the same input also bypasses the loop -- as in "x" (d{40,60})? "z",
 * where after "x" the byte "z" skips the loop: the head's exit check
 * (count >= min) would wrongly refuse it.  So if the seeds reach, without
 * going through a head, both a head with min > 0 and a state that acts on
 * input (byte or rule edges, or the rule's end), the loop must be a rule. */
static int entry_conflict(nfa_csr *c, const uint32_t *seeds, uint32_t n, xg2_u32vec *stack, uint8_t *seen,
                          uint32_t *conflict) {
    if (!c->n_loops) return XG2_OK;
    stack->n = 0;
    uint32_t head = 0;
    int acts = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (seen[seeds[i]]) continue;
        seen[seeds[i]] = 1;
        if (vec_push(stack, seeds[i])) return XG2_NOMEM();
    }
    for (uint32_t k = 0; k < stack->n; k++) {
        uint32_t s = stack->a[k];
        uint32_t t = c->tag[s];
        if (t & 1) {
            if (c->loops[(t >> 1) - 1].min > 0) head = t >> 1;
            continue; /* do not look past a head */
        }
        if (!t && !inert(c, s)) acts = 1;
        for (uint32_t j = c->eoff[s]; j < c->eoff[s + 1]; j++) {
            if (seen[c->eto[j]]) continue;
            seen[c->eto[j]] = 1;
            if (vec_push(stack, c->eto[j])) return XG2_NOMEM();
        }
    }
    for (uint32_t k = 0; k < stack->n; k++) seen[stack->a[k]] = 0;
    if (head && acts) {
        *conflict = c->loops[head - 1].expr;
        return XG2__LOOP_CONFLICT;
    }
    return XG2_OK;
}

/* The loop tag of a DFA state from its members, or XG2__LOOP_CONFLICT: a
 * loop's states may share a DFA state only with the head's own closure (its
 * exit) and with inert states. */
static int set_tag(const nfa_csr *c, const uint32_t *m, uint32_t n, uint32_t *tag, uint32_t *conflict) {
    uint32_t k = 0, head = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = c->tag[m[i]];
        if (!t) continue;
        if (k && (t >> 1) != k) { *conflict = c->loops[k - 1].expr; return XG2__LOOP_CONFLICT; }
        k = t >> 1;
        head |= t & 1;
    }
    *tag = k ? k << 1 | head : 0;
    if (!k) return XG2_OK;
    const uint8_t *row = c->in_head_closure + (size_t)(k - 1) * c->n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = m[i];
        if (c->tag[s] || inert(c, s)) continue;
        if (head && row[s]) continue;
        *conflict = c->loops[k - 1].expr;
        return XG2__LOOP_CONFLICT;
    }
    return XG2_OK;
}

typedef struct {
    seqtab ds;          /* DFA states by member set */
    seqtab seeds;       /* seed lists seen, and the DFA state each led to: */
    xg2_u32vec seed_to;
    uint32_t limit;
    xg2_u32vec estack;  /* entry_conflict's scratch */
    uint8_t *eseen;
    uint32_t *single_to; /* a seed list of one NFA state s: its DFA state + 1, or 0 */
} subset;

/* The DFA state that seeds (in set, which is overwritten) lead to: checked and
 * closed once per distinct seed list.  *id = UINT32_MAX past the limit. */
static int next_state(nfa_csr *c, subset *x, xg2_u32vec *set, uint32_t *conflict, uint32_t *id) {
    /* Most seed lists are one state (the NFA is nearly deterministic): those are
     * remembered in a direct map, the others in the interning table. */
    uint32_t *single = set->n == 1 ? &x->single_to[set->a[0]] : NULL;
    uint32_t h, k;
    int rc;
    if (single) {
        if (*single) {
            *id = *single - 1;
            return XG2_OK;
        }
    } else if ((k = seq_find(&x->seeds, set->a, set->n, &h)) != UINT32_MAX) {
        *id = x->seed_to.a[k];
        return XG2_OK;
    } else if ((rc = seq_add(&x->seeds, set->a, set->n, h))) {
        return rc;
    }
    if ((rc = entry_conflict(c, set->a, set->n, &x->estack, x->eseen, conflict))) return rc;
    if ((rc = closure(c, set))) return rc;
    if ((*id = seq_find(&x->ds, set->a, set->n, &h)) == UINT32_MAX && seq_count(&x->ds) < x->limit) {
        *id = seq_count(&x->ds);
        if ((rc = seq_add(&x->ds, set->a, set->n, h))) return rc;
    }
    if (single) {
        if (*id != UINT32_MAX) *single = *id + 1; /* (past the limit the build stops anyway) */
        return XG2_OK;
    }
    return vec_push(&x->seed_to, *id) ? XG2_NOMEM() : XG2_OK;
}

/* Subset construction.  Returns XG2_ERR_LIMIT (message set) past `limit` states,
 * XG2__LOOP_CONFLICT (out->conflict_expr set) for a loop that must be a rule. */
static int determinize(nfa_csr *c, uint32_t limit, xg2_dfa *out) {
    subset x = {0};
    x.limit = limit;
    const seqtab *ds = &x.ds;
    xg2_u32vec set = {0}, boff = {0}, roff = {0}, tags = {0};
    brvec bedges = {0}, br = {0};
    revec redges = {0}, re = {0};
    VEC(uint8_t) final = {0};
    VEC(uint32_t) bsrc = {0}; /* loop tag of each gathered byte edge's source */
    xg2_u32vec bstart = {0}, bitems = {0}; /* byte edges bucketed by interval */
    xg2_loop_info *loops = NULL;
    int rc = XG2_OK;
    uint32_t id, conflict = 0;

    if (c->n_loops) {
        loops = xg2__calloc(c->n_loops, sizeof *loops);
        if (!loops) goto oom;
        for (uint32_t k = 0; k < c->n_loops; k++) {
            loops[k].min = c->loops[k].min;
            loops[k].max = c->loops[k].max;
            loops[k].expr = c->loops[k].expr;
        }
    }
    if ((rc = prepare_loops(c, &conflict))) goto out;
    if (c->n_loops && !(x.eseen = xg2__calloc(c->n, 1))) goto oom;
    if (!(x.single_to = xg2__calloc(c->n ? c->n : 1, sizeof(uint32_t)))) goto oom;
    if (vec_push(&set, 0)) goto oom;
    if ((rc = next_state(c, &x, &set, &conflict, &id))) goto out;
    for (uint32_t d = 0; d < seq_count(ds); d++) {
        if ((d & 15) == 0 && (rc = xg2__budget_check("determinising rule", c->name))) goto out;
        /* Gather the members' edges.  (Copy the member list: the pool may move.) */
        uint32_t nm = ds->off.a[d + 1] - ds->off.a[d];
        if (vec_reserve(&set, nm)) goto oom;
        if (nm) memcpy(set.a, ds->pool.a + ds->off.a[d], sizeof(uint32_t) * nm);
        set.n = nm;
        uint32_t tag;
        if ((rc = set_tag(c, set.a, set.n, &tag, &conflict))) goto out;
        bedges.n = redges.n = bsrc.n = 0;
        uint8_t fin = 0;
        for (uint32_t k = 0; k < set.n; k++) {
            uint32_t s = set.a[k];
            if (s == c->final) fin = 1;
            for (uint32_t j = c->off[s]; j < c->off[s + 1]; j++) {
                const nedge *e = &c->e[j];
                if (e->kind == NE_BYTE) {
                    xg2_brange r = {e->a, e->b, e->to};
                    if (vec_push(&bedges, r) || vec_push(&bsrc, c->tag[s])) goto oom;
                } else if (e->kind == NE_RULE) {
                    xg2_redge r = {e->a, e->to};
                    if (vec_push(&redges, r)) goto oom;
                }
            }
        }
        if ((tag & 1) && redges.n) { conflict = c->loops[(tag >> 1) - 1].expr; rc = XG2__LOOP_CONFLICT; goto out; }
        if (vec_push(&final, fin) || vec_push(&boff, br.n) || vec_push(&roff, re.n) || vec_push(&tags, tag)) goto oom;
        /* Byte edges: split 0..255 at every range boundary (a bitmap of 0..256). */
        uint64_t cut[5] = {0, 0, 0, 0, 0};
        for (uint32_t k = 0; k < bedges.n; k++) {
            uint32_t lo = bedges.a[k].lo, end = bedges.a[k].hi + 1;
            cut[lo >> 6] |= 1ull << (lo & 63);
            cut[end >> 6] |= 1ull << (end & 63);
        }
        /* Distinct boundaries: interval k is [pts[k], pts[k+1]); every edge
         * starts and ends at boundaries, so edge lo..hi covers intervals
         * at[lo] .. at[hi + 1] - 1. */
        uint32_t pts[257], at[257], np = 0;
        for (uint32_t w = 0; w < 5; w++)
            for (uint64_t m = cut[w]; m; m &= m - 1) {
                uint32_t b = w * 64 + (uint32_t)__builtin_ctzll(m);
                at[b] = np;
                pts[np++] = b;
            }
        /* Bucket the edges by the intervals they cover (one pass per edge, not
         * one scan of all edges per interval: wide alternations stay linear). */
        uint32_t nint = np ? np - 1 : 0;
        if (vec_reserve(&bstart, (uint64_t)nint + 1)) goto oom;
        memset(bstart.a, 0, sizeof(uint32_t) * (nint + 1));
        bstart.n = nint + 1;
        uint64_t total = 0;
        for (uint32_t j = 0; j < bedges.n; j++) {
            uint32_t k0 = at[bedges.a[j].lo], k1 = at[bedges.a[j].hi + 1] - 1;
            for (uint32_t k = k0; k <= k1; k++) bstart.a[k]++;
            total += k1 - k0 + 1;
        }
        if (vec_reserve(&bitems, total)) goto oom;
        for (uint32_t k = 0, acc = 0; k <= nint; k++) {
            uint32_t c0 = bstart.a[k];
            bstart.a[k] = acc;
            acc += c0;
        }
        for (uint32_t j = 0; j < bedges.n; j++) { /* ascending j inside each bucket */
            uint32_t k0 = at[bedges.a[j].lo], k1 = at[bedges.a[j].hi + 1] - 1;
            for (uint32_t k = k0; k <= k1; k++) bitems.a[bstart.a[k]++] = j;
        }
        for (uint32_t k = 0, from = 0; k < nint; k++) {
            uint32_t lo = pts[k], hi = pts[k + 1] - 1, to = bstart.a[k];
            uint32_t first_item = from;
            from = to;
            set.n = 0;
            int from_loop = 0, from_outside = 0;
            for (uint32_t q = first_item; q < to; q++) {
                uint32_t j = bitems.a[q];
                if (vec_push(&set, bedges.a[j].to)) goto oom;
                if (bsrc.a[j]) from_loop = 1; else from_outside = 1;
            }
            if (!set.n) continue;
            /* From a loop head a byte either starts an iteration or leaves the loop. */
            if (tag & 1) {
                uint32_t k1 = (tag >> 1) - 1;
                if (from_loop && from_outside) { conflict = c->loops[k1].expr; rc = XG2__LOOP_CONFLICT; goto out; }
                if (from_loop)
                    byteset_add_range(&loops[k1].first, lo, hi);
            }
            if ((rc = next_state(c, &x, &set, &conflict, &id))) goto out;
            if (id == UINT32_MAX) goto limit;
            if (br.n > boff.a[d] && br.a[br.n - 1].to == id && br.a[br.n - 1].hi + 1 == lo) {
                br.a[br.n - 1].hi = hi;
            } else {
                xg2_brange r = {lo, hi, id};
                if (vec_push(&br, r)) goto oom;
            }
        }
        /* Rule edges, grouped by rule. */
        if (redges.n > 32) qsort(redges.a, redges.n, sizeof(xg2_redge), cmp_redge);
        else for (uint32_t j = 1; j < redges.n; j++) { /* insertion sort: qsort allocates */
            xg2_redge e = redges.a[j];
            uint32_t i = j;
            for (; i > 0 && (redges.a[i - 1].rule > e.rule ||
                             (redges.a[i - 1].rule == e.rule && redges.a[i - 1].to > e.to)); i--)
                redges.a[i] = redges.a[i - 1];
            redges.a[i] = e;
        }
        for (uint32_t k = 0; k < redges.n;) {
            uint32_t rule = redges.a[k].rule;
            set.n = 0;
            for (; k < redges.n && redges.a[k].rule == rule; k++)
                if (vec_push(&set, redges.a[k].to)) goto oom;
            if ((rc = next_state(c, &x, &set, &conflict, &id))) goto out;
            if (id == UINT32_MAX) goto limit;
            xg2_redge r = {rule, id};
            if (vec_push(&re, r)) goto oom;
        }
    }
    if (vec_push(&boff, br.n) || vec_push(&roff, re.n)) goto oom;
    out->n = seq_count(ds);
    out->boff = boff.a; boff.a = NULL;
    out->br = br.a; br.a = NULL;
    out->roff = roff.a; roff.a = NULL;
    out->re = re.a; re.a = NULL;
    out->final = final.a; final.a = NULL;
    out->tag = tags.a; tags.a = NULL;
    out->loops = loops; loops = NULL;
    out->n_loops = c->n_loops;
    goto out;
limit:
    rc = XG2_ERR_LIMIT;
    goto out;
oom:
    rc = XG2_NOMEM();
out:
    if (rc == XG2__LOOP_CONFLICT) out->conflict_expr = conflict;
    seq_free(&x.ds);
    seq_free(&x.seeds);
    vec_free(&x.seed_to);
    vec_free(&set);
    vec_free(&boff);
    vec_free(&roff);
    vec_free(&tags);
    vec_free(&bedges);
    vec_free(&bsrc);
    vec_free(&bstart);
    vec_free(&bitems);
    vec_free(&br);
    vec_free(&redges);
    vec_free(&re);
    vec_free(&final);
    vec_free(&x.estack);
    xg2__free(x.eseen);
    xg2__free(x.single_to);
    xg2__free(loops);
    return rc;
}

/* ---- minimisation, trimming, canonical numbering ---- */

/* Signature of state s: (final, tag, byte edges merged by target class, rule
 * edges).  cls(t) names the class of a target. */
typedef struct {
    const xg2_dfa *d;
    const uint32_t *comp;  /* SCC of each state */
    uint32_t cur;          /* the SCC being refined */
    const uint32_t *block; /* final classes (other SCCs) */
    const uint32_t *local; /* current classes inside `cur` */
} sig_ctx;

static uint32_t target_class(const sig_ctx *x, uint32_t t) {
    return x->comp[t] == x->cur ? 0x80000000u | x->local[t] : x->block[t];
}

static int signature(const sig_ctx *x, uint32_t s, uint32_t head, xg2_u32vec *sig) {
    const xg2_dfa *d = x->d;
    sig->n = 0;
    if (vec_push(sig, head) || vec_push(sig, d->tag ? d->tag[s] : 0)) return 1;
    uint32_t mark = sig->n;
    for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) {
        uint32_t tc = target_class(x, d->br[j].to);
        if (sig->n > mark && sig->a[sig->n - 1] == tc && sig->a[sig->n - 2] + 1 == d->br[j].lo)
            sig->a[sig->n - 2] = d->br[j].hi;
        else if (vec_push(sig, d->br[j].lo) || vec_push(sig, d->br[j].hi) || vec_push(sig, tc))
            return 1;
    }
    if (vec_push(sig, UINT32_MAX)) return 1;
    for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++)
        if (vec_push(sig, d->re[j].rule) || vec_push(sig, target_class(x, d->re[j].to))) return 1;
    return 0;
}

/* Strongly connected components of the DFA, sinks first (iterative Tarjan). */
static int dfa_scc(const xg2_dfa *d, uint32_t *comp, uint32_t *n_comp) {
    uint32_t n = d->n;
    int rc = XG2_OK;
    uint32_t *idx = xg2__malloc(sizeof(uint32_t) * n), *low = xg2__malloc(sizeof(uint32_t) * n);
    uint8_t *on = xg2__calloc(n, 1);
    xg2_u32vec st = {0}, cv = {0}, ci = {0};
    if (!idx || !low || !on) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t v = 0; v < n; v++) idx[v] = UINT32_MAX;
    uint32_t counter = 0, nc = 0;
    /* Edge i of state v: byte edges first, then rule edges. */
#define N_EDGES(v) (d->boff[(v) + 1] - d->boff[v] + d->roff[(v) + 1] - d->roff[v])
#define EDGE(v, i) ((i) < d->boff[(v) + 1] - d->boff[v] ? d->br[d->boff[v] + (i)].to \
                                                        : d->re[d->roff[v] + (i) - (d->boff[(v) + 1] - d->boff[v])].to)
    for (uint32_t root = 0; root < n; root++) {
        if (idx[root] != UINT32_MAX) continue;
        idx[root] = low[root] = counter++;
        on[root] = 1;
        if (vec_push(&st, root) || vec_push(&cv, root) || vec_push(&ci, 0)) { rc = XG2_NOMEM(); goto out; }
        while (cv.n) {
            uint32_t v = cv.a[cv.n - 1];
            if (ci.a[ci.n - 1] < N_EDGES(v)) {
                uint32_t w = EDGE(v, ci.a[ci.n - 1]);
                ci.a[ci.n - 1]++;
                if (idx[w] == UINT32_MAX) {
                    idx[w] = low[w] = counter++;
                    on[w] = 1;
                    if (vec_push(&st, w) || vec_push(&cv, w) || vec_push(&ci, 0)) { rc = XG2_NOMEM(); goto out; }
                } else if (on[w] && idx[w] < low[v]) {
                    low[v] = idx[w];
                }
                continue;
            }
            cv.n--;
            ci.n--;
            if (cv.n && low[v] < low[cv.a[cv.n - 1]]) low[cv.a[cv.n - 1]] = low[v];
            if (low[v] == idx[v]) {
                uint32_t x;
                do {
                    x = st.a[--st.n];
                    on[x] = 0;
                    comp[x] = nc;
                } while (x != v);
                nc++;
            }
        }
    }
#undef N_EDGES
#undef EDGE
    *n_comp = nc;
out:
    xg2__free(idx);
    xg2__free(low);
    xg2__free(on);
    vec_free(&st);
    vec_free(&cv);
    vec_free(&ci);
    return rc;
}

/* Refinement of one cyclic component to its coarsest stable partition under
 * signature() (what Moore rounds reach), touching only states that can change.
 * Classes keep their ids when they split -- the largest part keeps it -- so
 * only predecessors of states whose id changed can get a new signature; those
 * are marked dirty.  A class keeps its dirty members first in elems; its clean
 * members all share one signature.  A state changes id only into a part at
 * most half its class, so at most log2(m) times. */
typedef struct {
    uint32_t *elems, *pos;            /* states by class; index of each in elems (elems owns the u32 arrays) */
    uint32_t *cstart, *clen, *ndirty; /* per class of the component */
    uint32_t *queue;                  /* ring of the classes with dirty members */
    uint32_t *gid, *tmp, *gsize, *gbeg; /* scratch for splitting one class by signature */
    uint8_t *dirty;
    uint32_t *poff, *pend, *pv; /* predecessors inside the same component */
} refiner;

static void mark_dirty(refiner *r, const uint32_t *local, uint32_t m, uint32_t *qhead, uint32_t *qn, uint32_t s) {
    if (r->dirty[s]) return;
    r->dirty[s] = 1;
    uint32_t k = local[s], i = r->pos[s], j = r->cstart[k] + r->ndirty[k]++, u = r->elems[j];
    r->elems[j] = s;
    r->pos[s] = j;
    r->elems[i] = u;
    r->pos[u] = i;
    if (r->ndirty[k] == 1) r->queue[(*qhead + (*qn)++) % m] = k;
}

/* Classes of mem[0..m) into local (ids 0 .. *count - 1). */
static int refine(const sig_ctx *x, refiner *r, uint32_t *local, const uint32_t *mem, uint32_t m, uint32_t *count,
                  seqtab *loc, xg2_u32vec *sig) {
    const xg2_dfa *d = x->d;
    uint32_t nclass = 0, qhead = 0, qn = 0, n1 = 0, at[2];
    for (uint32_t i = 0; i < m; i++) n1 += d->final[mem[i]];
    at[0] = 0;
    at[1] = m - n1;
    for (uint32_t f = 0; f < 2; f++) { /* non-final and final states, all dirty */
        uint32_t len = f ? n1 : m - n1;
        if (!len) continue;
        r->cstart[nclass] = at[f];
        r->clen[nclass] = r->ndirty[nclass] = len;
        r->queue[qn++] = nclass++;
    }
    for (uint32_t i = 0; i < m; i++) {
        uint32_t s = mem[i], f = d->final[s];
        local[s] = f && n1 < m;
        r->pos[s] = at[f]++;
        r->elems[r->pos[s]] = s;
        r->dirty[s] = 1;
    }
    while (qn) {
        uint32_t c = r->queue[qhead], st = r->cstart[c], len = r->clen[c], nd = r->ndirty[c], ng = 0, g;
        qhead = (qhead + 1) % m;
        qn--;
        seq_clear(loc);
        if (nd < len) { /* group 0: the clean members' signature */
            if (signature(x, r->elems[st + nd], c, sig) || seq_intern(loc, sig->a, sig->n, &g)) return XG2_NOMEM();
            r->gsize[ng++] = len - nd;
        }
        for (uint32_t i = 0; i < nd; i++) {
            uint32_t s = r->elems[st + i];
            r->dirty[s] = 0;
            if (signature(x, s, c, sig) || seq_intern(loc, sig->a, sig->n, &g)) return XG2_NOMEM();
            if (g == ng) r->gsize[ng++] = 0;
            r->gsize[g]++;
            r->gid[i] = g;
        }
        r->ndirty[c] = 0;
        if (ng == 1) continue;
        /* Dirty prefix sorted by group, group 0 last (next to the clean members). */
        uint32_t big = 0, b = 0;
        for (g = 1; g < ng; g++) {
            r->gbeg[g] = b;
            b += r->gsize[g];
            if (r->gsize[g] > r->gsize[big]) big = g;
        }
        r->gbeg[0] = b;
        for (uint32_t i = 0; i < nd; i++) r->tmp[r->gbeg[r->gid[i]]++] = r->elems[st + i];
        for (uint32_t i = 0; i < nd; i++) {
            r->elems[st + i] = r->tmp[i];
            r->pos[r->tmp[i]] = st + i;
        }
        /* gbeg[g] now ends group g's dirty part; each part but the largest gets a new id. */
        uint32_t nchanged = 0;
        for (g = 0; g < ng; g++) {
            uint32_t end = g ? r->gbeg[g] : len, beg = end - r->gsize[g], k = g == big ? c : nclass++;
            r->cstart[k] = st + beg;
            r->clen[k] = r->gsize[g];
            r->ndirty[k] = 0;
            if (k != c)
                for (uint32_t i = st + beg; i < st + end; i++) {
                    local[r->elems[i]] = k;
                    r->tmp[nchanged++] = r->elems[i];
                }
        }
        for (uint32_t i = 0; i < nchanged; i++)
            for (uint32_t j = r->poff[r->tmp[i]]; j < r->pend[r->tmp[i]]; j++)
                mark_dirty(r, local, m, &qhead, &qn, r->pv[j]);
    }
    *count = nclass;
    return XG2_OK;
}

static void add_pred(refiner *r, const uint32_t *comp, int fill, uint32_t s, uint32_t t) {
    if (comp[s] != comp[t]) return;
    if (!fill)
        r->poff[t + 1]++;
    else if (r->pend[t] == r->poff[t] || r->pv[r->pend[t] - 1] != s) /* s's edges to t are adjacent: keep one */
        r->pv[r->pend[t]++] = s;
}

/* Work arrays for refine(), sized for all of d, and the predecessor lists. */
static int refiner_init(refiner *r, const xg2_dfa *d, const uint32_t *comp) {
    uint32_t n = d->n;
    uint32_t *w = xg2__malloc(sizeof(uint32_t) * (12 * (size_t)n + 1));
    r->dirty = xg2__calloc(n, 1);
    if (!w || !r->dirty) {
        xg2__free(w);
        return XG2_NOMEM();
    }
    uint32_t **arr[] = {&r->elems, &r->pos, &r->cstart, &r->clen, &r->ndirty, &r->queue,
                        &r->gid, &r->tmp, &r->gsize, &r->gbeg, &r->pend, &r->poff};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) *arr[i] = w + i * (size_t)n;
    memset(r->poff, 0, sizeof(uint32_t) * ((size_t)n + 1));
    for (int fill = 0; fill < 2; fill++) { /* count, then fill */
        if (fill) {
            for (uint32_t t = 0; t < n; t++) r->poff[t + 1] += r->poff[t];
            if (!(r->pv = xg2__malloc(sizeof(uint32_t) * (r->poff[n] ? r->poff[n] : 1)))) return XG2_NOMEM();
            memcpy(r->pend, r->poff, sizeof(uint32_t) * n);
        }
        for (uint32_t s = 0; s < n; s++) {
            for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) add_pred(r, comp, fill, s, d->br[j].to);
            for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++) add_pred(r, comp, fill, s, d->re[j].to);
        }
    }
    return XG2_OK;
}

static void refiner_free(refiner *r) {
    xg2__free(r->elems);
    xg2__free(r->dirty);
    xg2__free(r->pv);
}

/* Minimisation by components, sinks first: a state outside any cycle gets its
 * class from its signature over final classes in one step; the states of a
 * cycle are refined among themselves (refine()).  Linear on the long chains that
 * literals produce; states of different cycles are not merged. */
static int minimize(const xg2_dfa *d, const char *name, uint32_t *block, uint32_t *n_blocks) {
    uint32_t n = d->n, nc = 0;
    int rc = XG2_OK;
    uint32_t *comp = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *local = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *order = xg2__malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *start = xg2__calloc((size_t)n + 2, sizeof(uint32_t));
    xg2_u32vec sig = {0};
    seqtab global = {0}, loc = {0};
    refiner r = {0};
    if (!comp || !local || !order || !start) { rc = XG2_NOMEM(); goto out; }
    if ((rc = dfa_scc(d, comp, &nc))) goto out;
    for (uint32_t s = 0; s < n; s++) start[comp[s] + 1]++;
    for (uint32_t c = 0; c < nc; c++) start[c + 1] += start[c];
    {
        uint32_t *pos = xg2__malloc(sizeof(uint32_t) * (nc + 1));
        if (!pos) { rc = XG2_NOMEM(); goto out; }
        memcpy(pos, start, sizeof(uint32_t) * (nc + 1));
        for (uint32_t s = 0; s < n; s++) order[pos[comp[s]]++] = s;
        xg2__free(pos);
    }
    sig_ctx x = {d, comp, UINT32_MAX, block, local};
    uint32_t next_block = 0;
    for (uint32_t c = 0; c < nc; c++) {
        const uint32_t *mem = order + start[c];
        uint32_t m = start[c + 1] - start[c];
        if ((c & 63) == 0 && (rc = xg2__budget_check("minimising rule", name))) goto out;
        x.cur = c;
        int cyclic = m > 1;
        if (!cyclic) { /* a single state is cyclic only with a self edge */
            uint32_t s = mem[0];
            for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) cyclic |= d->br[j].to == s;
            for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++) cyclic |= d->re[j].to == s;
        }
        if (!cyclic) {
            uint32_t s = mem[0], id;
            x.cur = UINT32_MAX; /* every target is final already */
            if (signature(&x, s, d->final[s], &sig)) { rc = XG2_NOMEM(); goto out; }
            if ((rc = seq_intern(&global, sig.a, sig.n, &id))) goto out;
            if (id == next_block) next_block++;
            block[s] = id;
            continue;
        }
        /* Refinement inside the cycle; its classes are new global classes. */
        uint32_t count = 1;
        if (m == 1) { /* one state on a self edge (JSON's whitespace): its own class, as refine() finds */
            local[mem[0]] = 0;
        } else {
            if (!r.elems && (rc = refiner_init(&r, d, comp))) goto out;
            if ((rc = refine(&x, &r, local, mem, m, &count, &loc, &sig))) goto out;
        }
        /* Global ids: reserve fresh ones in the global table by a unique signature. */
        for (uint32_t i = 0; i < m; i++) {
            uint32_t s = mem[i];
            block[s] = next_block + local[s];
        }
        /* Keep the global table's ids in step: add placeholder records. */
        for (uint32_t k = 0; k < count; k++) {
            sig.n = 0;
            uint32_t id;
            if (vec_push(&sig, 0xFFFFFFFEu) || vec_push(&sig, next_block + k)) { rc = XG2_NOMEM(); goto out; }
            if ((rc = seq_intern(&global, sig.a, sig.n, &id))) goto out;
        }
        next_block += count;
    }
    *n_blocks = next_block;
out:
    xg2__free(comp);
    xg2__free(local);
    xg2__free(order);
    xg2__free(start);
    vec_free(&sig);
    seq_free(&global);
    seq_free(&loc);
    refiner_free(&r);
    return rc;
}

/* Quotient by block, keep states that are reachable and can reach a final
 * state, number them breadth-first from the start. */
static int rebuild(const xg2_dfa *d, const uint32_t *block, uint32_t nblk, xg2_dfa *out) {
    int rc = XG2_OK;
    uint32_t *rep = xg2__malloc(sizeof(uint32_t) * (nblk ? nblk : 1));
    uint8_t *live = xg2__calloc(nblk ? nblk : 1, 1);
    uint32_t *order = xg2__malloc(sizeof(uint32_t) * (nblk ? nblk : 1));
    uint32_t *newid = xg2__malloc(sizeof(uint32_t) * (nblk ? nblk : 1));
    xg2_u32vec boff = {0}, roff = {0}, tags = {0};
    brvec br = {0};
    revec re = {0};
    VEC(uint8_t) fin = {0};
    if (!rep || !live || !order || !newid) goto oom;
    for (uint32_t b = 0; b < nblk; b++) rep[b] = UINT32_MAX;
    for (uint32_t s = 0; s < d->n; s++)
        if (rep[block[s]] == UINT32_MAX) rep[block[s]] = s;
    /* Co-reachability: iterate to a fixpoint (DFAs here are small). */
    for (uint32_t b = 0; b < nblk; b++) live[b] = d->final[rep[b]];
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t b = 0; b < nblk; b++) {
            if (live[b]) continue;
            uint32_t s = rep[b];
            for (uint32_t j = d->boff[s]; j < d->boff[s + 1] && !live[b]; j++) live[b] = live[block[d->br[j].to]];
            for (uint32_t j = d->roff[s]; j < d->roff[s + 1] && !live[b]; j++) live[b] = live[block[d->re[j].to]];
            changed |= live[b];
        }
    }
    memset(out, 0, sizeof *out);
    if (!d->n || !live[block[0]]) goto out; /* matches nothing */
    for (uint32_t b = 0; b < nblk; b++) newid[b] = UINT32_MAX;
    uint32_t head = 0, tail = 0;
    order[tail++] = block[0];
    newid[block[0]] = 0;
    while (head < tail) {
        uint32_t b = order[head++];
        uint32_t s = rep[b];
        if (vec_push(&boff, br.n) || vec_push(&roff, re.n) || vec_push(&fin, d->final[s]) ||
            vec_push(&tags, d->tag ? d->tag[s] : 0))
            goto oom;
        for (uint32_t j = d->boff[s]; j < d->boff[s + 1]; j++) {
            uint32_t tb = block[d->br[j].to];
            if (!live[tb]) continue;
            if (newid[tb] == UINT32_MAX) { newid[tb] = tail; order[tail++] = tb; }
            xg2_brange r = {d->br[j].lo, d->br[j].hi, newid[tb]};
            if (br.n > boff.a[boff.n - 1] && br.a[br.n - 1].to == r.to && br.a[br.n - 1].hi + 1 == r.lo)
                br.a[br.n - 1].hi = r.hi;
            else if (vec_push(&br, r))
                goto oom;
        }
        for (uint32_t j = d->roff[s]; j < d->roff[s + 1]; j++) {
            uint32_t tb = block[d->re[j].to];
            if (!live[tb]) continue;
            if (newid[tb] == UINT32_MAX) { newid[tb] = tail; order[tail++] = tb; }
            xg2_redge r = {d->re[j].rule, newid[tb]};
            if (vec_push(&re, r)) goto oom;
        }
    }
    if (vec_push(&boff, br.n) || vec_push(&roff, re.n)) goto oom;
    out->n = tail;
    out->boff = boff.a; boff.a = NULL;
    out->br = br.a; br.a = NULL;
    out->roff = roff.a; roff.a = NULL;
    out->re = re.a; re.a = NULL;
    out->final = fin.a; fin.a = NULL;
    out->tag = tags.a; tags.a = NULL;
    if (d->n_loops) {
        out->loops = xg2__malloc(sizeof(xg2_loop_info) * d->n_loops);
        if (!out->loops) goto oom;
        memcpy(out->loops, d->loops, sizeof(xg2_loop_info) * d->n_loops);
        out->n_loops = d->n_loops;
    }
    goto out;
oom:
    rc = XG2_NOMEM();
out:
    vec_free(&tags);
    xg2__free(rep);
    xg2__free(live);
    xg2__free(order);
    xg2__free(newid);
    vec_free(&boff);
    vec_free(&roff);
    vec_free(&br);
    vec_free(&re);
    vec_free(&fin);
    return rc;
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

/* ---- Length(body, unit, min, max) ---- */

/* Not empty, and no string a proper prefix of another: nothing goes on from a
 * final state (a counted loop's child, a Length unit). */
static int self_delimiting(const xg2_dfa *d) {
    int ok = d->n > 0 && !d->final[0];
    for (uint32_t s = 0; s < d->n && ok; s++)
        if (d->final[s] && (d->boff[s + 1] > d->boff[s] || d->roff[s + 1] > d->roff[s])) ok = 0;
    return ok;
}

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
    if ((rc = dfa_scc(d, comp, &nc))) goto out;
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
    if (!(rc = minimize(&d, NULL, block, &nblk))) rc = rebuild(&d, block, nblk, out);
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
static int build_length(const xg2_ir *ir, uint32_t expr, const uint8_t *inline_rule, xg2_regions *regions,
                        uint32_t rule, xg2_dfa *out) {
    const xg2_expr e = ir->exprs.a[expr];
    xg2_dfa B = {0}, U = {0}, P = {0};
    uint32_t *map = NULL, *rest = NULL;
    xg2_u32vec pb = {0}, pu = {0}, boff = {0}, tag = {0};
    brvec br = {0};
    flagvec fin = {0};
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = length_body(ir, ir->pool.a[e.a], inline_rule, regions, &B))) goto out;
    if ((rc = xg2__fsm_build(ir, ir->pool.a[e.a + 1], NULL, NULL, UINT32_MAX, 1, &U))) goto out;
    if (B.n_loops || (B.n && B.roff[B.n])) {
        rc = length_error(ir, rule, "needs a regular body: no recursion, no counted repetition");
        goto out;
    }
    int unit_ok = self_delimiting(&U); /* (built byte by byte: no rule edges) */
    if (unit_ok) { /* finite: no cycle (every component one state, none with a self edge) */
        uint32_t *cmp = xg2__malloc(sizeof(uint32_t) * U.n), nc = 0;
        if (!cmp || dfa_scc(&U, cmp, &nc)) { xg2__free(cmp); rc = XG2_NOMEM(); goto out; }
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

int xg2__dfa_finish(const xg2_dfa *d, const char *name, int minimise, xg2_dfa *out) {
    uint32_t nblk = d->n, *block = xg2__malloc(sizeof(uint32_t) * (d->n ? d->n : 1));
    if (!block) return XG2_NOMEM();
    int rc = XG2_OK;
    if (minimise) rc = minimize(d, name, block, &nblk);
    else for (uint32_t s = 0; s < d->n; s++) block[s] = s;
    if (!rc) rc = rebuild(d, block, nblk, out);
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
        return build_length(ir, expr, inline_rule, regions, self_rule, out);
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
    if ((rc = make_csr(&b, final, &c))) goto out;
    c.tag = b.tag.a;
    c.loops = b.loops.a;
    c.n_loops = b.loops.n;
    c.name = self_rule == UINT32_MAX ? NULL : xg2__ir_name(ir, self_rule);
    uint32_t limit = XG2_MAX_DFA_STATES;
    if (limit < 4 * b.n) limit = 4 * b.n;
    rc = determinize(&c, limit, &d);
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
    if ((rc = minimize(&d, c.name, block, &nblk))) goto out;
    rc = rebuild(&d, block, nblk, out);
    if (!rc && cached) store(&key, key_hash, &slots, out);
out:
    vec_free(&key);
    vec_free(&slots);
    vec_free(&b.ctxs);
    vec_free(&b.pending);
    vec_free(&b.e);
    vec_free(&b.ranges);
    vec_free(&b.tag);
    vec_free(&b.loops);
    free_csr(&c);
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
