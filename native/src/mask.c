/*
 * mask.c -- next-token masks: from the adaptive cache, or by a full trie walk.
 *
 * Full walk: nodes are visited in depth-first order.  Before trying node i the
 * parser is popped back to depth(i) - 1 bytes above the start; if it accepts
 * the node's byte, every token ending at the node is allowed and the walk
 * descends (i+1), otherwise the whole subtree is skipped (i + subtree).
 *
 * Cached fill: the mask is the union, over the kernel items of the current set
 * (items that began before this position; the rest are their predictions), of
 * each item's cached accepted tokens, plus those of its uncertain tokens the
 * live parser accepts.  Uncertain tokens are checked in byte order so that
 * consecutive tokens share the pushes of their common prefix.
 */
#include "mask.h"

#include "literal_fans.h"

int xg2__mask_walk(xg2_parser *p, const xg2_vocab *v, uint32_t *row) {
    const xg2_trie_node *nodes = v->trie.nodes;
    const int32_t *ids = v->trie.ids;
    uint32_t depth = 0;
    for (uint32_t i = 1; i < v->trie.n_nodes;) {
        const xg2_trie_node *nd = &nodes[i];
        uint32_t want = (uint32_t)nd->depth - 1;
        if (depth > want) {
            xg2__parser_pop(p, depth - want);
            depth = want;
        }
        int r = xg2__parser_push(p, nd->byte);
        if (r < 0) {
            xg2__parser_pop(p, depth);
            return -r;
        }
        if (r) {
            depth++;
            for (uint32_t k = nd->tok_begin; k < (uint32_t)nd->tok_begin + nd->tok_count; k++) {
                uint32_t t = (uint32_t)ids[k];
                row[t >> 5] |= 1u << (t & 31);
            }
            i++;
        } else {
            i += nd->subtree;
        }
    }
    xg2__parser_pop(p, depth);
    return XG2_OK;
}

/* A plain state for resolve's own steps: bytes only (no calls, counters or
 * token edges) and outside counted loops. */
static inline int plain_state(const xg2_state *st) {
    return !(st->flags & (SF_REFS | SF_REPEAT | SF_TOKEN)) && !st->loop;
}

/* Bytes b[from .. len) of a token stepped in the automaton of the parser's lone
 * scanning item, from its plain state q: 1 all taken (a parse of the token),
 * 0 refused at b[*dead] with no other parse possible (no end of q's rule on the
 * way that FOLLOW lets a byte after), -1 undecided (the parser pushes them),
 * -2 out of work. */
static int lone_verdict(xg2_parser *p, uint32_t q, const uint8_t *b, uint32_t from, uint32_t len, uint32_t *dead) {
    const xg2_grammar *g = p->g;
    const xg2_byteset *follow = &g->follow[g->states[q].rule];
    int other = 0; /* the rule may have ended before a byte its callers can take */
    for (uint32_t i = from; i < len; i++) {
        if (--p->work_left < 0) return -2;
        if ((g->states[q].flags & SF_FINAL) && byteset_has(follow, b[i])) other = 1;
        uint32_t t = xg2__step(g, q, b[i]);
        if (t == XG2_NONE) {
            if (other) return -1;
            *dead = i;
            return 0;
        }
        if (!plain_state(&g->states[t])) return -1;
        q = t;
    }
    return 1;
}

/* Check tokens (byte order) against the live parser; set the accepted ones.
 * Where many pushes at one depth fail (the tokens that run from free text into
 * a tag: a byte per tool name's first letter), the bytes the parser's items
 * can take there (a superset) are read once and the others refused unpushed.
 * Where a single item can take the next byte, in a plain state (back in a
 * TagDispatch's free text after a tag's last byte), tokens are stepped in its
 * automaton without pushes while that decides them (lone_verdict).  text_off:
 * the entry's copy of the tokens' bytes (pool.h, unc_off), or NULL to read them
 * from the vocabulary. */
