/*
 * slice_proofs.c -- when a state takes a token slice (slices.c) in bulk.
 *
 * A mask walk from a dense state (inside a JSON string, in free text) would
 * visit most of the trie.  These proofs, products of a slice's automaton and
 * the grammar's byte edges, show that every string over the slice's class is
 * alive from the state (contained), that the class loops back to a state
 * (loops: the slice's whole members accepted, its suffixes walked once), or
 * that a bounded run of it stays inside the rule (bounded).  A proof that
 * cannot settle quickly gives up: the walk then visits those tokens instead.
 */
#include "maskcache.h"

/* Product pairs a containment proof may visit: a long automaton (a searched
 * pattern with a minimum length: 3,600 states; a 250-character key chain)
 * proves once and its states are remembered; after a proof of a slice runs out
 * in a grammar, its other proofs of that slice get the small limit. */
#define SLICE_PAIR_LIMIT 6144
#define SLICE_PAIR_LIMIT_SMALL 512
#define SLICE_SEEN_SLOTS 16384 /* the proof's hash set: a power of two, over twice the limit */
#define BOUNDED_WORK_LIMIT 512 /* configurations a bounded-run proof may expand */

/* The bytes the proofs below step from the pair (slice state a, grammar state
 * r): the first byte of each run over which the slice's row, r's byte class
 * and (r at a counted loop's boundary) the side of the loop's first set stay
 * the same -- every other byte steps like its run's first -- among the bytes
 * the slice allows.  A dozen steps a pair instead of 256. */
static inline void pair_bytes(const xg2_grammar *g, const xg2_slice *s, uint32_t a, uint32_t r, xg2_byteset *out) {
    const xg2_state *st = &g->states[r];
    const xg2_byteset *sc = &s->cuts[a], *gc = &g->class_cuts[st->cls >> 8], *al = &s->alive[a];
    const xg2_byteset *first = st->loop & 1 ? &g->loops[(st->loop >> 1) - 1].first : NULL;
    for (int w = 0; w < 4; w++) {
        uint64_t cut = sc->w[w] | gc->w[w];
        if (first) cut |= first->w[w] ^ (first->w[w] << 1 | (w ? first->w[w - 1] >> 63 : 0));
        out->w[w] = cut & al->w[w];
    }
}

/* for (c in set) -- the bytes of a byteset, in order */
#define FOR_BYTES(c, set)                                                         \
    for (int w_ = 0; w_ < 4; w_++)                                                \
        for (uint64_t b_ = (set).w[w_], c = 0; b_ && (c = (uint64_t)w_ * 64 + (uint64_t)__builtin_ctzll(b_), 1); b_ &= b_ - 1)

/* Is every string over the slice's class alive from DFA state q (with the
 * item's loop count)?  A walk of the product of the slice automaton and the
 * rule's byte edges, tail calls followed into the callee.  Counts are not
 * tracked, so the walk gives up when they could matter: the item's loop near
 * its maximum, leaving the loop before its minimum, or entering a loop. */
