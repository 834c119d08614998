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
 * the subtree is uncertain.  Rule calls that stay within one level below the
 * item's rule (tail calls chained any depth) are stepped as an NFA over the
 * automata involved, a set of configurations per depth; other states that call
 * rules are walked nested inside each callee from its start (and over their own
 * byte edges), one walk per way in, the parser taking over at the callees' ends.
 * A counted repetition of a one-piece child is nested into as the child's
 * automaton wrapping around, with its count.
 *
 * Dense states are sped up by slices: if every string over a slice's class is
 * alive from the item's state (a product walk of the two automata, remembered
 * for every state it meets; slice_proofs.c), the slice's tokens are accepted in bulk and only
 * the rest are walked; and a trie subtree whose bytes the current state loops
 * on is taken whole.  Of a split state's walks, those after one that took a
 * slice skip the subtrees made of its members.
 */
#include "maskcache.h"



XG2_HIDDEN int xg2__parser_reinit_local(xg2_parser *p, uint32_t state, uint32_t count);

/* ---- the local walk ---- */

/* The accepted tokens of a compute: the vocabulary-wide bitset, and while they
 * are few also their list (trie order, maybe repeated) -- a sparse split then
 * costs neither clearing nor scanning the bitset (most splits inside JSON). */
typedef struct {
    int32_t *list;
    uint32_t n, cap;
    int dense; /* more than cap, or set in bulk: only the bitset holds them */
} acc_log;

typedef struct {
    const xg2_grammar *g;
    xg2_parser *p;       /* used below earley_from */
    uint32_t earley_from; /* depth where the Earley parser took over, or UINT32_MAX */
    uint32_t nest_from;   /* depth below which a lone item steps as a DFA, or UINT32_MAX */
    uint32_t nest_rule;   /* that item's rule */
    int nest_root;        /* that item is the root item itself */
    uint32_t nest_base;   /* the rule nested from depth 0 (see call_only), or XG2_NONE */
    /* A lone item iterating the unit child of a counted repetition (see
     * unit_child): the repetition, and its count where the nesting began; the
     * iterations since are cs[d].  XG2_NONE: not iterating. */
    uint32_t nest_rep, nest_rep_base, rep_count0;
    uint32_t rep_start;       /* the child's start: "between iterations" */
    int rep_root;             /* the repetition is the root item: its ends mark comp[] */
    uint64_t rep_unit_groups; /* byte groups each of whose bytes is a whole iteration */
    uint32_t rep_far;         /* iterations left beyond which no token can reach the bound */
    uint32_t far;             /* the same for counted loops inside automata (xg2__count_far) */
    uint32_t *qs;        /* DFA state per depth */
    uint32_t *cs;        /* loop count per depth */
    uint8_t *cand;       /* cand[d]: some token through depth d may be uncertain */
    uint8_t *comp;       /* comp[d]: the root rule can have ended after d bytes */
    uint8_t *path;       /* path[d]: the byte into depth d */
    uint32_t *at;        /* at[d]: the node at depth d on the walk's path (at[0]: the root) */
    const xg2_byteset *follow;
    uint32_t cand_from;   /* shallowest depth whose byte may follow an end of the root rule */
    /* Slices an earlier walk of the same item took in bulk (bits), and the
     * walked trie's per-node membership (the full trie's, else NULL): their
     * tokens are accepted already, so their subtrees are skipped. */
    uint8_t *taken;
    const uint8_t *in_slices;
    /* Call sets (see set_add): below set_from the walk steps a set of
     * configurations per depth, expanded from set_entry (count set_entry_n) */
    uint32_t set_from, set_entry, set_entry_n;
    uint32_t *set_q, *set_n, *set_r; /* depth d: set_q[d * XG2_SET_MAX + j], j < set_size[d] */
    uint32_t *set_size;
    uint64_t *set_hash; /* depth d: a hash of its members, in any order */
    /* The loop set (see set_step): set_loop[d] says the set at depth d is it
     * (1: its members stored at depth d too; 2: only in loop_q/n/r); stepping
     * it on a byte of loop_bytes gives it back. */
    uint8_t *set_loop;
    int loop_found;
    xg2_byteset loop_bytes;
    uint32_t loop_size;
    uint64_t loop_hash;
    /* In dfa_run, from the start state: the first bytes with a transition
     * (root_skip: a child of the root outside them adds nothing, not even
     * uncertain tokens, so the walk jumps to the next one inside). */
    int root_skip;
    xg2_byteset root_ok;
    const xg2_byteset *first_only; /* if set: walk only the children of the root by these bytes */
    /* The item is a TagDispatch's free text (its key leaves the tags out): a
     * token that reaches a state calling a tag ends there accepted, and one
     * that goes on into the tag is uncertain (the live parser knows the tags). */
    int opaque;
    acc_log *log; /* the accepted tokens' list (shared by the walker's copies) */
    /* Nested in a callee from the root (walk_from): the root's children worth
     * walking (nest_ok: the bytes the callee's start steps or hands over on),
     * when a refused one adds nothing (nest_skip). */
    int nest_skip;
    xg2_byteset nest_ok;
} walker;

#define XG2_SET_MAX 64

/* One byte of the lone item iterating a unit child (see unit_child; at q, k
 * iterations since the nesting began): 1 alive at (*s, *n), 0 refused, -1 the
 * parser takes over (a called repetition may end here and c may follow it; the
 * root's ends are marked in comp[] instead, as in the plain walk). */
static int rep_step(const walker *w, uint32_t q, uint32_t k, uint8_t c, uint32_t *s, uint32_t *n) {
    const xg2_grammar *g = w->g;
    const xg2_rule *rt = &g->rules[w->nest_rep];
    uint32_t start = w->rep_start, total = w->rep_count0 + k;
    if (q == start) {
        if (!w->rep_root && total >= (uint32_t)rt->min && byteset_has(&g->follow[w->nest_rep], c)) return -1;
        if (rt->max >= 0 && total >= (uint32_t)rt->max) return 0;
    }
    uint32_t t = xg2__step(g, q, c);
    if (t == XG2_NONE) return 0;
    if (g->states[t].flags & SF_FINAL) { /* an iteration ends: back between iterations */
        *s = start;
        *n = k + 1;
    } else {
        *s = t;
        *n = k;
    }
    return 1;
}

/* One DFA step of an item at q with loop count `count` on byte c: 1 with the
 * target state and count, or 0 if the byte (or a counted loop) refuses it. */
static inline __attribute__((always_inline)) int item_step(const xg2_grammar *g, uint32_t q, uint32_t count, uint8_t c, uint32_t *s, uint32_t *n) {
    *s = xg2__step(g, q, c);
    *n = 0;
    if (*s != XG2_NONE && g->n_loops) *n = xg2__loop_step(g, q, *s, c, count);
    return *s != XG2_NONE && *n != UINT32_MAX;
}

static int ends_rule(const xg2_grammar *g, uint32_t s, uint32_t count) {
    return (g->states[s].flags & SF_FINAL) && xg2__loop_may_end(g, s, count);
}

/* One byte of a lone item inside a called rule (not a repetition's iterations):
 * 1 alive at (*s, *n), 0 refused, -1 the parser takes over (the rule may end
 * here and c may follow it, or the step lands on a state that calls rules). */
static inline int lone_step(const walker *w, uint32_t q, uint32_t count, uint8_t c, uint32_t *s, uint32_t *n) {
    const xg2_grammar *g = w->g;
    if (ends_rule(g, q, count) && !w->nest_root && byteset_has(&g->follow[w->nest_rule], c)) return -1;
    if (!item_step(g, q, count, c, s, n)) return 0;
    return xg2__is_pure(g, *s) || xg2__is_pure(g, *s = xg2__through_tail_calls(g, *s)) ? 1 : -1;
}

/* A rule with max_chars (max_tokens: a rule entered inside a token counts
 * that token as its first, within any budget >= 1). */
static int has_budget(const xg2_grammar *g, uint32_t r) {
    return g->rules[r].max_chars >= 0;
}

/* After a push: if the byte was scanned by a single unguarded item in a state
 * with byte edges only (the inside of a called string or key), everything else
 * in the set comes from completing that item's rule, and those items can only
 * take bytes of the rule's FOLLOW set.  So the following bytes can step the
 * item's DFA directly -- from a state that ends the rule, only bytes outside
 * FOLLOW -- and the parser is needed again only from a state with rule edges
 * or a FOLLOW byte at an end on.  Not for rules with a lookahead (completing
 * them adds guards).  Returns the item's state, or XG2_NONE. */
static uint32_t nest_item(const xg2_parser *p, uint32_t *count, uint32_t *rule, int *root) {
    const xg2_grammar *g = p->g;
    if (p->scanned != 1) return XG2_NONE;
    const xg2_item *it = &p->items.a[p->set_start.a[p->ns - 1]];
    if (it->guard || !xg2__is_pure(g, it->state)) return XG2_NONE;
    uint32_t r = g->states[it->state].rule;
    if (g->rules[r].lookahead >= 0) return XG2_NONE;
    if (has_budget(g, r) && it->origin != XG2_LOCAL_ROOT) return XG2_NONE; /* (see plain_inside) */
    *count = it->count;
    *rule = r;
    *root = it->origin == XG2_LOCAL_ROOT;
    return it->state;
}

/* A rule a walk can step as an automaton: plain (no counter), no lookahead. */
static int plain_rule(const xg2_grammar *g, uint32_t r) {
    return g->rules[r].kind == RK_FSM && g->rules[r].lookahead < 0;
}

/* The same for a rule the walk may enter after some bytes of the token: not
 * one with max_chars (its budget counts from where it begins, which only the
 * parser's scan checks; entered at the token's start -- call_only, the split
 * walks -- its budget is the fill's, xg2__parser_budget_near). */
