/*
 * tag_dispatch.c -- TagDispatch (XGrammar-2 §3.2) as one Aho-Corasick automaton.
 *
 * A trie of the triggers and excluded strings with failure links: the state is
 * the longest suffix of the free text read so far that is a prefix of one of
 * the strings.  A state is
 *   dead       if an excluded string is a suffix of it: the text never goes there;
 *   complete   if a trigger is a suffix of it: not final, a rule edge per such
 *              trigger (to the start when the dispatch loops, else to the end
 *              state), and byte edges only to its trie children -- the text may
 *              still grow into a longer trigger that contains the one just read
 *              ("<a" then "<ab"), never back into free text;
 *   committed  if a trigger ended inside it, before its last byte: the same
 *              without rule edges (the longer trigger must complete);
 *   free       otherwise: final, with the whole Aho-Corasick row.
 * So free text never holds a trigger that is not dispatched, nor an excluded
 * string, and a byte costs one table step whatever the number of strings.
 * Rows are kept sparse (the entries that do not go back to the root), each
 * made from its failure state's row, in breadth-first order.  The automaton is
 * then trimmed and numbered like any rule's (fsm.c).
 */
#include <stdio.h>

#include "fsm.h"

#define NONE UINT32_MAX
/* Moore refinement of one big cycle (every state returns to the start) costs
 * rounds times states: larger automata are only trimmed and numbered (equal
 * states then stay apart, which costs mask entries, not correctness). */
#define DISPATCH_MINIMISE_MAX 512

typedef struct {
    uint32_t byte, to;
} ac_entry;

typedef struct {
    uint32_t off, len, trig; /* bytes in ir->bytes; trigger index, or NONE for an excluded string */
} ac_string;

typedef struct {
    uint32_t n;                              /* trie nodes; 0 is the root */
    uint32_t *parent, *child, *sib, *last;   /* first child, next sibling, last child */
    uint32_t *fail, *tnode, *order, *row_off, *row_n;
    uint32_t *trig;                          /* trigger index ending at the node, or NONE */
    uint8_t *byte, *excl, *dead, *committed;
    VEC(ac_entry) rows;
} ac;

static void ac_free(ac *a) {
    xg2__free(a->parent);
    xg2__free(a->byte);
    vec_free(&a->rows);
    memset(a, 0, sizeof *a);
}