#define RESOLVE_FAILS_BEFORE_NEXT 8
#define RESOLVE_LONE_MIN_TOKENS 64
static int resolve(xg2_parser *p, const xg2_vocab *v, const int32_t *toks, uint32_t n, const uint32_t *text_off,
                   uint32_t *row) {
    /* token k's bytes: bytes + offs[at], at = k in the entry's copy, the id in the vocabulary */
    const uint8_t *bytes = text_off ? (const uint8_t *)(text_off + n + 1) : (const uint8_t *)v->bytes;
    const uint32_t *offs = text_off ? text_off : v->off;
    const xg2_grammar *g = p->g;
    uint32_t depth = 0, dead_at = UINT32_MAX, prev_len = 0;
    uint32_t next_depth = UINT32_MAX, fails_depth = UINT32_MAX, fails = 0; /* (valid while that depth's prefix is) */
    uint32_t lone_depth = UINT32_MAX, lone_state = XG2_NONE; /* lone_state: XG2_NONE if no lone plain item there */
    /* (worth looking for only under many tokens: a few cost less pushed than the look) */
    int lone_worth = n >= RESOLVE_LONE_MIN_TOKENS && !g->has_budgets;
    xg2_byteset next;
    const uint8_t *prev = NULL;
    int rc = XG2_OK;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t t = (uint32_t)toks[k];
        if ((row[t >> 5] >> (t & 31)) & 1) continue;
        uint32_t at = text_off ? k : t;
        const uint8_t *b = bytes + offs[at];
        uint32_t len = offs[at + 1] - offs[at];
        uint32_t lcp = 0, m = prev_len < len ? prev_len : len;
        while (lcp < m && prev[lcp] == b[lcp]) lcp++;
        if (dead_at < lcp) continue; /* shares a prefix the parser already refused */
        if (depth > lcp) {
            xg2__parser_pop(p, depth - lcp);
            depth = lcp;
        }
        if (next_depth > lcp) next_depth = UINT32_MAX; /* (the prefix they were read at changed) */
        if (fails_depth > lcp) fails_depth = UINT32_MAX;
        if (lone_depth > lcp) lone_depth = UINT32_MAX;
        dead_at = UINT32_MAX;
        for (uint32_t i = depth; i < len; i++) {
            if (lone_depth != i && lone_worth && i) { /* (at depth 0 the lone item is the kernel's, whose rule ends: undecided) */
                xg2_item it;
                lone_depth = i;
                lone_state = xg2__parser_lone_scanner(p, &it) && !it.guard && plain_state(&g->states[it.state])
                                 ? it.state : XG2_NONE; /* (a plain state counts nothing) */
            }
            if (lone_depth == i && lone_state != XG2_NONE) {
                uint32_t dead = 0;
                int verdict = lone_verdict(p, lone_state, b, i, len, &dead);
                if (verdict == -2) { rc = xg2__work_fail(); goto out; }
                if (verdict == 1) break; /* (dead_at stays unset: accepted) */
                if (verdict == 0) { dead_at = dead; break; }
            }
            if (i == next_depth && !byteset_has(&next, b[i])) { dead_at = i; break; }
            int r = xg2__parser_push(p, b[i]);
            if (r < 0) { rc = -r; goto out; }
            if (!r) {
                dead_at = i;
                if (fails_depth != i) fails_depth = i, fails = 0;
                if (++fails == RESOLVE_FAILS_BEFORE_NEXT && next_depth != i) {
                    xg2__parser_next_bytes(p, &next);
                    next_depth = i;
                }
                break;
            }
            depth++;
        }
        if (dead_at == UINT32_MAX) row[t >> 5] |= 1u << (t & 31);
        prev = b;
        prev_len = len;
    }
out:
    xg2__parser_pop(p, depth);
    return rc;
}

void xg2__mask_memo_clear(xg2_mask_memo *memo) {
    for (uint32_t j = 0; j < memo->n; j++) xg2__pool_release(memo->e[j]);
    memo->n = 0;
}

static xg2_mask_entry *memo_find(const xg2_mask_memo *memo, uint64_t k1, uint64_t k2) {
    if (!memo) return NULL;
    for (uint32_t j = 0; j < memo->n; j++)
        if (memo->e[j]->k1 == k1 && memo->e[j]->k2 == k2) return memo->e[j];
    return NULL;
}

/* A kernel item's entry during a fill; owned: the fill holds a reference of its
 * own (taken from the pool), else the entry is the memo's. */
typedef struct {
    xg2_mask_entry *e;
    int owned;
} held_entry;