static int plain_inside(const xg2_grammar *g, uint32_t r) {
    return plain_rule(g, r) && !has_budget(g, r);
}

/* A call right before the end of the caller's rule (a tail call): it returns
 * to a state that only ends that rule, outside counted loops. */
static int tail_call(const xg2_grammar *g, const xg2_ref *e) {
    return g->states[e->to].flags == SF_FINAL && !g->states[e->to].loop;
}

/* A rule a walk can nest into from its start: plain, entered at a pure state. */
static int nestable(const xg2_grammar *g, uint32_t r) {
    return plain_rule(g, r) && xg2__is_pure(g, g->rules[r].start);
}

/* The child of counted repetition r if its iterations can be stepped as one
 * automaton that wraps around: a plain rule of byte edges only (no calls, no
 * counted loops), not empty, that ends only where no byte goes on and never
 * comes back to its start -- so its start is exactly "between iterations", and
 * reaching an end is exactly one more iteration.  Else XG2_NONE. */
static uint32_t unit_child(const xg2_grammar *g, uint32_t r) {
    const xg2_rule *rt = &g->rules[r];
    if (rt->kind != RK_REPEAT || !plain_rule(g, rt->child)) return XG2_NONE;
    const xg2_rule *c = &g->rules[rt->child];
    if (c->n_states > 256) return XG2_NONE;
    for (uint32_t s = c->start; s < c->start + c->n_states; s++) {
        const xg2_state *st = &g->states[s];
        uint32_t ncls = (uint32_t)g->classmaps[st->cls + 255] + 1;
        if ((st->flags & (SF_REFS | SF_REPEAT)) || st->loop) return XG2_NONE;
        if ((st->flags & SF_FINAL) && (s == c->start || (st->flags & SF_BYTES))) return XG2_NONE;
        for (uint32_t k = 0; k < ncls; k++)
            if (g->trans[st->row + k] == c->start) return XG2_NONE;
    }
    return rt->child;
}

/* A callee a walk can nest into: a plain rule, or a repetition of a unit child. */
static int walkable(const xg2_grammar *g, uint32_t r) {
    return nestable(g, r) || unit_child(g, r) != XG2_NONE;
}

/* A state that only calls one rule (no byte edges, no end): all its tokens
 * start inside that rule -- nested from depth 0, as after a push (nest_item),
 * since the item itself moves only when the callee completes.  Returns the
 * callee, or XG2_NONE. */
static uint32_t call_only(const xg2_grammar *g, uint32_t q) {
    const xg2_state *st = &g->states[q];
    if ((st->flags & (SF_BYTES | SF_FINAL | SF_REPEAT)) || st->ref_n != 1) return XG2_NONE;
    uint32_t r = g->refs_tab[st->ref_off].rule;
    return walkable(g, r) ? r : XG2_NONE;
}

/* A state whose only move is a tail call of a plain rule (as between the
 * states of a long pattern written one rule per state): the caller ends exactly
 * when the callee does, so a walk may go on in the callee's automaton as if it
 * were the caller's -- the one-state case of the call sets below, kept for the
 * plain DFA loop and for nested walks.  Returns the callee's start (following
 * tail calls, a bounded number), or s itself. */
uint32_t xg2__through_tail_calls(const xg2_grammar *g, uint32_t s) {
    for (int k = 0; k < 64; k++) {
        const xg2_state *st = &g->states[s];
        if ((st->flags & (SF_BYTES | SF_FINAL | SF_REPEAT)) || st->ref_n != 1 || st->loop ||
            g->rules[st->rule].lookahead >= 0 || g->rules[st->rule].dispatch)
            return s;
        const xg2_ref *e = &g->refs_tab[st->ref_off];
        if (!tail_call(g, e) || !plain_inside(g, e->rule)) return s;
        s = g->rules[e->rule].start;
    }
    return s;
}

xg2_item xg2__mask_item(const xg2_grammar *g, xg2_item it) {
    if (it.count || it.guard || !(g->states[it.state].flags & SF_REFS)) return it;
    uint32_t t = xg2__through_tail_calls(g, it.state);
    if (t == it.state) return it;
    const xg2_byteset *a = &g->follow[g->states[it.state].rule], *b = &g->follow[g->states[t].rule];
    if (memcmp(a, b, sizeof *a)) return it;
    it.state = t;
    return it;
}

typedef VEC(int32_t) i32vec;

/* Set the bits of tokens ids[from .. to) in acc. */
static inline void accept_tokens(acc_log *log, uint32_t *acc, const int32_t *ids, uint32_t from, uint32_t to) {
    if (!log->dense) {
        if (to - from <= log->cap - log->n) {
            memcpy(log->list + log->n, ids + from, sizeof(int32_t) * (to - from));
            log->n += to - from;
        } else {
            log->dense = 1;
        }
    }
    for (uint32_t k = from; k < to; k++) {
        uint32_t id = (uint32_t)ids[k];
        acc[id >> 5] |= 1u << (id & 31);
    }
}

static __thread uint32_t set_stamp, h_stamp[4 * XG2_SET_MAX], h_q[4 * XG2_SET_MAX], h_n[4 * XG2_SET_MAX],
    h_r[4 * XG2_SET_MAX], set_work;

#define XG2_SET_WORK 4096 /* set_add calls per set: states that only call are not deduplicated */

/* Rule calls as epsilon moves, one level deep.  A configuration is a state, its
 * loop count and where its rule returns to: XG2_NONE for the root item's own
 * rule (an end there ends the root), or the state after a call in the root's
 * rule.  A rule called right before the end of its caller's rule (a tail call)
 * returns where its caller does, so chains of tail calls -- a long pattern
 * written one rule per state, optional properties each skipping to the next --
 * step as one NFA; a call elsewhere is followed one level down.  Adds (s, n,
 * ret) to the set at depth d, with the starts of the rules s calls and, at an
 * end, the state it returns to; 0 if that needs the parser (a second level of
 * calls, a counted rule, a lookahead, a call inside a counted loop) or the set
 * outgrows XG2_SET_MAX. */
static int set_add(walker *w, uint32_t d, uint32_t s, uint32_t n, uint32_t ret, int budget) {
    const xg2_grammar *g = w->g;
    const xg2_state *st = &g->states[s];
    if ((st->flags & SF_REPEAT) || !budget || ++set_work > XG2_SET_WORK) return 0;
    if (st->flags & SF_REFS) {
        if (st->loop || g->rules[st->rule].lookahead >= 0) return 0;
        for (uint32_t j = st->ref_off; j < st->ref_off + st->ref_n; j++) {
            const xg2_ref *e = &g->refs_tab[j];
            if (!plain_inside(g, e->rule) || g->states[e->to].loop) return 0;
            if (!tail_call(g, e) && ret != XG2_NONE) return 0;
        }
    }
    /* (a token edge's start takes no byte, but is alive: a token may end there) */
    if ((st->flags & (SF_BYTES | SF_TOKEN)) || ((st->flags & SF_FINAL) && ret == XG2_NONE)) {
        /* (seen in this set: a per-thread table stamped per set, so never cleared) */
        uint32_t h = (uint32_t)xg2__mix64(xg2__mix64(s, n), ret) & (4 * XG2_SET_MAX - 1);
        while (h_stamp[h] == set_stamp && !(h_q[h] == s && h_n[h] == n && h_r[h] == ret))
            h = (h + 1) & (4 * XG2_SET_MAX - 1);
        if (h_stamp[h] == set_stamp) return 1; /* (and so is all it leads to) */
        uint32_t k = w->set_size[d];
        if (k == XG2_SET_MAX) return 0;
        w->set_hash[d] += xg2__mix64(xg2__mix64(s, n) + 1, ret);
        h_stamp[h] = set_stamp;
        h_q[h] = s;
        h_n[h] = n;
        h_r[h] = ret;
        w->set_q[(size_t)d * XG2_SET_MAX + k] = s;
        w->set_n[(size_t)d * XG2_SET_MAX + k] = n;
        w->set_r[(size_t)d * XG2_SET_MAX + k] = ret;
        w->set_size[d] = k + 1;
    }
    if ((st->flags & SF_FINAL) && ret != XG2_NONE && xg2__loop_may_end(g, s, n) &&
        !set_add(w, d, ret, 0, XG2_NONE, budget - 1))
        return 0;
    if (st->flags & SF_REFS)
        for (uint32_t j = st->ref_off; j < st->ref_off + st->ref_n; j++) {
            const xg2_ref *e = &g->refs_tab[j];
            uint32_t back = tail_call(g, e) ? ret : e->to; /* a tail call returns where s does */
            if (!set_add(w, d, g->rules[e->rule].start, 0, back, budget - 1)) return 0;
        }
    return 1;
}

static void set_begin(walker *w, uint32_t d) {
    w->set_size[d] = 0;
    w->set_hash[d] = 0;
    w->set_loop[d] = 0;
    set_work = 0;
    if (++set_stamp == 0) {
        memset(h_stamp, 0, sizeof h_stamp);
        set_stamp = 1;
    }
}

/* Whether the set at depth d may end the root. */
static uint8_t set_ends(const walker *w, uint32_t d) {
    for (uint32_t j = 0; j < w->set_size[d]; j++) {
        size_t k = (size_t)d * XG2_SET_MAX + j;
        if (w->set_r[k] == XG2_NONE && ends_rule(w->g, w->set_q[k], w->set_n[k])) return 1;
    }
    return 0;
}

static void mark_loop(walker *w, uint32_t d);

/* The set at depth d from s (count n) in the root's rule: 1 if every state in
 * it can be stepped (see set_add), with comp[d] set. */
static int set_start(walker *w, uint32_t d, uint32_t s, uint32_t n) {
    set_begin(w, d);
    if (!set_add(w, d, s, n, XG2_NONE, XG2_SET_MAX)) return 0;
    w->comp[d] = set_ends(w, d);
    mark_loop(w, d);
    return 1;
}