/* Strings sorted by their bytes (qsort has no context argument). */
static _Thread_local const uint8_t *sort_bytes;
static int cmp_string(const void *x, const void *y) {
    const ac_string *a = x, *b = y;
    uint32_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(sort_bytes + a->off, sort_bytes + b->off, n) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* A string for a message: printable ASCII as it is, other bytes as \xHH. */
static const char *show(const uint8_t *s, uint32_t n, char *buf, size_t cap) {
    size_t k = 0;
    for (uint32_t i = 0; i < n && k + 8 < cap; i++) {
        if (s[i] >= 0x20 && s[i] < 0x7F && s[i] != '"' && s[i] != '\\') buf[k++] = (char)s[i];
        else k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", s[i]);
    }
    if (k + 8 >= cap) k += (size_t)snprintf(buf + k, cap - k, "...");
    buf[k] = 0;
    return buf;
}

/* The row of state s (NULL when empty: with no trigger there are no rows at
 * all, and NULL plus an offset, even 0, is undefined). */
static const ac_entry *row_of(const ac *a, uint32_t s) {
    return a->row_n[s] ? a->rows.a + a->row_off[s] : NULL;
}

static uint32_t delta(const ac *a, uint32_t s, uint32_t c) {
    const ac_entry *r = row_of(a, s);
    uint32_t lo = 0, hi = a->row_n[s];
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (r[mid].byte < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < a->row_n[s] && r[lo].byte == c ? r[lo].to : 0;
}

/* Row of u: its children over the row of its failure state (both sorted). */
static int make_row(ac *a, uint32_t u) {
    uint32_t f = a->fail[u], i = a->row_off[f], end = i + a->row_n[f], c = a->child[u];
    a->row_off[u] = a->rows.n;
    if (u == 0) end = i; /* the root's row is its children */
    while (c != NONE || i < end) {
        ac_entry x;
        if (c != NONE && (i == end || a->byte[c] <= a->rows.a[i].byte)) {
            if (i < end && a->rows.a[i].byte == a->byte[c]) i++;
            x.byte = a->byte[c];
            x.to = c;
            c = a->sib[c];
        } else {
            x = a->rows.a[i++];
        }
        if (vec_push(&a->rows, x)) return XG2_NOMEM();
    }
    a->row_n[u] = a->rows.n - a->row_off[u];
    if (a->rows.n > XG2_MAX_DISPATCH_EDGES)
        return xg2__fail(XG2_ERR_LIMIT, "TagDispatch(...) needs more than %d automaton edges", XG2_MAX_DISPATCH_EDGES);
    return XG2_OK;
}

/* The trie of the sorted strings: a string's node is found along the last
 * children, since every earlier string sorts before it. */
static int insert_all(ac *a, const xg2_ir *ir, const ac_string *str, uint32_t n_str) {
    char buf[160];
    for (uint32_t k = 0; k < n_str; k++) {
        const uint8_t *w = ir->bytes.a + str[k].off;
        uint32_t cur = 0;
        for (uint32_t j = 0; j < str[k].len; j++) {
            uint32_t c = a->last[cur];
            if (c == NONE || a->byte[c] != w[j]) {
                c = a->n++;
                a->parent[c] = cur;
                a->byte[c] = w[j];
                a->child[c] = a->sib[c] = a->last[c] = NONE;
                a->trig[c] = NONE;
                a->excl[c] = 0;
                if (a->last[cur] == NONE) a->child[cur] = c;
                else a->sib[a->last[cur]] = c;
                a->last[cur] = c;
            }
            cur = c;
        }
        if (str[k].trig == NONE) {
            a->excl[cur] = 1;
        } else if (a->trig[cur] != NONE) {
            return xg2__fail(XG2_ERR_GRAMMAR, "TagDispatch(...) has the trigger \"%s\" twice",
                             show(w, str[k].len, buf, sizeof buf));
        } else {
            a->trig[cur] = str[k].trig;
        }
    }
    return XG2_OK;
}

/* Failure links, rows and the kind of each state, in breadth-first order. */
static int link_all(ac *a, const char *name) {
    uint32_t head = 0, tail = 1;
    a->order[0] = 0;
    a->fail[0] = 0;
    a->tnode[0] = NONE;
    a->dead[0] = a->committed[0] = 0;
    while (head < tail) {
        uint32_t u = a->order[head++];
        int rc;
        if ((head & 255) == 0 && (rc = xg2__budget_check("building the TagDispatch of rule", name))) return rc;
        if ((rc = make_row(a, u))) return rc;
        for (uint32_t v = a->child[u]; v != NONE; v = a->sib[v]) {
            uint32_t f = u == 0 ? 0 : delta(a, a->fail[u], a->byte[v]);
            a->fail[v] = f;
            a->tnode[v] = a->trig[v] != NONE ? v : a->tnode[f];
            a->dead[v] = a->excl[v] || a->dead[f];
            a->committed[v] = a->committed[u] || a->tnode[u] != NONE;
            a->order[tail++] = v;
        }
    }
    return XG2_OK;
}

/* An excluded string inside a trigger would make the trigger impossible
 * (XGrammar checks only for a prefix). */
static int check_triggers(const ac *a, const xg2_ir *ir, const ac_string *str, uint32_t n_str) {
    char b1[160], b2[160];
    uint8_t path[64];
    for (uint32_t k = 0; k < n_str; k++) {
        if (str[k].trig == NONE) continue;
        uint32_t u = 0;
        const uint8_t *w = ir->bytes.a + str[k].off;
        for (uint32_t j = 0; j < str[k].len; j++) {
            u = delta(a, u, w[j]); /* (the trie path: a trigger's prefixes are nodes) */
            if (!a->dead[u]) continue;
            uint32_t x = u, n = 0;
            while (!a->excl[x]) x = a->fail[x];
            for (uint32_t y = x; y && n < sizeof path; y = a->parent[y]) path[n++] = a->byte[y];
            for (uint32_t i = 0; i < n / 2; i++) { uint8_t t = path[i]; path[i] = path[n - 1 - i]; path[n - 1 - i] = t; }
            return xg2__fail(XG2_ERR_GRAMMAR, "TagDispatch(...): the excluded string \"%s\" occurs in the trigger \"%s\"",
                             show(path, n, b1, sizeof b1), show(w, str[k].len, b2, sizeof b2));
        }
    }
    return XG2_OK;
}

static int ac_build(ac *a, const xg2_ir *ir, const xg2_expr *e, const char *name, int check) {
    uint32_t n_str = e->n + (uint32_t)e->min;
    const uint32_t *t = ir->pool.a + e->a, *x = t + 3 * e->n;
    uint64_t total = 1;
    memset(a, 0, sizeof *a);
    if (n_str > XG2_MAX_DISPATCH_STRINGS)
        return xg2__fail(XG2_ERR_LIMIT, "TagDispatch(...) has more than %d triggers and excluded strings", XG2_MAX_DISPATCH_STRINGS);
    ac_string *str = xg2__malloc(sizeof(ac_string) * (n_str ? n_str : 1));
    if (!str) return XG2_NOMEM();
    for (uint32_t i = 0; i < e->n; i++) str[i] = (ac_string){t[3 * i], t[3 * i + 1], i};
    for (uint32_t i = 0; i < (uint32_t)e->min; i++) str[e->n + i] = (ac_string){x[2 * i], x[2 * i + 1], NONE};
    for (uint32_t i = 0; i < n_str; i++) total += str[i].len;
    int rc = XG2_OK;
    if (total > XG2_MAX_DISPATCH_BYTES) {
        rc = xg2__fail(XG2_ERR_LIMIT, "TagDispatch(...) has more than %d bytes of triggers and excluded strings", XG2_MAX_DISPATCH_BYTES);
        goto out;
    }
    sort_bytes = ir->bytes.a;
    qsort(str, n_str, sizeof *str, cmp_string);
    /* one block of u32 arrays, one of bytes */
    a->parent = xg2__malloc(sizeof(uint32_t) * 11 * total);
    a->byte = xg2__malloc(4 * total);
    if (!a->parent || !a->byte) { rc = XG2_NOMEM(); goto out; }
    a->child = a->parent + total;
    a->sib = a->child + total;
    a->last = a->sib + total;
    a->fail = a->last + total;
    a->tnode = a->fail + total;
    a->order = a->tnode + total;
    a->row_off = a->order + total;
    a->row_n = a->row_off + total;
    a->trig = a->row_n + total;
    a->excl = a->byte + total;
    a->dead = a->excl + total;
    a->committed = a->dead + total;
    a->n = 1;
    a->row_off[0] = a->row_n[0] = 0;
    a->child[0] = a->sib[0] = a->last[0] = NONE;
    a->trig[0] = NONE;
    a->excl[0] = 0;
    if ((rc = insert_all(a, ir, str, n_str))) goto out;
    if ((rc = link_all(a, name))) goto out;
    if (check) rc = check_triggers(a, ir, str, n_str);
out:
    xg2__free(str);
    if (rc) ac_free(a);
    return rc;
}

int xg2__dispatch_check(const xg2_ir *ir, uint32_t expr) {
    ac a;
    int rc = ac_build(&a, ir, &ir->exprs.a[expr], NULL, 1);
    if (!rc) ac_free(&a);
    return rc;
}

typedef VEC(xg2_brange) brvec;
typedef VEC(xg2_redge) revec;

static int push_range(brvec *br, uint32_t first, uint32_t lo, uint32_t hi, uint32_t to) {
    if (br->n > first && br->a[br->n - 1].to == to && br->a[br->n - 1].hi + 1 == lo) {
        br->a[br->n - 1].hi = hi;
        return 0;
    }
    xg2_brange r = {lo, hi, to};
    return vec_push(br, r);
}

/* The edges of state u (see the top of the file); `end` is the rule edges'
 * target. */
static int state_edges(const ac *a, const xg2_ir *ir, const xg2_expr *e, uint32_t u, uint32_t end, brvec *br,
                       revec *re, uint8_t *final) {
    uint32_t first = br->n, r0 = re->n;
    *final = 0;
    if (a->dead[u]) return 0;
    if (a->tnode[u] == NONE && !a->committed[u]) { /* free text */
        *final = 1;
        uint32_t next = 0;
        const ac_entry *row = row_of(a, u);
        for (uint32_t i = 0; i < a->row_n[u]; i++) {
            if (row[i].byte > next && push_range(br, first, next, row[i].byte - 1, 0)) return 1;
            if (!a->dead[row[i].to] && push_range(br, first, row[i].byte, row[i].byte, row[i].to)) return 1;
            next = row[i].byte + 1;
        }
        return next <= 255 && push_range(br, first, next, 255, 0);
    }
    for (uint32_t v = a->child[u]; v != NONE; v = a->sib[v])
        if (!a->dead[v] && push_range(br, first, a->byte[v], a->byte[v], v)) return 1;
    for (uint32_t t = a->tnode[u]; t != NONE; t = a->tnode[a->fail[t]]) {
        uint32_t rule = ir->pool.a[e->a + 3 * a->trig[t] + 2];
        if (rule & XG2_DEAD_TRIGGER) continue;
        uint32_t i = re->n;
        while (i > r0 && re->a[i - 1].rule > rule) i--; /* sorted by rule, once each */
        if (i > r0 && re->a[i - 1].rule == rule) continue;
        xg2_redge x = {rule, end};
        if (vec_push(re, x)) return 1;
        memmove(re->a + i + 1, re->a + i, sizeof(xg2_redge) * (re->n - 1 - i));
        re->a[i] = x;
    }
    return 0;
}

int xg2__dispatch_build(const xg2_ir *ir, uint32_t expr, const char *name, xg2_dfa *out) {
    const xg2_expr *e = &ir->exprs.a[expr];
    ac a;
    memset(out, 0, sizeof *out);
    int rc = ac_build(&a, ir, e, name, 0);
    if (rc) return rc;
    int loop = (e->flags & XF_LOOP) != 0;
    uint32_t n = a.n + !loop, end = loop ? 0 : a.n;
    xg2_dfa d = {0};
    brvec br = {0};
    revec re = {0};
    d.n = n;
    d.boff = xg2__malloc(sizeof(uint32_t) * (n + 1));
    d.roff = xg2__malloc(sizeof(uint32_t) * (n + 1));
    d.final = xg2__calloc(n, 1);
    if (!d.boff || !d.roff || !d.final) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t u = 0; u < a.n; u++) {
        if ((u & 1023) == 1023 && (rc = xg2__budget_check("building the TagDispatch of rule", name))) goto out;
        d.boff[u] = br.n;
        d.roff[u] = re.n;
        if (state_edges(&a, ir, e, u, end, &br, &re, &d.final[u])) { rc = XG2_NOMEM(); goto out; }
    }
    if (!loop) { /* the end state */
        d.boff[a.n] = br.n;
        d.roff[a.n] = re.n;
        d.final[a.n] = 1;
    }
    d.boff[n] = br.n;
    d.roff[n] = re.n;
    d.br = br.a;
    d.re = re.a;
    br.a = NULL;
    re.a = NULL;
    rc = xg2__dfa_finish(&d, name, n <= DISPATCH_MINIMISE_MAX, out);
out:
    vec_free(&br);
    vec_free(&re);
    xg2__dfa_free(&d);
    ac_free(&a);
    return rc;
}