int xg2__slice_contained(const xg2_grammar *g, const xg2_vocab *v, int k, uint32_t q, uint32_t count) {
    const xg2_slice *s = &v->slices[k];
    uint32_t loop = g->states[q].loop >> 1;
    int may_leave = 1, rest_checked = 0, finite_seen = 0;
    if (loop) {
        const xg2_loop *l = &g->loops[loop - 1];
        if (l->max >= 0 && (uint32_t)l->max - count < xg2__loop_far(g, loop, xg2__count_far(v))) return 0;
        may_leave = count >= (uint32_t)l->min;
        rest_checked = l->rest_checked;
    }
    /* (a state of a Length loop is remembered only from a proof that met no state
     * with a most-units-left: there the count below the minimum never mattered) */
    if (__atomic_load_n(&g->contained[q], __ATOMIC_RELAXED) >> k & 1) return 1;
    /* seen pairs: open addressing (keys + 1; 0 = empty), over twice the pair limit;
     * a per-thread table, its used slots cleared on the way out (clearing it
     * all would cost more than most walks) */
    static __thread uint64_t seen[SLICE_SEEN_SLOTS];
    static __thread uint32_t used[SLICE_PAIR_LIMIT], stack_a[SLICE_PAIR_LIMIT], stack_q[SLICE_PAIR_LIMIT];
    uint32_t n_seen = 1, sp = 0;
    uint32_t limit = __atomic_load_n(g->proofs_spent, __ATOMIC_RELAXED) >> k & 1 ? SLICE_PAIR_LIMIT_SMALL : SLICE_PAIR_LIMIT;
    int ok = 1;
    used[0] = (uint32_t)xg2__mix64(0, q) & (SLICE_SEEN_SLOTS - 1);
    seen[used[0]] = (uint64_t)q + 1;
    stack_a[sp] = 0;
    stack_q[sp++] = q;
    while (sp) {
        sp--;
        uint32_t a = stack_a[sp], r = stack_q[sp];
        if (!(g->states[r].flags & SF_BYTES)) { ok = 0; goto done; }
        const int32_t *row = s->dfa + 256 * a;
        xg2_byteset bytes;
        pair_bytes(g, s, a, r, &bytes);
        uint64_t last = 0; /* runs cut by the rule's other states often step alike: hash once */
        FOR_BYTES(c, bytes) {
            uint32_t t = xg2__step(g, r, (uint8_t)c);
            if (t == XG2_NONE) { ok = 0; goto done; }
            /* a state that only tail-calls a rule goes on in the callee (as the walk does) */
            if (!(g->states[t].flags & SF_BYTES)) t = xg2__through_tail_calls(g, t);
            uint32_t lr = g->states[r].loop, lt = g->states[t].loop;
            if (lr & 1 && !byteset_has(&g->loops[(lr >> 1) - 1].first, (unsigned)c)) { /* leaves the loop */
                if (!may_leave || lt) { ok = 0; goto done; }
            } else if (lt && (lt >> 1) != loop) { /* enters another loop */
                ok = 0;
                goto done;
            }
            if (rest_checked && g->rest[2 * (size_t)t + 1] != XG2_REST_ANY) {
                /* a state the minimum can refuse: fine at or past it, else unknown */
                if (!may_leave) { ok = 0; goto done; }
                finite_seen = 1;
            }
            uint64_t key = ((uint64_t)row[c] << 32 | t) + 1;
            if (key == last) continue;
            last = key;
            uint32_t h = (uint32_t)xg2__mix64(0, key - 1) & (SLICE_SEEN_SLOTS - 1);
            while (seen[h] && seen[h] != key) h = (h + 1) & (SLICE_SEEN_SLOTS - 1);
            if (seen[h]) continue;
            if (n_seen == limit) {
                if (limit == SLICE_PAIR_LIMIT) __atomic_fetch_or(g->proofs_spent, (uint8_t)(1u << k), __ATOMIC_RELAXED);
                ok = 0;
                goto done;
            }
            seen[h] = key;
            used[n_seen++] = h;
            stack_a[sp] = (uint32_t)row[c];
            stack_q[sp++] = t;
        }
    }
done:
    for (uint32_t i = 0; i < n_seen; i++) {
        /* Outside loops, every state the proof met at a character boundary (a
         * final state of the slice's automaton, any of them: class* lies ahead
         * of each) is contained too (all it leads to was checked): remember
         * them, so the states of a long automaton prove at once after the first. */
        uint64_t key = seen[used[i]] - 1;
        if (ok && (!loop || (rest_checked && !finite_seen)) && s->dfa_final[key >> 32]) __atomic_fetch_or(&g->contained[(uint32_t)key], (uint8_t)(1u << k), __ATOMIC_RELAXED);
        seen[used[i]] = 0;
    }
    return ok;
}

/* Does every whole character of the slice's class lead from q to one and the
 * same state (*to), with no end of the rule inside a character?  The walk of
 * the pairs (slice state inside a character, grammar state). */
int xg2__slice_class_target(const xg2_grammar *g, const xg2_slice *s, uint32_t q, uint32_t count, uint32_t *to) {
    uint32_t sa[256], sq[256], n = 0, sp = 0;
    *to = XG2_NONE;
    sa[sp] = 0;
    sq[sp++] = q;
    while (sp) {
        sp--;
        uint32_t a = sa[sp], r = sq[sp];
        const int32_t *row = s->dfa + 256 * a;
        xg2_byteset bytes;
        pair_bytes(g, s, a, r, &bytes);
        FOR_BYTES(c, bytes) {
            uint32_t t = xg2__step(g, r, (uint8_t)c);
            if (t == XG2_NONE) return 0;
            if (g->n_loops && xg2__loop_step(g, r, t, (uint8_t)c, count) == UINT32_MAX) return 0;
            if (s->dfa_final[row[c]]) {
                if (*to == XG2_NONE) *to = t;
                if (t != *to) return 0;
                continue;
            }
            if (g->states[t].flags & (SF_FINAL | SF_REFS | SF_REPEAT)) return 0;
            uint32_t k = 0;
            while (k < n && !(sa[k] == (uint32_t)row[c] && sq[k] == t)) k++;
            if (k < n) continue;
            if (n == 256 || sp == 256) return 0;
            sa[n] = (uint32_t)row[c];
            sq[n++] = t;
            sa[sp] = (uint32_t)row[c];
            sq[sp++] = t;
        }
    }
    return *to != XG2_NONE;
}