/* Does the set at depth d hold the members of the n at (q, k, r)? */
static int set_holds(const walker *w, uint32_t d, const uint32_t *q, const uint32_t *k, const uint32_t *r, uint32_t n) {
    if (w->set_size[d] != n) return 0;
    size_t b = (size_t)d * XG2_SET_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = 0;
        while (j < n && !(w->set_q[b + j] == q[i] && w->set_n[b + j] == k[i] && w->set_r[b + j] == r[i])) j++;
        if (j == n) return 0;
    }
    return 1;
}

/* The loop set's members (per thread, like the walk's scratch). */
static __thread uint32_t loop_q[XG2_SET_MAX], loop_n[XG2_SET_MAX], loop_r[XG2_SET_MAX];

/* Mark the set at depth d if it is the loop set. */
static void mark_loop(walker *w, uint32_t d) {
    w->set_loop[d] = w->loop_found && w->set_size[d] == w->loop_size && w->set_hash[d] == w->loop_hash &&
                     set_holds(w, d, loop_q, loop_n, loop_r, w->loop_size);
}

/* One step of the set at depth d - 1 on byte c into depth d: 1 done (alive if
 * the set at d is not empty), 0 if the parser is needed.  The first set found
 * to step back to itself (the key start of a chain of optional properties: its
 * whitespace loop, and every key start its calls expand to) is the walk's loop
 * set: stepping it on one of those bytes again copies it, rather than expanding
 * each member's calls anew at every node of every whitespace run. */
static int set_step(walker *w, uint32_t d, uint8_t c) {
    const xg2_grammar *g = w->g;
    if (w->set_loop[d - 1] && byteset_has(&w->loop_bytes, c)) {
        /* the loop set again: its members are read from loop_q/n/r (set_loop 2),
         * not copied, along a whitespace run */
        w->set_size[d] = w->set_size[d - 1];
        w->set_hash[d] = w->set_hash[d - 1];
        w->set_loop[d] = 2;
        w->comp[d] = w->comp[d - 1];
        return 1;
    }
    size_t base = (size_t)(d - 1) * XG2_SET_MAX;
    int kept = w->set_loop[d - 1] == 2; /* (then the loop set is found: the branch below copies nothing) */
    const uint32_t *pq = kept ? loop_q : w->set_q + base, *pn = kept ? loop_n : w->set_n + base,
                   *pr = kept ? loop_r : w->set_r + base;
    set_begin(w, d);
    for (uint32_t j = 0; j < w->set_size[d - 1]; j++) {
        uint32_t s, n;
        if (!item_step(g, pq[j], pn[j], c, &s, &n)) continue;
        if (!set_add(w, d, s, n, pr[j], XG2_SET_MAX)) return 0;
    }
    w->comp[d] = set_ends(w, d);
    uint32_t n = w->set_size[d - 1];
    if ((w->set_loop[d - 1] || !w->loop_found) && w->set_hash[d] == w->set_hash[d - 1] &&
        set_holds(w, d, pq, pn, pr, n)) {
        if (!w->loop_found) {
            w->loop_found = 1;
            w->loop_size = n;
            w->loop_hash = w->set_hash[d];
            memcpy(loop_q, pq, sizeof(uint32_t) * n);
            memcpy(loop_n, pn, sizeof(uint32_t) * n);
            memcpy(loop_r, pr, sizeof(uint32_t) * n);
            memset(&w->loop_bytes, 0, sizeof w->loop_bytes);
            w->set_loop[d - 1] = 1;
        }
        byteset_add(&w->loop_bytes, c);
        w->set_loop[d] = 1;
    } else {
        mark_loop(w, d);
    }
    return 1;
}

/* A counted loop's head whose bound no token can reach from count n (a
 * maxLength string early on): the byte groups each of which iterates back to
 * it, as self_groups for states outside loops; else 0.  (loop: s's loop
 * tag, which the caller has at hand.) */
static inline uint64_t far_head_groups(const walker *w, uint32_t s, uint32_t loop, uint32_t n) {
    const xg2_grammar *g = w->g;
    if (!(loop & 1) || !g->head_groups[s]) return 0;
    int32_t max = g->loops[(loop >> 1) - 1].max; /* (a head that loops to itself is never short of its minimum) */
    return max < 0 || (uint32_t)max - n >= xg2__loop_far(g, loop >> 1, w->far) ? g->head_groups[s] : 0;
}

/* The bytes state s has a transition on (the children of a trie node a walk
 * stepping from s may descend into; for root_ok and nest_ok). */
static void step_bytes(const xg2_grammar *g, uint32_t s, xg2_byteset *out) {
    memset(out, 0, sizeof *out);
    for (unsigned c = 0; c < 256; c++)
        if (xg2__step(g, s, (uint8_t)c) != XG2_NONE) byteset_add(out, c);
}