/* After a fill: the memo becomes the fill's first entries.  An owned reference
 * moves into the memo or is dropped; entries found in the old memo stay as they
 * are, so a fill in unchanged states writes no shared reference count. */
static void memo_update(xg2_mask_memo *memo, const held_entry *held, uint32_t n_held) {
    xg2_mask_memo next = {0};
    uint8_t kept[XG2_MEMO_SLOTS] = {0};
    for (uint32_t j = 0; j < n_held; j++) {
        xg2_mask_entry *e = held[j].e;
        int in_next = 0;
        for (uint32_t q = 0; q < next.n; q++) in_next |= next.e[q] == e;
        if (in_next || next.n == XG2_MEMO_SLOTS) {
            if (held[j].owned) xg2__pool_release(e);
            continue;
        }
        if (!held[j].owned) { /* from the old memo: its reference moves over */
            for (uint32_t q = 0; q < memo->n; q++)
                if (memo->e[q] == e && !kept[q]) { kept[q] = 1; break; }
        }
        next.e[next.n++] = e;
    }
    for (uint32_t q = 0; q < memo->n; q++)
        if (!kept[q]) xg2__pool_release(memo->e[q]);
    *memo = next;
}

/* The keys of the entries held so far: a linear scan while few, then a hash
 * table of indices into held (rebuilt as it grows). */
typedef struct {
    uint32_t *tab; /* held index + 1, 0 = empty */
    uint32_t cap;
} key_set;

#define KEY_SCAN_MAX 8

static inline uint32_t key_slot(uint64_t k1, uint64_t k2, uint32_t cap) {
    return (uint32_t)(xg2__mix64(k1, k2) & (cap - 1));
}

/* 1 if (k1, k2) is among held[0 .. n)'s keys, else 0 (the caller appends it as
 * held[n]); -1 on allocation failure. */
static int key_set_add(key_set *ks, const held_entry *held, uint32_t n, uint64_t k1, uint64_t k2) {
    if (n <= KEY_SCAN_MAX) {
        for (uint32_t j = 0; j < n; j++)
            if (held[j].e->k1 == k1 && held[j].e->k2 == k2) return 1;
        if (n < KEY_SCAN_MAX) return 0;
    }
    if (4 * (uint64_t)(n + 1) > ks->cap) { /* (re)build from held */
        uint32_t cap = ks->cap ? ks->cap * 2 : 64;
        while (cap < 4 * (uint64_t)(n + 1)) cap *= 2;
        uint32_t *t = xg2__calloc(cap, sizeof(uint32_t));
        if (!t) return -1;
        xg2__free(ks->tab);
        ks->tab = t;
        ks->cap = cap;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t h = key_slot(held[j].e->k1, held[j].e->k2, cap);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = j + 1;
        }
    }
    uint32_t h = key_slot(k1, k2, ks->cap);
    for (; ks->tab[h]; h = (h + 1) & (ks->cap - 1)) {
        const xg2_mask_entry *e = held[ks->tab[h] - 1].e;
        if (e->k1 == k1 && e->k2 == k2) return 1;
    }
    ks->tab[h] = n + 1; /* the caller stores held[n] */
    return 0;
}

/* The entries a fill holds, each key once. */
typedef struct {
    held_entry small[8], *a;
    uint32_t n, cap;
    key_set seen;
} held_set;

/* A slot for key (k1, k2): *h = &hs->a[hs->n] (owned 0, entry unset; the caller
 * fills it and counts it, hs->n++), or NULL if the key is held already.  XG2_OK
 * or XG2_ERR_NOMEM. */
static int held_slot(held_set *hs, uint64_t k1, uint64_t k2, held_entry **h) {
    *h = NULL;
    int dup = key_set_add(&hs->seen, hs->a, hs->n, k1, k2);
    if (dup < 0) return XG2_NOMEM();
    if (dup) return XG2_OK;
    if (hs->n == hs->cap) {
        held_entry *bigger = xg2__malloc(sizeof(*bigger) * hs->cap * 2);
        if (!bigger) return XG2_NOMEM();
        memcpy(bigger, hs->a, sizeof(*bigger) * hs->n);
        if (hs->a != hs->small) xg2__free(hs->a);
        hs->a = bigger;
        hs->cap *= 2;
    }
    *h = &hs->a[hs->n];
    (*h)->owned = 0;
    (*h)->e = NULL;
    return XG2_OK;
}