/* Do states a and b accept the same strings, ends and rule edges alike?  A
 * bounded walk of state pairs (plain byte states without counters only). */
static int equivalent(const xg2_grammar *g, uint32_t a, uint32_t b) {
    enum { CAP = 512 };
    uint32_t pa[CAP], pb[CAP], n = 1;
    pa[0] = a;
    pb[0] = b;
    for (uint32_t i = 0; i < n; i++) {
        const xg2_state *x = &g->states[pa[i]], *y = &g->states[pb[i]];
        if (x->flags != y->flags || x->loop || y->loop || (x->flags & (SF_REFS | SF_REPEAT))) return 0;
        if (pa[i] == pb[i]) continue;
        for (int c = 0; c < 256; c++) {
            uint32_t tx = xg2__step(g, pa[i], (uint8_t)c), ty = xg2__step(g, pb[i], (uint8_t)c);
            if ((tx == XG2_NONE) != (ty == XG2_NONE)) return 0;
            if (tx == XG2_NONE || tx == ty) continue;
            uint32_t k = 0;
            while (k < n && !(pa[k] == tx && pb[k] == ty)) k++;
            if (k < n) continue;
            if (n == CAP) return 0;
            pa[n] = tx;
            pb[n++] = ty;
        }
    }
    return 1;
}

/* May q end the rule?  Only where no character of the class can follow the
 * rule (a class character after an end is then refused either way); 0 if
 * that does not hold, else 1 with *ends. */
static int class_end_ok(const xg2_grammar *g, const xg2_slice *s, uint32_t q, const xg2_byteset *follow, int *ends) {
    *ends = (g->states[q].flags & SF_FINAL) != 0;
    if (!*ends) return 1;
    if (g->states[q].loop) return 0;
    for (int c = 0; c < 256; c++)
        if (s->dfa[c] >= 0 && byteset_has(follow, (unsigned)c)) return 0;
    return 1;
}

/* Does the first whole character of the class lead from q to a state q1 that
 * every further character returns to (q1 may be q)?  Then a token is accepted
 * iff: it is made of whole class characters only (`whole`); or it starts with
 * none and is accepted from q (`heads`); or what follows its longest prefix of
 * them is accepted from q1 (`suffixes`).  *ends: q1 may end the rule, so the
 * suffix's first byte may follow an end. */
int xg2__slice_loops(const xg2_grammar *g, const xg2_vocab *v, const xg2_slice *s, uint32_t q, uint32_t count,
                       const xg2_byteset *follow, uint32_t *q1, int *ends) {
    if (!xg2__is_pure(g, q) || !class_end_ok(g, s, q, follow, ends)) return 0;
    uint32_t loop = g->states[q].loop >> 1;
    if (loop) {
        const xg2_loop *l = &g->loops[loop - 1];
        uint32_t far = xg2__loop_far(g, loop, xg2__count_far(v));
        if (l->max >= 0 && (uint32_t)l->max - count < far) return 0;
        /* a suffix is walked at the count before its token's whole characters:
         * wrong where they could reach the minimum (leaving needs it) */
        if (count < (uint32_t)l->min && (uint32_t)l->min - count < far) return 0;
    }
    if (!xg2__slice_class_target(g, s, q, count, q1)) return 0;
    if (*q1 == q) return 1; /* (*ends already says whether q may end) */
    /* a state entered from q: counts are not followed there */
    if (loop || g->states[*q1].loop || !xg2__is_pure(g, *q1) || !class_end_ok(g, s, *q1, follow, ends)) return 0;
    uint32_t again, loops_to;
    if (!xg2__slice_class_target(g, s, *q1, 0, &again)) return 0;
    if (again == *q1) return 1;
    /* X X*: minimisation keeps the state after one X apart from the loop's;
     * fine if the two have the same future */
    if (g->states[again].loop || !xg2__slice_class_target(g, s, again, 0, &loops_to) || loops_to != again ||
        !equivalent(g, *q1, again))
        return 0;
    *q1 = again;
    return 1;
}