/* The position of child i among the children in sibling table `at`. */
static inline uint32_t kid_position(const xg2_trie *t, uint32_t at, uint32_t i) {
    const uint32_t *kid = t->kid_node + at + 1;
    uint32_t lo = 0, hi = t->kid_node[at];
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (kid[mid] < i) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* After child i of node p was refused from state q: the next sibling that q
 * steps on or whose byte is in `keep` (NULL: none), else the end of p's
 * subtree -- read from p's sibling table, without visiting the children
 * between (the refused ones' subtrees); i + its subtree if p has no table.
 * The caller has made sure a refused sibling adds nothing (no uncertain
 * tokens). */
static uint32_t next_sibling(const xg2_trie *t, uint32_t p, uint32_t i, const xg2_grammar *g, uint32_t q,
                             const xg2_byteset *keep) {
    uint32_t at = t->kid_at[p];
    if (at == UINT32_MAX) return i + t->nodes[i].subtree;
    const uint32_t *kid = t->kid_node + at + 1;
    const uint8_t *byte = t->kid_byte + at + 1;
    for (uint32_t j = kid_position(t, at, i) + 1; j < t->kid_node[at]; j++)
        if (xg2__step(g, q, byte[j]) != XG2_NONE || (keep && byteset_has(keep, byte[j]))) return kid[j];
    return p + t->nodes[p].subtree;
}

/* The walk in plain DFA mode (no parser, no nesting), node by node for as long
 * as each step lands in a pure state (tail calls followed) -- most of a dense
 * walk -- with less bookkeeping than walk() below.  Returns the first node
 * that needs walk()'s general step, or the end. */
static uint32_t dfa_run(walker *w, const xg2_trie *t, uint32_t i, uint32_t *acc, i32vec *unc, int *rc) {
    const xg2_grammar *g = w->g;
    const xg2_state *states = g->states;
    const uint32_t *trans = g->trans;
    const uint8_t *cmaps = g->classmaps;
    const xg2_trie_node *nodes = t->nodes;
    const int32_t *ids = t->ids;
    uint32_t *qs = w->qs, *cs = w->cs, cand_from = w->cand_from;
    uint8_t *cand = w->cand, *comp = w->comp;
    while (i < t->n_nodes) {
        if (--w->p->work_left < 0) { *rc = xg2__work_fail(); return i; }
        const xg2_trie_node *nd = &nodes[i];
        uint32_t d = nd->depth;
        uint8_t c = nd->byte;
        if (d == 1) {
            if (w->root_skip && !byteset_has(&w->root_ok, c)) {
                i = t->root_next[byteset_next(&w->root_ok, c + 1u)];
                continue;
            }
        }
        uint32_t q = qs[d - 1], n = 0;
        const xg2_state *sq = &states[q];
        uint32_t s = trans[sq->row + cmaps[sq->cls + c]];
        uint8_t cd = cand[d - 1] || (d >= cand_from && comp[d - 1] && byteset_has(w->follow, c));
        const xg2_state *ss = NULL;
        if (s != XG2_NONE) {
            ss = &states[s];
            if (sq->loop | ss->loop) n = xg2__loop_step(g, q, s, c, cs[d - 1]);
            if (n != UINT32_MAX && (ss->flags & (SF_REFS | SF_REPEAT))) {
                uint32_t t2 = xg2__through_tail_calls(g, s);
                if (t2 == s) return i;
                ss = &states[s = t2];
                n = 0;
                if (ss->flags & (SF_REFS | SF_REPEAT)) return i;
            }
        }
        if (s == XG2_NONE || n == UINT32_MAX) {
            if (cd)
                for (uint32_t k = nd->tok_begin; k < nd->tok_end; k++)
                    if (vec_push(unc, ids[k])) { *rc = XG2_NOMEM(); return i; }
            /* under a node with many children: on to the next sibling whose
             * byte the parent's state takes (as root_skip does at the root),
             * when refused children add nothing (no cand[d - 1], no end of the
             * rule at depth d - 1 that may make them uncertain) */
            if (d >= 2 && !cand[d - 1] && !(d >= cand_from && comp[d - 1]))
                i = next_sibling(t, w->at[d - 1], i, g, q, NULL);
            else
                i += nd->subtree;
            continue;
        }
        if (nd->subtree > 1 && !(t->below[i] & ~(xg2__self_groups(g, ss) | far_head_groups(w, s, ss->loop, n)))) {
            /* s loops on every byte below: the whole subtree is accepted */
            accept_tokens(w->log, acc, ids, nd->tok_begin, nd->tok_end);
            i += nd->subtree;
            continue;
        }
        w->path[d] = c;
        w->at[d] = i;
        qs[d] = s;
        cs[d] = n;
        comp[d] = (ss->flags & SF_FINAL) && xg2__loop_may_end(g, s, n);
        cand[d] = cd;
        accept_tokens(w->log, acc, ids, nd->tok_begin, (uint32_t)nd->tok_begin + nd->tok_count);
        i++;
    }
    return i;
}

/* The walk of a lone item inside a called rule (walker.nest_from; not a
 * repetition's iterations), node by node, while each step stays inside the
 * rule's plain states -- a tag's name or a key's text, where the general step
 * below spends most of its time on modes that do not apply.  The same steps as
 * the general loop's nest branch; returns the first node that needs that loop:
 * one above the nesting, a root child (the nesting starts again there), or one
 * where the parser takes over. */
static uint32_t nest_run(walker *w, const xg2_trie *t, uint32_t i, uint32_t *acc, i32vec *unc, int *rc) {
    const xg2_grammar *g = w->g;
    const xg2_trie_node *nodes = t->nodes;
    const int32_t *ids = t->ids;
    while (i < t->n_nodes) {
        const xg2_trie_node *nd = &nodes[i];
        uint32_t d = nd->depth;
        if (d - 1 < w->nest_from || d == 1) return i;
        if (w->in_slices && (w->in_slices[i] & *w->taken)) {
            i += nd->subtree;
            continue;
        }
        uint8_t c = nd->byte;
        uint32_t q = w->qs[d - 1], s = XG2_NONE, n = 0;
        int alive = lone_step(w, q, w->cs[d - 1], c, &s, &n);
        if (alive < 0) return i;
        if (--w->p->work_left < 0) {
            *rc = xg2__work_fail();
            return i;
        }
        w->path[d] = c;
        if (alive) {
            if (nd->subtree > 1 && !(t->below[i] & ~xg2__self_groups(g, &g->states[s]))) {
                accept_tokens(w->log, acc, ids, nd->tok_begin, nd->tok_end); /* s loops on every byte below */
                i += nd->subtree;
                continue;
            }
            w->qs[d] = s;
            w->cs[d] = n;
            w->comp[d] = (uint8_t)(w->nest_root && ends_rule(g, s, n));
        }
        uint8_t cand = w->cand[d - 1] || (d >= w->cand_from && w->comp[d - 1] && byteset_has(w->follow, c));
        if (alive) {
            w->cand[d] = cand;
            w->at[d] = i;
            accept_tokens(w->log, acc, ids, nd->tok_begin, (uint32_t)nd->tok_begin + nd->tok_count);
            i++;
        } else if (!w->cand[d - 1] && !(d >= w->cand_from && w->comp[d - 1])) {
            /* no refused sibling adds anything: skip to the next one q steps
             * on or hands over on (a FOLLOW byte where q ends the rule) */
            uint32_t q = w->qs[d - 1];
            int hands = ends_rule(g, q, w->cs[d - 1]) && !w->nest_root;
            i = next_sibling(t, w->at[d - 1], i, g, q, hands ? &g->follow[w->nest_rule] : NULL);
        } else {
            if (cand)
                for (uint32_t k = nd->tok_begin; k < nd->tok_end; k++)
                    if (vec_push(unc, ids[k])) {
                        *rc = XG2_NOMEM();
                        return i;
                    }
            i += nd->subtree;
        }
    }
    return i;
}

/* Which children of the trie's root a walk may jump over by their first byte:
 * root_skip (dfa_run steps the root's children from qs[0]; a refused one adds
 * uncertain tokens only through cand[0] or an end at depth 0) over root_ok, or
 * nest_skip (nested in a plain callee from its pure start at every child of the
 * root: the bytes the start steps on or ends the callee on) over nest_ok. */
static void root_jumps(walker *w) {
    const xg2_grammar *g = w->g;
    w->root_skip = w->earley_from == UINT32_MAX && w->set_from == UINT32_MAX && w->nest_from == UINT32_MAX &&
                   w->nest_base == XG2_NONE && !w->cand[0] && !(w->cand_from <= 1 && w->comp[0]) &&
                   !(g->states[w->qs[0]].flags & SF_REPEAT);
    if (w->root_skip) step_bytes(g, w->qs[0], &w->root_ok);
    for (int k = 0; k < 4 && w->root_skip && w->first_only; k++) w->root_ok.w[k] &= w->first_only->w[k];
    w->nest_skip = w->nest_base != XG2_NONE && w->nest_rep_base == XG2_NONE && !w->cand[0] &&
                   !(w->cand_from <= 1 && w->comp[0]) && w->qs[0] == g->rules[w->nest_base].start;
    if (w->nest_skip) {
        step_bytes(g, w->qs[0], &w->nest_ok);
        if (ends_rule(g, w->qs[0], w->cs[0]))
            for (int k = 0; k < 4; k++) w->nest_ok.w[k] |= g->follow[w->nest_base].w[k];
        for (int k = 0; k < 4 && w->first_only; k++) w->nest_ok.w[k] &= w->first_only->w[k];
    }
}

/* Node i of a lone item inside a called rule (nest_from set): *alive 1 or 0;
 * *skip: the whole subtree is accepted here; or the parser takes over
 * (nest_from cleared, *alive left as it was). */
static int nested_node(walker *w, const xg2_trie *t, uint32_t i, uint32_t *acc, uint32_t *pushed, int *alive,
                       int *skip) {
    const xg2_grammar *g = w->g;
    const xg2_trie_node *nd = &t->nodes[i];
    uint32_t d = nd->depth;
    uint8_t c = nd->byte;
    uint32_t q = w->qs[d - 1], s = XG2_NONE, n = 0;
    int step; /* 1 alive at (s, n), 0 refused, -1 the parser takes over */
    if (w->nest_rep != XG2_NONE)
        step = rep_step(w, q, w->cs[d - 1], c, &s, &n);
    else
        step = lone_step(w, q, w->cs[d - 1], c, &s, &n);
    if (step == 0) {
        *alive = 0;
    } else if (step == 1) {
        uint64_t loops = xg2__self_groups(g, &g->states[s]);
        if (w->nest_rep != XG2_NONE && s == w->rep_start) {
            /* between iterations: bytes that are whole iterations loop, while the bound is far */
            int32_t max = g->rules[w->nest_rep].max;
            loops = max < 0 || (uint64_t)max >= (uint64_t)w->rep_count0 + n + w->rep_far ? w->rep_unit_groups : 0;
        }
        if (nd->subtree > 1 && !(t->below[i] & ~loops)) {
            /* s loops on every byte below: the whole subtree is accepted
             * (the item is in the parser's set: a handover below would
             * keep this path alive) */
            accept_tokens(w->log, acc, t->ids, nd->tok_begin, nd->tok_end);
            *skip = 1;
            return XG2_OK;
        }
        *alive = 1;
        w->qs[d] = s;
        w->cs[d] = n;
        /* A called rule that ends here may end the root too; but the
         * next byte is then outside FOLLOW (else the parser takes
         * over), which contains what may follow the root. */
        if (w->nest_rep != XG2_NONE)
            w->comp[d] = (uint8_t)(w->rep_root && s == w->rep_start &&
                                   (uint64_t)w->rep_count0 + n >= (uint64_t)g->rules[w->nest_rep].min);
        else
            w->comp[d] = (uint8_t)(w->nest_root && ends_rule(g, s, n));
    } else { /* the parser takes over again: give it the bytes stepped so far */
        for (uint32_t k = w->nest_from + 1; k < d; k++) {
            int r = xg2__parser_push(w->p, w->path[k]);
            if (r < 0) return -r;
            if (!r) return xg2__fail(XG2_ERR_INTERNAL, "nested DFA walk and parser disagree");
            (*pushed)++;
            /* the nodes left below depth k go on in the parser (until the
             * walk is back at depth 1): its word on where the root ended,
             * not the nested walk's (which counts on handing over) */
            w->comp[k] = (uint8_t)w->p->root_done;
        }
        w->nest_from = UINT32_MAX;
    }
    return XG2_OK;
}

/* Node i where dfa_run stopped: the step lands on a state that calls rules
 * (beyond what through_tail_calls follows); a tail-call set or the parser goes
 * on from there.  *skip: a tag begins (see walker.opaque), the subtree decided. */
static int call_node(walker *w, const xg2_trie *t, uint32_t i, uint32_t *acc, i32vec *unc, uint32_t *pushed,
                     int *alive, int *skip) {
    const xg2_trie_node *nd = &t->nodes[i];
    uint32_t d = nd->depth;
    uint32_t s, n;
    *alive = item_step(w->g, w->qs[d - 1], w->cs[d - 1], nd->byte, &s, &n);
    if (*alive && w->opaque) {
        accept_tokens(w->log, acc, t->ids, nd->tok_begin, (uint32_t)nd->tok_begin + nd->tok_count);
        for (uint32_t k = (uint32_t)nd->tok_begin + nd->tok_count; k < nd->tok_end; k++)
            if (vec_push(unc, t->ids[k])) return XG2_NOMEM();
        *skip = 1;
        return XG2_OK;
    }
    if (!*alive) return XG2_OK;
    if (set_start(w, d, s, n)) {
        w->set_from = d;
        w->set_entry = s;
        w->set_entry_n = n;
        *alive = w->set_size[d] > 0;
    } else {
        int rc = xg2__parser_reinit_local(w->p, s, 0);
        if (rc) return rc;
        w->earley_from = d;
        *pushed = 0;
        w->comp[d] = (uint8_t)w->p->root_done;
    }
    return XG2_OK;
}

/* After child i of node p was refused by the set at depth d - 1 (set mode, no
 * uncertain tokens from a refused sibling): the next sibling the set steps on,
 * or whose step needs the parser, else the end of p's subtree -- probed by its
 * byte in p's sibling table (set_step is a function of the set and the byte),
 * without visiting the refused children between.  The key start after a comma
 * refuses most children of every whitespace run it walks.  i + its subtree if p
 * has no table. */
static uint32_t set_next_sibling(walker *w, const xg2_trie *t, uint32_t p, uint32_t i, uint32_t d, int *rc) {
    uint32_t at = t->kid_at[p];
    if (at == UINT32_MAX) return i + t->nodes[i].subtree;
    const uint32_t *kid = t->kid_node + at + 1;
    const uint8_t *byte = t->kid_byte + at + 1;
    for (uint32_t j = kid_position(t, at, i) + 1; j < t->kid_node[at]; j++) {
        if (--w->p->work_left < 0) {
            *rc = xg2__work_fail();
            return kid[j];
        }
        if (!set_step(w, d, byte[j]) || w->set_size[d] > 0) return kid[j];
    }
    return p + t->nodes[p].subtree;
}

/* Walk trie t from the item's start configuration; OR accepted tokens into
 * acc, append uncertain ones to unc. */
static int walk(walker *w, const xg2_trie *t, uint32_t *acc, i32vec *unc) {
    const xg2_trie_node *nodes = t->nodes;
    uint32_t pushed = 0; /* parser pushes since earley_from */
    root_jumps(w);
    w->at[0] = 0;
    for (uint32_t i = 1; i < t->n_nodes;) {
        /* A parser, nested walk or set ends where the walk is back above the
         * depth it began at: from there on the nodes are plain DFA steps again,
         * in dfa_run, until one lands on a state that calls rules. */
        uint32_t up = nodes[i].depth - 1;
        if (w->nest_from != UINT32_MAX && up < w->nest_from) w->nest_from = UINT32_MAX;
        if (w->earley_from != UINT32_MAX && up < w->earley_from) {
            w->earley_from = UINT32_MAX;
            pushed = 0;
        }
        if (w->set_from != UINT32_MAX && up < w->set_from) w->set_from = UINT32_MAX;
        if (w->earley_from == UINT32_MAX && w->nest_from == UINT32_MAX && w->nest_base == XG2_NONE &&
            w->set_from == UINT32_MAX) {
            int rc = XG2_OK;
            i = dfa_run(w, t, i, acc, unc, &rc);
            if (rc) return rc;
            if (i >= t->n_nodes) break;
        }
        if (w->nest_from != UINT32_MAX && w->nest_rep == XG2_NONE && w->set_from == UINT32_MAX) {
            int rc = XG2_OK;
            uint32_t j = nest_run(w, t, i, acc, unc, &rc);
            if (rc) return rc;
            if (j != i) { /* (back to the top: the node it stopped at may end the nesting) */
                i = j;
                continue;
            }
        }
        const xg2_trie_node *nd = &nodes[i];
        if (w->in_slices && (w->in_slices[i] & *w->taken)) {
            i += nd->subtree;
            continue;
        }
        if (--w->p->work_left < 0) return xg2__work_fail();
        uint32_t d = nd->depth; /* the node's depth; its parent is at d - 1 */
        uint8_t c = nd->byte;
        if (d == 1 && w->nest_skip && !byteset_has(&w->nest_ok, c)) {
            i = t->root_next[byteset_next(&w->nest_ok, c + 1u)];
            continue;
        }
        w->path[d] = c;
        if (d == 1 && w->nest_base != XG2_NONE) { /* back at the start: nested again */
            w->nest_from = 0;
            w->nest_rule = w->nest_base;
            w->nest_root = 0;
            w->nest_rep = w->nest_rep_base;
        }
        if (w->earley_from != UINT32_MAX && pushed > d - 1 - w->earley_from) {
            xg2__parser_pop(w->p, pushed - (d - 1 - w->earley_from));
            pushed = d - 1 - w->earley_from;
        }
        int alive = -1;
        if (w->nest_from == UINT32_MAX && w->earley_from == UINT32_MAX && w->set_from != UINT32_MAX) {
            if (set_step(w, d, c)) {
                alive = w->set_size[d] > 0;
            } else { /* the parser takes over from the set's entry, given the bytes since */
                int rc = xg2__parser_reinit_local(w->p, w->set_entry, w->set_entry_n);
                if (rc) return rc;
                for (uint32_t k = w->set_from + 1; k < d; k++) {
                    int r = xg2__parser_push(w->p, w->path[k]);
                    if (r < 0) return -r;
                    if (!r) return xg2__fail(XG2_ERR_INTERNAL, "tail-call walk and parser disagree");
                }
                w->earley_from = d - 1;
                pushed = 0;
            }
        }
        if (w->nest_from != UINT32_MAX) { /* a lone item inside a called rule */
            int skip = 0, rc = nested_node(w, t, i, acc, &pushed, &alive, &skip);
            if (rc) return rc;
            if (skip) {
                i += nd->subtree;
                continue;
            }
        }
        if (alive >= 0) {
            /* decided above */
        } else if (w->earley_from == UINT32_MAX) {
            int skip = 0, rc = call_node(w, t, i, acc, unc, &pushed, &alive, &skip);
            if (rc) return rc;
            if (skip) {
                i += nd->subtree;
                continue;
            }
        } else {
            int r = xg2__parser_push(w->p, c);
            if (r < 0) return -r;
            alive = r;
            if (alive) {
                pushed++;
                w->comp[d] = (uint8_t)w->p->root_done;
                uint32_t n, q = nest_item(w->p, &n, &w->nest_rule, &w->nest_root);
                if (q != XG2_NONE) {
                    w->nest_rep = XG2_NONE;
                    w->nest_from = d;
                    w->qs[d] = q;
                    w->cs[d] = n;
                }
            }
        }
        /* May a token through this node end the rule before its last byte? */
        uint8_t cand = w->cand[d - 1] || (d >= w->cand_from && w->comp[d - 1] && byteset_has(w->follow, c));
        if (alive) {
            w->cand[d] = cand;
            w->at[d] = i;
            accept_tokens(w->log, acc, t->ids, nd->tok_begin, (uint32_t)nd->tok_begin + nd->tok_count);
            i++;
        } else if (w->set_from != UINT32_MAX && w->nest_from == UINT32_MAX && w->earley_from == UINT32_MAX &&
                   d - 1 >= w->set_from && !w->cand[d - 1] && !(d >= w->cand_from && w->comp[d - 1])) {
            /* refused by the set, and no refused sibling adds anything */
            int rc = XG2_OK;
            i = set_next_sibling(w, t, w->at[d - 1], i, d, &rc);
            if (rc) return rc;
        } else {
            if (cand)
                for (uint32_t k = nd->tok_begin; k < nd->tok_end; k++)
                    if (vec_push(unc, t->ids[k])) return XG2_NOMEM();
            i += nd->subtree;
        }
    }
    if (w->earley_from != UINT32_MAX && pushed) xg2__parser_pop(w->p, pushed);
    w->nest_from = UINT32_MAX;
    w->set_from = UINT32_MAX;
    return XG2_OK;
}

/* The most accepted tokens an entry keeps as a list of ids rather than a bitset
 * (a quarter was measured: fewer cache misses, no faster: DESIGN.md). */
static inline uint32_t acc_list_max(size_t words) {
    return (uint32_t)(words / 4);
}

/* Per-thread scratch for compute(): the walk runs often and its buffers are
 * large (a vocabulary-wide bitset), so they are kept and reused. */
typedef struct {
    uint32_t *acc;
    int acc_clean; /* acc is all zero (a sparse split clears the bits it set) */
    int32_t *acc_list; /* acc_log's list: acc_list_max(words) + 1 entries */
    size_t words;
    uint32_t *qs, *cs;
    uint8_t *cand, *comp, *path;
    uint32_t *at;
    uint32_t *set_q, *set_n, *set_r, *set_size;
    uint64_t *set_hash;
    uint8_t *set_loop;
    uint32_t depth;
    xg2_parser p;
    int have_p;
    i32vec unc;
} workspace;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;

static void ws_free(void *x) {
    workspace *w = x;
    if (!w) return;
    xg2__free(w->acc);
    xg2__free(w->acc_list);
    xg2__free(w->qs);
    xg2__free(w->cs);
    xg2__free(w->cand);
    xg2__free(w->comp);
    xg2__free(w->path);
    xg2__free(w->at);
    xg2__free(w->set_q);
    xg2__free(w->set_n);
    xg2__free(w->set_r);
    xg2__free(w->set_size);
    xg2__free(w->set_hash);
    xg2__free(w->set_loop);
    if (w->have_p) xg2__parser_free(&w->p);
    vec_free(&w->unc);
    xg2__free(w);
}

static void ws_make_key(void) { (void)pthread_key_create(&ws_key, ws_free); }

static workspace *ws_get(size_t words, uint32_t depth) {
    pthread_once(&ws_once, ws_make_key);
    workspace *w = pthread_getspecific(ws_key);
    if (!w) {
        if (!(w = xg2__calloc(1, sizeof *w))) return NULL;
        if (pthread_setspecific(ws_key, w)) { xg2__free(w); return NULL; }
    }
    if (w->words < words) {
        uint32_t *a = xg2__realloc(w->acc, sizeof(uint32_t) * words);
        if (!a) return NULL;
        w->acc = a;
        w->acc_clean = 0;
        int32_t *l = xg2__realloc(w->acc_list, sizeof(int32_t) * (acc_list_max(words) + 1));
        if (!l) return NULL;
        w->acc_list = l;
        w->words = words;
    }
    if (w->depth < depth) {
        uint32_t *qs = xg2__realloc(w->qs, sizeof(uint32_t) * depth);
        if (qs) w->qs = qs;
        uint32_t *cs = xg2__realloc(w->cs, sizeof(uint32_t) * depth);
        if (cs) w->cs = cs;
        uint8_t *cand = xg2__realloc(w->cand, depth);
        if (cand) w->cand = cand;
        uint8_t *comp = xg2__realloc(w->comp, depth);
        if (comp) w->comp = comp;
        uint8_t *path = xg2__realloc(w->path, depth);
        if (path) w->path = path;
        uint32_t *at = xg2__realloc(w->at, sizeof(uint32_t) * depth);
        if (at) w->at = at;
        uint32_t *set_q = xg2__realloc(w->set_q, sizeof(uint32_t) * XG2_SET_MAX * depth);
        if (set_q) w->set_q = set_q;
        uint32_t *set_n = xg2__realloc(w->set_n, sizeof(uint32_t) * XG2_SET_MAX * depth);
        if (set_n) w->set_n = set_n;
        uint32_t *set_r = xg2__realloc(w->set_r, sizeof(uint32_t) * XG2_SET_MAX * depth);
        if (set_r) w->set_r = set_r;
        uint32_t *set_size = xg2__realloc(w->set_size, sizeof(uint32_t) * depth);
        if (set_size) w->set_size = set_size;
        uint64_t *set_hash = xg2__realloc(w->set_hash, sizeof(uint64_t) * depth);
        if (set_hash) w->set_hash = set_hash;
        uint8_t *set_loop = xg2__realloc(w->set_loop, depth);
        if (set_loop) w->set_loop = set_loop;
        if (!qs || !cs || !cand || !comp || !path || !at || !set_q || !set_n || !set_r || !set_size || !set_hash ||
            !set_loop)
            return NULL;
        w->depth = depth;
    }
    return w;
}

/* A state with byte edges and calls of rules it can nest into (the key start of
 * an object with declared names and extra keys, say): its tokens either begin
 * on its own byte edges or inside one callee, so one walk per way in covers
 * them (each exact for the paths it follows; the parser, based at the item,
 * takes over wherever they meet).  Up to XG2_SPLIT_MAX callees (distinct,
 * in *callees); 0 if the state is not such a state. */
#define XG2_SPLIT_MAX 4
static uint32_t split_callees(const xg2_grammar *g, uint32_t q, uint32_t *callees) {
    const xg2_state *st = &g->states[q];
    if ((st->flags & SF_REPEAT) || !(st->flags & SF_REFS)) return 0;
    uint32_t n = 0;
    for (uint32_t j = st->ref_off; j < st->ref_off + st->ref_n; j++) {
        uint32_t r = g->refs_tab[j].rule, k = 0;
        while (k < n && callees[k] != r) k++;
        if (k < n) continue;
        if (n == XG2_SPLIT_MAX || !walkable(g, r)) return 0;
        callees[n++] = r;
    }
    /* counted repetitions last: they take no slices, and may skip what the others took */
    uint32_t ordered[XG2_SPLIT_MAX], m = 0;
    for (int repeat = 0; repeat < 2; repeat++)
        for (uint32_t i = 0; i < n; i++)
            if ((g->rules[callees[i]].kind == RK_REPEAT) == repeat) ordered[m++] = callees[i];
    memcpy(callees, ordered, sizeof *callees * n);
    return n;
}

/* One walk of the vocabulary from the item at q0 (count n0): stepping its own
 * byte edges as a DFA (callee == XG2_NONE), or nested in `callee` from that
 * rule's start with the parser (based at the item) taking over at the callee's
 * ends.  Slices apply from a pure automaton state. */
static int walk_from(const walker *base, const xg2_vocab *v, uint32_t q0, uint32_t n0, uint32_t callee,
                     uint32_t *acc, i32vec *unc) {
    const xg2_grammar *g = base->g;
    walker w = *base;
    w.comp[0] = w.cand[0] = 0;
    const xg2_trie *t = &v->trie;
    const xg2_byteset *follow0 = w.follow;
    uint32_t child = callee != XG2_NONE && g->rules[callee].kind == RK_REPEAT ? unit_child(g, callee) : XG2_NONE;
    if (callee != XG2_NONE) {
        follow0 = &g->follow[callee];
        w.earley_from = 0;
        w.nest_from = 0;
        w.nest_rule = w.nest_base = callee;
        if (child != XG2_NONE) { /* iterating the child: its count goes on from the item's, if that is the repetition */
            w.rep_root = q0 == g->rules[callee].start;
            w.rep_count0 = w.rep_root ? n0 : 0;
            w.nest_rep = w.nest_rep_base = callee;
            w.nest_rule = w.nest_base = child;
            w.rep_start = g->rules[child].start;
            xg2_byteset unit = {{0}}; /* bytes that are a whole iteration */
            for (unsigned c = 0; c < 256; c++) {
                uint32_t t1 = xg2__step(g, w.rep_start, (uint8_t)c);
                if (t1 != XG2_NONE && (g->states[t1].flags & SF_FINAL)) byteset_add(&unit, c);
            }
            w.rep_unit_groups = xg2__whole_groups(&unit);
            w.rep_far = v->max_token_len;
            callee = child;
        }
        q0 = g->rules[callee].start;
        n0 = 0;
    }
    w.qs[0] = q0;
    w.cs[0] = n0;
    /* (no slices for a wrapping child: its automaton alone would refuse what
     * the next iteration takes) */
    for (int k = 0; k < XG2_N_SLICES && xg2__is_pure(g, q0) && child == XG2_NONE; k++) {
        const xg2_slice *s = &v->slices[k];
        if (!s->rest.nodes) continue;
        int ends;
        uint32_t q1;
        /* (nested in a callee, the walk may hand over to the parser, which
         * has seen no prefix: only for a callee that loops from its start) */
        if (xg2__slice_loops(g, v, s, q0, n0, follow0, &q1, &ends) &&
            !(w.nest_base != XG2_NONE && (ends || q1 != q0))) {
            w.log->dense = 1;
            for (size_t i = 0; i < v->words; i++) acc[i] |= s->whole[i];
            int rc = walk(&w, &s->heads, acc, unc);
            if (rc) return rc;
            t = &s->suffixes;
            w.qs[0] = q1;
            w.cs[0] = q1 == q0 ? n0 : 0;
            /* a suffix starts after whole characters, where the rule may have ended */
            w.comp[0] = (uint8_t)ends;
            if (ends) w.cand_from = 1;
            break;
        }
        if (xg2__slice_contained(g, v, k, q0, n0)) {
            w.log->dense = 1;
            for (size_t i = 0; i < v->words; i++) acc[i] |= s->all[i];
            *w.taken |= (uint8_t)(1u << k);
            t = &s->rest;
            break;
        }
    }
    for (int k = 0; k < XG2_N_SLICES && t == &v->trie && xg2__is_pure(g, q0) && child == XG2_NONE; k++) {
        const xg2_slice *s = &v->slices[k];
        uint32_t r;
        if (!s->rest.nodes || !xg2__slice_bounded(g, s, q0, n0, follow0, &r)) continue;
        if (r) {
            const uint32_t *up = xg2__upto(v, s->upto, r);
            w.log->dense = 1;
            for (size_t i = 0; i < v->words; i++) acc[i] |= up[i];
        }
        t = &s->rest;
    }
    w.in_slices = t == &v->trie && *w.taken ? t->in_slices : NULL;
    return walk(&w, t, acc, unc);
}

/* Words i and i + 1 of a bitset of `words` 32-bit words, as one 64-bit word
 * (bit k of word i is bit k). */
static inline uint64_t acc_pair(const uint32_t *a, size_t words, size_t i) {
    return (uint64_t)a[i] | (i + 1 < words ? (uint64_t)a[i + 1] << 32 : 0);
}

static inline uint32_t popcount64(uint64_t x) {
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

#define NEAR_PROBES 32 /* earlier counts of a state looked up for a roomier split */

/* A loop over JSON string characters at its head q (count n < max): every
 * whole character of the slice's class (each starts an iteration) leads back
 * to q, ending no rule on the way.  Then a slice member of m characters (a
 * trailing partial one counting as one) is accepted from (q, n) iff
 * m <= max - n, with no context needed. */
static int json_char_loop(const xg2_grammar *g, const xg2_vocab *v, uint32_t q, uint32_t n) {
    const xg2_slice *s = &v->slices[XG2_SLICE_JSON];
    const xg2_state *st = &g->states[q];
    if (!s->upto || !(st->loop & 1) || (st->flags & SF_FINAL)) return 0;
    const xg2_loop *l = &g->loops[(st->loop >> 1) - 1];
    for (int w = 0; w < 4; w++)
        if (s->alive[0].w[w] & ~l->first.w[w]) return 0;
    uint32_t to;
    return xg2__slice_class_target(g, s, q, n, &to) && to == q;
}

/* Near a counted loop's maximum (count at least its minimum), a token of L
 * bytes takes at most L iterations, so one with L + slack <= max - count fares
 * as it does with more room: the split is that of the same state at any count
 * from max(max - far, min) up, when the pool has one, for those, and only the
 * longer tokens -- the vocabulary's tokens of at least XG2_LONG_MIN[*k] bytes
 * -- are decided here.  For a Length loop they are walked; for a loop over
 * JSON string characters near its bound (string_near: see bounded_string) the
 * JSON slice's members among them are taken by length and only the few others
 * walked.  (Other loops do
 * not qualify: their walks take slices of the whole vocabulary in bulk, which
 * beats walking the 38k tokens of 8 bytes or more one by one.)  Returns that
 * entry with a reference the caller drops, or NULL.  Only an entry already
 * there (a state met at one count only, as most of a pattern's are, would pay
 * a whole walk for it on top): the roomiest, else one of the counts just
 * before (a string's previous tokens). */
static xg2_mask_entry *roomier_entry(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it, int string_near,
                                     int *k) {
    const xg2_state *st = &g->states[it->state];
    if (!st->loop || !xg2__is_pure(g, it->state)) return NULL;
    const xg2_loop *l = &g->loops[(st->loop >> 1) - 1];
    uint32_t cap = xg2__loop_far(g, st->loop >> 1, xg2__count_far(v));
    if (l->max < 0 || it->count < (uint32_t)l->min || (uint32_t)l->max - it->count >= cap) return NULL;
    uint32_t roomy = (uint32_t)l->max > cap && (uint32_t)l->max - cap > (uint32_t)l->min ? (uint32_t)l->max - cap
                                                                                        : (uint32_t)l->min;
    if (roomy >= it->count || (uint32_t)l->max - it->count < l->slack) return NULL;
    uint32_t safe = (uint32_t)l->max - it->count - l->slack; /* tokens of up to this many bytes */
    *k = -1;
    for (int j = 0; j < XG2_N_LONG; j++)
        if (XG2_LONG_MIN[j] <= safe + 1) *k = j;
    if (*k < 0) return NULL;
    if (!l->rest_checked && !string_near) return NULL;
    xg2_item far = *it;
    xg2_mask_entry *e = NULL;
    for (uint32_t back = 0; back <= NEAR_PROBES && !e; back++) {
        if (back && (back > it->count || it->count - back <= roomy)) break; /* (roomy >= min) */
        far.count = back ? it->count - back : roomy;
        uint64_t k1, k2;
        xg2__mask_key(g, v, &far, &k1, &k2);
        e = xg2__pool_find((xg2_pool *)&v->pool, k1, k2);
    }
    return e;
}

/* Near a counted loop's bound: the roomier split `far_e` for the tokens not in
 * `lt`, and those in it decided (w set up for state q0): walked (a Length
 * loop), or the JSON slice's members taken by length and the rest walked. */
static int walk_near_bound(walker *w, const xg2_vocab *v, const xg2_item *it, const xg2_mask_entry *far_e,
                           const xg2_long_tokens *lt, uint32_t *acc, i32vec *unc) {
    const xg2_loop *l = &w->g->loops[(w->g->states[it->state].loop >> 1) - 1];
    w->comp[0] = w->cand[0] = 0;
    w->qs[0] = it->state;
    w->cs[0] = it->count;
    w->log->dense = 1; /* (tokens set in bulk below) */
    int rc;
    if (l->rest_checked) {
        rc = walk(w, &lt->trie, acc, unc);
    } else {
        uint32_t r = (uint32_t)l->max - it->count; /* >= 7: see roomier_entry */
        const uint32_t *up = xg2__upto(v, v->slices[XG2_SLICE_JSON].upto, r);
        for (size_t i = 0; i < v->words; i++) acc[i] |= up[i] & lt->bits[i];
        rc = walk(w, &lt->json_rest, acc, unc);
    }
    if (rc) return rc;
#define IS_LONG(t) (lt->bits[(t) >> 5] >> ((t) & 31) & 1)
    if (far_e->bits) {
        for (size_t i = 0; i < v->words; i++) acc[i] |= far_e->bits[i] & ~lt->bits[i];
    } else {
        for (uint32_t i = 0; i < far_e->n_acc; i++)
            if (!IS_LONG(far_e->acc[i])) acc[far_e->acc[i] >> 5] |= 1u << (far_e->acc[i] & 31);
    }
    if (!far_e->n_unc) return XG2_OK;
    /* both uncertain lists are in byte order (trie order): merged, not sorted */
    int32_t *shorts = xg2__malloc(sizeof(int32_t) * far_e->n_unc);
    int32_t *merged = xg2__malloc(sizeof(int32_t) * ((size_t)unc->n + far_e->n_unc));
    if (!shorts || !merged) {
        xg2__free(shorts);
        xg2__free(merged);
        return XG2_NOMEM();
    }
    uint32_t n_short = 0;
    for (uint32_t i = 0; i < far_e->n_unc; i++)
        if (!IS_LONG(far_e->unc[i])) shorts[n_short++] = far_e->unc[i];
#undef IS_LONG
    xg2__vocab_merge_ids(v, unc->a, unc->n, shorts, n_short, merged);
    xg2__free(shorts);
    xg2__free(unc->a); /* (the merged buffer becomes the list) */
    unc->a = merged;
    unc->cap = unc->n + far_e->n_unc;
    unc->n += n_short;
    return XG2_OK;
}

/* A full walk near a JSON string's maxLength: at the head of a loop over JSON
 * string characters (json_char_loop) with the count at least the minimum,
 * below the maximum and within a token's reach of it, where every byte that
 * starts an iteration is one a JSON string character starts with (any other
 * byte leaves the loop, after which the count no longer matters).  Then, r =
 * max - count: the slice's members are accepted iff they have at most r
 * characters; a token with whole characters first and then a byte that leaves
 * the string fares as what follows them does (the slice's suffix trie, walked
 * once for all of them) if it has at most r of them; every other token (none
 * first: the slice's heads; or the json_bounded `cont` ones) is walked whole
 * from the item. */
static int bounded_string(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it) {
    const xg2_state *st = &g->states[it->state];
    if (!st->loop || !xg2__is_pure(g, it->state) || !v->json_bounded.sfx_upto) return 0;
    const xg2_loop *l = &g->loops[(st->loop >> 1) - 1];
    if (l->rest_checked || l->max < 0 || it->count < (uint32_t)l->min || it->count >= (uint32_t)l->max) return 0;
    if ((uint32_t)l->max - it->count >= xg2__loop_far(g, st->loop >> 1, xg2__count_far(v))) return 0;
    for (int w = 0; w < 4; w++)
        if (l->first.w[w] & ~v->json_bounded.starts.w[w]) return 0;
    return json_char_loop(g, v, it->state, it->count);
}

/* The walk of bounded_string (acc and unc empty on entry). */
static int walk_bounded_string(walker *w, const xg2_vocab *v, const xg2_item *it, uint32_t *acc, i32vec *unc) {
    const xg2_loop *l = &w->g->loops[(w->g->states[it->state].loop >> 1) - 1];
    uint32_t r = (uint32_t)l->max - it->count;
    const xg2_slice *s = &v->slices[XG2_SLICE_JSON];
    w->log->dense = 1; /* (tokens set in bulk below) */
    const uint32_t *keep = xg2__upto(v, v->json_bounded.sfx_upto, r);
    const uint32_t *members = xg2__upto(v, s->upto, r);
    w->comp[0] = w->cand[0] = 0;
    w->qs[0] = it->state;
    w->cs[0] = it->count;
    int rc = walk(w, &s->suffixes, acc, unc);
    if (rc) return rc;
    uint32_t n = 0;
    for (uint32_t i = 0; i < unc->n; i++)
        if (keep[unc->a[i] >> 5] >> (unc->a[i] & 31) & 1) unc->a[n++] = unc->a[i];
    unc->n = n;
    for (size_t i = 0; i < v->words; i++) acc[i] = (acc[i] & keep[i]) | members[i];
    if ((rc = walk(w, &s->heads, acc, unc))) return rc;
    return walk(w, &v->json_bounded.cont, acc, unc);
}

/* ---- a state's split from its rule start's ----
 * A token whose first byte steps q0 and the start of its rule (both pure,
 * outside loops, equally final) to one state fares alike from both: from the
 * second byte on the walks are one.  So while the start's split is in the
 * pool, q0's is the start's for those tokens and a walk of the others -- a
 * TagDispatch's Aho-Corasick state differs from its start on a few bytes. */
static xg2_mask_entry *start_entry(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it, xg2_byteset *diff) {
    uint32_t q0 = it->state, s0 = g->rules[g->states[q0].rule].start, n = 0;
    if (s0 == XG2_NONE || s0 == q0 || it->count || !xg2__is_pure(g, q0) || !xg2__is_pure(g, s0) || g->states[q0].loop ||
        g->states[s0].loop || ((g->states[q0].flags ^ g->states[s0].flags) & SF_FINAL))
        return NULL;
    memset(diff, 0, sizeof *diff);
    for (unsigned c = 0; c < 256; c++)
        if (xg2__step(g, q0, (uint8_t)c) != xg2__step(g, s0, (uint8_t)c)) byteset_add(diff, c), n++;
    if (n > 64) return NULL;
    /* The split marks every token under diff's first bytes (one step each) and
     * saves walking those under the other first bytes q0 takes: worth it only
     * when they are more (a TagDispatch's text state differs from its start in a
     * few bytes and takes all; after a JSON key's colon nearly every byte q0
     * takes is in diff, a space among them, and the split cost 84 against 46 µs
     * for a fresh walk; a JSON walk: -15% fill instructions). */
    const xg2_trie *t = &v->trie;
    uint32_t under = 0, saved = 0;
    for (uint32_t i = t->root_next[0]; i < t->n_nodes; i = t->root_next[t->nodes[i].byte + 1u]) {
        uint8_t b = t->nodes[i].byte;
        if (byteset_has(diff, b)) under += t->nodes[i].tok_end - t->nodes[i].tok_begin;
        else if (xg2__step(g, q0, b) != XG2_NONE) saved += t->nodes[i].tok_end - t->nodes[i].tok_begin;
    }
    if (under > saved) return NULL;
    xg2_item si = {s0, 0, 0, 0};
    uint64_t k1, k2;
    xg2__mask_key(g, v, &si, &k1, &k2);
    return xg2__pool_find((xg2_pool *)&v->pool, k1, k2);
}

/* The split of q0 from the start's `se` and a walk under the bytes in `diff`
 * (acc and unc empty on entry). */
static int walk_from_start(walker *w, const xg2_vocab *v, uint32_t q0, const xg2_mask_entry *se,
                           const xg2_byteset *diff, uint32_t *acc, i32vec *unc) {
    const xg2_trie *t = &v->trie;
    uint32_t *mine = xg2__calloc(v->words, sizeof(uint32_t)); /* the tokens under diff's bytes */
    if (!mine) return XG2_NOMEM();
    w->log->dense = 1; /* (tokens set in bulk below) */
#define MINE(id) (mine[(uint32_t)(id) >> 5] >> ((id) & 31) & 1)
    for (uint32_t i = t->root_next[byteset_next(diff, 0)]; i < t->n_nodes;
         i = t->root_next[byteset_next(diff, t->nodes[i].byte + 1u)])
        if (byteset_has(diff, t->nodes[i].byte))
            for (uint32_t k = t->nodes[i].tok_begin; k < t->nodes[i].tok_end; k++) mine[t->ids[k] >> 5] |= 1u << (t->ids[k] & 31);
    if (se->bits)
        for (size_t i = 0; i < v->words; i++) acc[i] = se->bits[i] & ~mine[i];
    else
        for (uint32_t i = 0; i < se->n_acc; i++)
            if (!MINE(se->acc[i])) acc[se->acc[i] >> 5] |= 1u << (se->acc[i] & 31);
    w->qs[0] = q0;
    w->cs[0] = 0;
    w->comp[0] = w->cand[0] = 0;
    w->first_only = diff;
    int rc = walk(w, t, acc, unc);
    w->first_only = NULL;
    int32_t *theirs = rc ? NULL : xg2__malloc(sizeof(int32_t) * (se->n_unc + 1));
    int32_t *merged = rc ? NULL : xg2__malloc(sizeof(int32_t) * ((size_t)unc->n + se->n_unc + 1));
    if (!rc && (!theirs || !merged)) rc = XG2_NOMEM();
    if (!rc) { /* both lists in byte order: the walk's under diff, the start's elsewhere */
        uint32_t n = 0, m = 0;
        for (uint32_t i = 0; i < unc->n; i++)
            if (MINE(unc->a[i])) unc->a[n++] = unc->a[i];
        for (uint32_t i = 0; i < se->n_unc; i++)
            if (!MINE(se->unc[i])) theirs[m++] = se->unc[i];
        xg2__vocab_merge_ids(v, unc->a, n, theirs, m, merged);
        xg2__free(unc->a);
        unc->a = merged;
        merged = NULL;
        unc->cap = unc->n + se->n_unc + 1;
        unc->n = n + m;
    }
    xg2__free(theirs);
    xg2__free(merged);
#undef MINE
    xg2__free(mine);
    return rc;
}

static int compute(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it, int64_t *work, xg2_mask_entry **out) {
    size_t words = v->words;
    uint32_t depth = v->max_token_len + 2;
    workspace *ws = ws_get(words, depth);
    if (!ws) return XG2_NOMEM();
    int rc = XG2_OK;
    uint8_t taken = 0;
    uint32_t *acc = ws->acc, limit = acc_list_max(words); /* fewer accepted tokens: a list */
    if (!ws->acc_clean) memset(acc, 0, sizeof(uint32_t) * ws->words);
    ws->acc_clean = 0;
    acc_log log = {.list = ws->acc_list, .cap = limit ? limit - 1 : 0};
    memset(ws->cand, 0, depth);
    memset(ws->comp, 0, depth);
    ws->unc.n = 0;
    walker w = {.g = g, .p = &ws->p, .earley_from = UINT32_MAX, .nest_from = UINT32_MAX, .nest_base = XG2_NONE,
                .nest_rep = XG2_NONE, .nest_rep_base = XG2_NONE, .qs = ws->qs,
                .cs = ws->cs, .cand = ws->cand, .comp = ws->comp, .path = ws->path, .at = ws->at,
                .follow = &g->follow[g->states[it->state].rule], .cand_from = 2,
                .set_from = UINT32_MAX, .set_q = ws->set_q, .set_n = ws->set_n, .set_r = ws->set_r,
                .set_size = ws->set_size, .set_hash = ws->set_hash, .set_loop = ws->set_loop,
                .far = xg2__count_far(v), .taken = &taken,
                .opaque = g->rules[g->states[it->state].rule].dispatch && xg2__is_pure(g, it->state), .log = &log};
    /* The walk spends the caller's work budget (written back below). */
    if (!ws->have_p) {
        if ((rc = xg2__parser_init_local(&ws->p, g, it->state, it->count))) return rc;
        ws->have_p = 1;
        ws->p.work_left = work ? *work : INT64_MAX;
    } else {
        ws->p.g = g;
        ws->p.work_left = work ? *work : INT64_MAX;
        if ((rc = xg2__parser_reinit_local(&ws->p, it->state, it->count))) goto drop_parser;
    }

    /* The walks: the item's own automaton from a pure state; nested in the one
     * rule a state only calls (what follows the callee's ends is that rule's
     * FOLLOW set); split over the ways into a state with bytes and calls (the
     * callees' walks take slices); calls stepped as an NFA; else the Earley
     * parser from the start. */
    uint32_t q0 = it->state, callees[XG2_SPLIT_MAX], n_split;
    xg2_mask_entry *far_e, *start_e;
    xg2_byteset diff;
    int long_k = 0, string_near = bounded_string(g, v, it);
    if ((far_e = roomier_entry(g, v, it, string_near, &long_k))) { /* near a counted loop's maximum */
        rc = walk_near_bound(&w, v, it, far_e, &v->longs[long_k], acc, &ws->unc);
        xg2__pool_release(far_e);
    } else if (string_near) {
        rc = walk_bounded_string(&w, v, it, acc, &ws->unc);
    } else if ((start_e = start_entry(g, v, it, &diff))) {
        rc = walk_from_start(&w, v, q0, start_e, &diff, acc, &ws->unc);
        xg2__pool_release(start_e);
    } else if (xg2__is_pure(g, q0)) {
        rc = walk_from(&w, v, q0, it->count, XG2_NONE, acc, &ws->unc);
    } else if ((g->states[q0].flags & SF_REPEAT) && unit_child(g, g->states[q0].rule) != XG2_NONE) {
        rc = walk_from(&w, v, q0, it->count, g->states[q0].rule, acc, &ws->unc); /* its iterations, nested */
    } else if ((callees[0] = call_only(g, q0)) != XG2_NONE) {
        rc = walk_from(&w, v, q0, it->count, callees[0], acc, &ws->unc);
    } else if ((n_split = split_callees(g, q0, callees))) {
        if (g->states[q0].flags & SF_BYTES) rc = walk_from(&w, v, q0, it->count, XG2_NONE, acc, &ws->unc);
        for (uint32_t k = 0; k < n_split && !rc; k++)
            if (!(rc = xg2__parser_reinit_local(&ws->p, q0, it->count)))
                rc = walk_from(&w, v, q0, it->count, callees[k], acc, &ws->unc);
        if (!rc) rc = xg2__vocab_sort_unique_ids(v, ws->unc.a, &ws->unc.n); /* the walks' lists, in trie order */
    } else if (set_start(&w, 0, q0, it->count)) { /* calls stepped as one NFA (see set_add) */
        w.set_from = 0;
        w.set_entry = q0;
        w.set_entry_n = it->count;
        rc = walk(&w, &v->trie, acc, &ws->unc);
    } else {
        w.earley_from = 0;
        rc = walk(&w, &v->trie, acc, &ws->unc);
    }
    if (rc) goto drop_parser; /* (nothing of a partial walk is kept) */
    if (work) *work = ws->p.work_left;

    xg2_mask_entry *e = xg2__calloc(1, sizeof *e);
    if (!e) return XG2_NOMEM();
    /* A list when few tokens are accepted (setting bits beats OR-ing a bitset).
     * From the log if it kept them all (clearing their bits, which drops
     * repeats), else read off the bitset 64 bits at a time. */
    if (!log.dense) {
        e->acc = xg2__malloc(sizeof(int32_t) * (log.n ? log.n : 1));
        if (!e->acc) { xg2__free(e); return XG2_NOMEM(); }
        for (uint32_t k = 0; k < log.n; k++) {
            uint32_t t = (uint32_t)log.list[k];
            if (!(acc[t >> 5] >> (t & 31) & 1)) continue;
            acc[t >> 5] &= ~(1u << (t & 31));
            e->acc[e->n_acc++] = (int32_t)t;
        }
        ws->acc_clean = 1;
        e->bytes = sizeof(int32_t) * e->n_acc;
        goto uncertain;
    }
    uint32_t n_acc = 0;
    for (size_t i = 0; i < words && n_acc < limit; i += 2) {
        uint64_t x = acc_pair(acc, words, i);
        if (x) n_acc += popcount64(x);
    }
    if (n_acc < limit) {
        e->acc = xg2__malloc(sizeof(int32_t) * (n_acc ? n_acc : 1));
        if (!e->acc) { xg2__free(e); return XG2_NOMEM(); }
        for (size_t i = 0; i < words; i += 2)
            for (uint64_t x = acc_pair(acc, words, i); x; x &= x - 1)
                e->acc[e->n_acc++] = (int32_t)(i * 32 + (uint32_t)__builtin_ctzll(x));
        e->bytes = sizeof(int32_t) * n_acc;
    } else {
        e->bits = xg2__malloc(sizeof(uint32_t) * words);
        if (!e->bits) { xg2__free(e); return XG2_NOMEM(); }
        memcpy(e->bits, acc, sizeof(uint32_t) * words);
        e->bytes = sizeof(uint32_t) * words;
    }
uncertain:
    if ((rc = xg2__mask_entry_set_unc(e, ws->unc.a, ws->unc.n, v->bytes, v->off))) {
        xg2__mask_entry_free(e);
        return rc;
    }
    e->bytes += sizeof *e;
    *out = e;
    return XG2_OK;
drop_parser: /* after a failure the scratch parser may be half-built: rebuild next time */
    if (work) *work = ws->p.work_left;
    xg2__parser_free(&ws->p);
    ws->have_p = 0;
    return rc;
}

/* ---- the pool ---- */

int xg2__mask_entry_get(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it, uint64_t k1, uint64_t k2,
                        int64_t *work, xg2_mask_entry **out) {
    xg2_pool *pool = (xg2_pool *)&v->pool; /* the pool locks itself */
    xg2_mask_entry *e = xg2__pool_find(pool, k1, k2);
    if (!e) {
        /* Compute outside the lock; if another thread got there first, its entry wins. */
        int rc = compute(g, v, it, work, &e);
        if (rc) return rc;
        e->k1 = k1;
        e->k2 = k2;
        if (!(e = xg2__pool_insert(pool, e))) return XG2_NOMEM();
    }
    *out = e;
    return XG2_OK;
}