/* A fan state's key and the run of held entries that are its literals'. */
typedef struct {
    uint64_t k1, k2;
    uint32_t first, end;
} fan_union;

/* Hold the entries of fan k's literals (each key once). */
static int hold_literals(held_set *hs, const xg2_grammar *g, const xg2_vocab *v, uint32_t k, int64_t *work) {
    uint32_t n = g->fans[k].hi - g->fans[k].lo;
    if ((*work -= n) < 0) return xg2__work_fail();
    xg2_mask_entry *small[64], **got = n <= 64 ? small : xg2__malloc(sizeof(*got) * n);
    if (!got) return XG2_NOMEM();
    int rc = xg2__fan_entries(g, v, k, work, got);
    for (uint32_t i = 0; i < n && !rc; i++) {
        held_entry *h;
        if ((rc = held_slot(hs, got[i]->k1, got[i]->k2, &h)) || !h) continue;
        h->e = got[i];
        h->owned = 1;
        got[i] = NULL; /* (held now) */
        hs->n++;
    }
    for (uint32_t i = 0; i < n; i++) xg2__pool_release(got[i]); /* (repeats; the rest after an error) */
    if (got != small) xg2__free(got);
    return rc;
}

int xg2__mask_fill(xg2_parser *p, const xg2_vocab *v, uint32_t *row, xg2_mask_memo *memo, int *empty) {
    const xg2_grammar *g = p->g;
    if (empty) *empty = 0;
    uint32_t k = p->ns - 1;
    uint32_t begin = p->set_start.a[k], end = p->set_start.a[k + 1];
    size_t words = v->words;
    for (uint32_t i = begin; i < end; i++) {
        if (p->items.a[i].guard) {
            memset(row, 0, words * sizeof(uint32_t));
            return xg2__mask_walk(p, v, row);
        }
    }
    /* Gather the kernel items' entries (few: usually one), each key once: many
     * items of one structure (a cycle of left-recursive rules puts one per rule
     * in the set) share an entry, whose tokens need merging only once.  An item
     * at a fan state (literal_fans.h) brings one entry per literal instead. */
    held_set hs = {.cap = 8};
    hs.a = hs.small;
    int rc = XG2_OK;
    VEC(int32_t) merged = {0}, uni = {0}; /* (uni: a fan's union, below) */
    int fans = g->n_fan && !g->has_budgets; /* (a budget counts bytes inside the rule) */
    uint32_t n_unions = 0;
    fan_union one_union = {0};
    for (uint32_t i = begin; i < end; i++) {
        xg2_item it = p->items.a[i];
        if (it.origin >= k && !(k == 0 && i == begin)) continue; /* a prediction */
        if (!(g->states[it.state].flags & (SF_BYTES | SF_REFS | SF_REPEAT))) continue;
        it = xg2__mask_item(g, it);
        if (--p->work_left < 0) { rc = xg2__work_fail(); goto out; } /* a kernel item looked at */
        uint32_t fan = fans ? xg2__fan_of(g, it.state) : XG2_NONE;
        if (fan != XG2_NONE && g->fans[fan].cut) { /* a chain: its one literal's entry is its mask (no key) */
            if ((rc = hold_literals(&hs, g, v, fan, &p->work_left))) goto out;
            continue;
        }
        uint64_t k1, k2;
        xg2__mask_key(g, v, &it, &k1, &k2);
        if (fan != XG2_NONE && !memo_find(memo, k1, k2)) {
            /* its own entry if cached (the union from before), else its literals' */
            xg2_mask_entry *e = xg2__pool_find((xg2_pool *)&v->pool, k1, k2);
            if (!e) {
                if (!n_unions++) one_union = (fan_union){k1, k2, hs.n, 0};
                if ((rc = hold_literals(&hs, g, v, fan, &p->work_left))) goto out;
                one_union.end = hs.n;
                continue;
            }
            held_entry *h;
            if ((rc = held_slot(&hs, k1, k2, &h)) || !h) { xg2__pool_release(e); if (rc) goto out; continue; }
            h->e = e;
            h->owned = 1;
            hs.n++;
            continue;
        }
        held_entry *h;
        if ((rc = held_slot(&hs, k1, k2, &h))) goto out;
        if (!h) continue;
        if (!(h->e = memo_find(memo, k1, k2))) {
            if ((rc = xg2__mask_entry_get(g, v, &it, k1, k2, &p->work_left, &h->e))) goto out;
            h->owned = 1;
        }
        hs.n++;
    }
    held_entry *held = hs.a;
    uint32_t n_ent = hs.n;
    /* No entry (no bitset, no listed or uncertain id): with `empty` asked for, the row
     * is left to the caller, which writes it whole. */
    if (empty) *empty = n_ent == 0;
    /* Accepted tokens: copy the first bitset, OR the others, then set listed ids. */
    int wrote = 0;
    for (uint32_t j = 0; j < n_ent; j++) {
        const uint32_t *bits = held[j].e->bits;
        if (!bits) continue;
        if (!wrote) memcpy(row, bits, words * sizeof(uint32_t));
        else for (size_t w = 0; w < words; w++) row[w] |= bits[w];
        wrote = 1;
    }
    if (!wrote && !(empty && *empty)) memset(row, 0, words * sizeof(uint32_t));
    /* A fan's union, when it is all the fill holds, is kept for the next time:
     * its accepted tokens as they are first set (so once each). */
    int keep_union = n_unions == 1 && one_union.first == 0 && one_union.end == n_ent && !wrote;
    if (keep_union) {
        uint64_t most = 0;
        for (uint32_t j = 0; j < n_ent; j++) most += held[j].e->n_acc;
        keep_union = !vec_reserve(&uni, most ? most : 1);
    }
    const xg2_mask_entry *with_unc = NULL;
    int n_unc_entries = 0;
    for (uint32_t j = 0; j < n_ent; j++) {
        const xg2_mask_entry *e = held[j].e;
        for (uint32_t x = 0; x < e->n_acc; x++) {
            uint32_t t = (uint32_t)e->acc[x];
            if (keep_union && !((row[t >> 5] >> (t & 31)) & 1)) uni.a[uni.n++] = (int32_t)t;
            row[t >> 5] |= 1u << (t & 31);
        }
        if (!e->n_unc) continue;
        if (++n_unc_entries == 1) {
            with_unc = e;
            continue;
        }
        if (n_unc_entries == 2) {
            if (vec_reserve(&merged, with_unc->n_unc)) { rc = XG2_NOMEM(); goto out; }
            memcpy(merged.a, with_unc->unc, sizeof(int32_t) * with_unc->n_unc);
            merged.n = with_unc->n_unc;
        }
        if (vec_reserve(&merged, (uint64_t)merged.n + e->n_unc)) { rc = XG2_NOMEM(); goto out; }
        memcpy(merged.a + merged.n, e->unc, sizeof(int32_t) * e->n_unc);
        merged.n += e->n_unc;
    }
    /* Uncertain tokens: ask the live parser, in byte order. */
    if (n_unc_entries == 1) {
        rc = resolve(p, v, with_unc->unc, with_unc->n_unc, with_unc->unc_off, row);
    } else if (n_unc_entries > 1) {
        if (!(rc = xg2__vocab_sort_unique_ids(v, merged.a, &merged.n))) rc = resolve(p, v, merged.a, merged.n, NULL, row);
    }
    if (!rc && keep_union) {
        const int32_t *unc = n_unc_entries == 1 ? with_unc->unc : merged.a;
        uint32_t n_unc = n_unc_entries == 1 ? with_unc->n_unc : n_unc_entries ? merged.n : 0;
        xg2__fan_union_insert(v, one_union.k1, one_union.k2, uni.a, uni.n, unc, n_unc);
    }
out:
    if (memo) {
        memo_update(memo, hs.a, hs.n);
    } else {
        for (uint32_t j = 0; j < hs.n; j++)
            if (hs.a[j].owned) xg2__pool_release(hs.a[j].e);
    }
    if (hs.a != hs.small) xg2__free(hs.a);
    xg2__free(hs.seen.tab);
    vec_free(&merged);
    vec_free(&uni);
    return rc;
}