/* A bounded run of the slice's class from q (a string of at most r characters:
 * maxLength, or a counted loop near its maximum): every class string of at
 * most r characters stays inside the rule, and the first byte of any further
 * character is refused, in every configuration alike.  Then the slice's
 * members of at most r characters are accepted in bulk (upto[r]), its longer
 * members refused, and only `rest` is walked.  Returns 1 with *r (capped at
 * XG2_SLICE_MAX_CHARS), or 0 when the state is not such a run. */
int xg2__slice_bounded(const xg2_grammar *g, const xg2_slice *s, uint32_t q, uint32_t count,
                         const xg2_byteset *follow, uint32_t *r) {
    enum { CAP = 256 };
    uint32_t cur_t[CAP], cur_n[CAP], nxt_t[CAP], nxt_n[CAP], n_cur = 1, n_nxt;
    uint32_t st_a[CAP], st_t[CAP], st_n[CAP], sp;
    uint32_t mid_a[CAP], mid_t[CAP], mid_n[CAP], n_mid;
    cur_t[0] = q;
    cur_n[0] = count;
    uint32_t work = 0; /* configurations expanded */
    for (uint32_t k = 0; k < XG2_SLICE_MAX_CHARS; k++) {
        int first_alive = -1;
        n_nxt = n_mid = 0;
        sp = 0;
        for (uint32_t i = 0; i < n_cur; i++) {
            st_a[sp] = 0;
            st_t[sp] = cur_t[i];
            st_n[sp++] = cur_n[i];
        }
        while (sp) {
            if (++work > BOUNDED_WORK_LIMIT) return 0; /* a long automaton: not worth proving */
            sp--;
            uint32_t a = st_a[sp], t = st_t[sp], n = st_n[sp];
            /* the rule may end here with a class byte next: tokens could be uncertain */
            if ((g->states[t].flags & SF_FINAL) && xg2__loop_may_end(g, t, n))
                for (int w = 0; w < 4; w++)
                    if (follow->w[w] & s->alive[a].w[w]) return 0;
            const int32_t *row = s->dfa + 256 * a;
            xg2_byteset bytes;
            pair_bytes(g, s, a, t, &bytes);
            FOR_BYTES(c, bytes) {
                uint32_t t2 = xg2__step(g, t, (uint8_t)c), n2 = 0;
                if (t2 != XG2_NONE && g->n_loops) n2 = xg2__loop_step(g, t, t2, (uint8_t)c, n);
                int alive = t2 != XG2_NONE && n2 != UINT32_MAX;
                if (a == 0) { /* a character starts: alive everywhere or nowhere */
                    if (first_alive < 0) first_alive = alive;
                    else if (first_alive != alive) return 0;
                    if (!alive) continue;
                } else if (!alive) {
                    return 0;
                }
                if (!xg2__is_pure(g, t2)) return 0;
                uint32_t a2 = (uint32_t)row[c];
                if (s->dfa_final[a2]) {
                    uint32_t j = 0;
                    while (j < n_nxt && !(nxt_t[j] == t2 && nxt_n[j] == n2)) j++;
                    if (j == n_nxt) {
                        if (n_nxt == CAP) return 0;
                        nxt_t[n_nxt] = t2;
                        nxt_n[n_nxt++] = n2;
                    }
                } else { /* inside a character: each configuration once per level */
                    uint32_t j = 0;
                    while (j < n_mid && !(mid_a[j] == a2 && mid_t[j] == t2 && mid_n[j] == n2)) j++;
                    if (j < n_mid) continue;
                    if (n_mid == CAP || sp == CAP) return 0;
                    mid_a[n_mid] = a2;
                    mid_t[n_mid] = t2;
                    mid_n[n_mid++] = n2;
                    st_a[sp] = a2;
                    st_t[sp] = t2;
                    st_n[sp++] = n2;
                }
            }
        }
        if (first_alive == 0) { /* character k + 1 is refused: members of at most k */
            *r = k;
            return 1;
        }
        if (first_alive < 0) return 0;
        memcpy(cur_t, nxt_t, sizeof(uint32_t) * n_nxt);
        memcpy(cur_n, nxt_n, sizeof(uint32_t) * n_nxt);
        n_cur = n_nxt;
    }
    *r = XG2_SLICE_MAX_CHARS; /* members of up to 32 characters all live; longer ones are in rest */
    return 1;
}
