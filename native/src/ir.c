/*
 * ir.c -- build, normalise and print the grammar IR.
 *
 * Normalisation, in order:
 *   1. simplify every body (flatten nested sequences/choices, merge adjacent
 *      literals, drop empty pieces);
 *   2. find the productive rules (those deriving at least one finite string);
 *      references to the others become XE_FAIL, and a root that matches nothing
 *      is an error;
 *   3. drop rules the root cannot reach;
 *   4. move repetitions too large to unroll into RK_REPEAT rules, which the
 *      parser runs with a counter (repetition compression, XGrammar-2 §3.6).
 */
#include <stdio.h>

#include "ir.h"

/* ---- construction ---- */

static uint32_t add_expr(xg2_ir *ir, xg2_expr e) {
    if (ir->err) return 0;
    if (vec_push(&ir->exprs, e)) { ir->err = XG2_ERR_NOMEM; return 0; }
    return ir->exprs.n - 1;
}

static uint32_t pool_add(xg2_ir *ir, const uint32_t *x, uint32_t n) {
    if (ir->err) return 0;
    if (vec_reserve(&ir->pool, (uint64_t)ir->pool.n + n)) { ir->err = XG2_ERR_NOMEM; return 0; }
    uint32_t at = ir->pool.n;
    if (n) memcpy(ir->pool.a + at, x, sizeof(uint32_t) * n);
    ir->pool.n += n;
    return at;
}

int xg2__ir_init(xg2_ir *ir) {
    memset(ir, 0, sizeof *ir);
    xg2_expr empty = {XE_EMPTY, 0, 0, 0, 0, 0};
    add_expr(ir, empty);
    return ir->err;
}

void xg2__ir_free(xg2_ir *ir) {
    vec_free(&ir->exprs);
    vec_free(&ir->pool);
    vec_free(&ir->bytes);
    vec_free(&ir->names);
    vec_free(&ir->rules);
    xg2__free(ir->name_tab);
}

uint32_t xg2__ir_empty(xg2_ir *ir) { (void)ir; return 0; }

uint32_t xg2__ir_fail(xg2_ir *ir) {
    xg2_expr e = {XE_FAIL, 0, 0, 0, 0, 0};
    return add_expr(ir, e);
}

uint32_t xg2__ir_bytes(xg2_ir *ir, const uint8_t *b, uint32_t n) {
    if (n == 0) return 0;
    if (ir->err) return 0;
    if (vec_reserve(&ir->bytes, (uint64_t)ir->bytes.n + n)) { ir->err = XG2_ERR_NOMEM; return 0; }
    uint32_t at = ir->bytes.n;
    memcpy(ir->bytes.a + at, b, n);
    ir->bytes.n += n;
    xg2_expr e = {XE_BYTES, 0, at, n, 0, 0};
    return add_expr(ir, e);
}

uint32_t xg2__ir_class(xg2_ir *ir, const uint32_t *ranges, uint32_t n, int negated) {
    uint32_t at = pool_add(ir, ranges, 2 * n);
    xg2_expr e = {XE_CLASS, (uint8_t)(negated ? XF_NEGATED : 0), at, n, 0, 0};
    return add_expr(ir, e);
}

uint32_t xg2__ir_ref(xg2_ir *ir, uint32_t rule) {
    xg2_expr e = {XE_REF, 0, rule, 0, 0, 0};
    return add_expr(ir, e);
}

uint32_t xg2__ir_list(xg2_ir *ir, int kind, const uint32_t *kids, uint32_t n) {
    if (n == 1) return kids[0];
    if (n == 0) return kind == XE_SEQ ? 0 : xg2__ir_fail(ir);
    uint32_t at = pool_add(ir, kids, n);
    xg2_expr e = {(uint8_t)kind, 0, at, n, 0, 0};
    return add_expr(ir, e);
}

uint32_t xg2__ir_repeat(xg2_ir *ir, uint32_t child, int32_t min, int32_t max) {
    xg2_expr e = {XE_REPEAT, 0, child, 0, min, max};
    return add_expr(ir, e);
}

uint32_t xg2__ir_token(xg2_ir *ir, const uint32_t *ids, uint32_t n, int exclude) {
    uint32_t at = pool_add(ir, ids, n);
    xg2_expr e = {XE_TOKEN, (uint8_t)(exclude ? XF_EXCLUDE : 0), at, n, 0, 0};
    return add_expr(ir, e);
}

uint32_t xg2__ir_except(xg2_ir *ir, const uint32_t args[3], const uint32_t *words, uint32_t n_words) {
    uint32_t at = pool_add(ir, args, 3);
    pool_add(ir, words, 2 * n_words);
    xg2_expr e = {XE_EXCEPT, 0, at, n_words, 0, 0};
    return add_expr(ir, e);
}

uint32_t xg2__ir_dispatch(xg2_ir *ir, const uint32_t *trig, uint32_t n_trig, const uint32_t *excl,
                          uint32_t n_excl, int loop) {
    uint32_t at = pool_add(ir, trig, 3 * n_trig);
    pool_add(ir, excl, 2 * n_excl);
    xg2_expr e = {XE_DISPATCH, (uint8_t)(loop ? XF_LOOP : 0), at, n_trig, (int32_t)n_excl, 0};
    return add_expr(ir, e);
}

uint32_t xg2__ir_length(xg2_ir *ir, uint32_t body, uint32_t unit, int32_t min, int32_t max) {
    uint32_t kids[2] = {body, unit};
    uint32_t at = pool_add(ir, kids, 2);
    xg2_expr e = {XE_LENGTH, 0, at, 2, min, max};
    return add_expr(ir, e);
}

uint32_t xg2__ir_macro(xg2_ir *ir, const char *name, uint32_t n_args) {
    if (ir->err) return 0;
    size_t len = strlen(name);
    if (vec_reserve(&ir->names, (uint64_t)ir->names.n + len + 1)) { ir->err = XG2_ERR_NOMEM; return 0; }
    uint32_t at = ir->names.n;
    memcpy(ir->names.a + at, name, len + 1);
    ir->names.n += (uint32_t)len + 1;
    xg2_expr e = {XE_MACRO, 0, at, n_args, 0, 0};
    return add_expr(ir, e);
}

/* ---- rule names ---- */

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int name_is(const xg2_ir *ir, uint32_t r, const char *name, size_t len) {
    const char *s = xg2__ir_name(ir, r);
    /* (the stored name may be shorter than len, and the last in the buffer) */
    return strnlen(s, len + 1) == len && memcmp(s, name, len) == 0;
}

/* Bring the name table up to date (grammars with thousands of rules look
 * names up once per reference).  Returns 0 on allocation failure. */
static int index_names(xg2_ir *ir) {
    uint32_t n = ir->rules.n;
    if (!ir->name_cap || (uint64_t)n * 2 > ir->name_cap) {
        uint32_t cap = ir->name_cap ? ir->name_cap : 64;
        while ((uint64_t)n * 2 > cap) cap *= 2;
        uint32_t *tab = xg2__calloc(cap, sizeof(uint32_t));
        if (!tab) return 0;
        xg2__free(ir->name_tab);
        ir->name_tab = tab;
        ir->name_cap = cap;
        ir->name_indexed = 0;
    }
    for (uint32_t r = ir->name_indexed; r < n; r++) {
        const char *s = xg2__ir_name(ir, r);
        uint32_t i = name_hash(s, strlen(s)) & (ir->name_cap - 1);
        while (ir->name_tab[i]) i = (i + 1) & (ir->name_cap - 1);
        ir->name_tab[i] = r + 1;
    }
    ir->name_indexed = n;
    return 1;
}

/* Forget the index (rules were renumbered). */
static void unindex_names(xg2_ir *ir) {
    if (ir->name_tab) memset(ir->name_tab, 0, sizeof(uint32_t) * ir->name_cap);
    ir->name_indexed = 0;
}

int32_t xg2__ir_find_rule(xg2_ir *ir, const char *name, size_t len) {
    if (!index_names(ir)) { /* no memory for the index: scan */
        for (uint32_t r = 0; r < ir->rules.n; r++)
            if (name_is(ir, r, name, len)) return (int32_t)r;
        return -1;
    }
    for (uint32_t i = name_hash(name, len) & (ir->name_cap - 1); ir->name_tab[i]; i = (i + 1) & (ir->name_cap - 1))
        if (name_is(ir, ir->name_tab[i] - 1, name, len)) return (int32_t)(ir->name_tab[i] - 1);
    return -1;
}

static uint32_t add_rule(xg2_ir *ir, const char *name, size_t len, uint32_t line, uint32_t col) {
    if (ir->err) return 0;
    if (ir->rules.n >= XG2_MAX_RULES) { ir->err = XG2_ERR_LIMIT; return 0; }
    if (vec_reserve(&ir->names, (uint64_t)ir->names.n + len + 1)) { ir->err = XG2_ERR_NOMEM; return 0; }
    uint32_t at = ir->names.n;
    memcpy(ir->names.a + at, name, len);
    ir->names.a[at + len] = 0;
    ir->names.n += (uint32_t)len + 1;
    xg2_rule_ir r = {at, 0, -1, RK_FSM, 0, line, col, UINT32_MAX, -1, -1, 0};
    if (vec_push(&ir->rules, r)) { ir->err = XG2_ERR_NOMEM; return 0; }
    return ir->rules.n - 1;
}

uint32_t xg2__ir_rule_id(xg2_ir *ir, const char *name, size_t len, uint32_t line, uint32_t col) {
    int32_t id = xg2__ir_find_rule(ir, name, len);
    return id >= 0 ? (uint32_t)id : add_rule(ir, name, len, line, col);
}

/* A fresh rule named base_N, defined with body. */
uint32_t xg2__ir_new_rule(xg2_ir *ir, const char *base, uint32_t body) {
    char buf[256];
    for (uint32_t k = 1;; k++) {
        int n = snprintf(buf, sizeof buf, "%.200s_%u", base, k);
        if (xg2__ir_find_rule(ir, buf, (size_t)n) < 0) {
            uint32_t id = add_rule(ir, buf, (size_t)n, 0, 0);
            if (ir->err) return 0;
            ir->rules.a[id].body = body;
            ir->rules.a[id].defined = 1;
            ir->rules.a[id].def = 0x40000000u + ir->n_defs++;
            return id;
        }
    }
}

/* ---- appending another grammar's IR (grammar_link.c) ---- */

/* `prefix` then `name` appended to dst's names; its offset, or UINT32_MAX without memory. */
static uint32_t add_prefixed_name(xg2_ir *dst, const char *prefix, size_t plen, const char *name) {
    size_t len = strlen(name);
    if (vec_reserve(&dst->names, (uint64_t)dst->names.n + plen + len + 1)) return UINT32_MAX;
    uint32_t at = dst->names.n;
    if (plen) memcpy(dst->names.a + at, prefix, plen);
    memcpy(dst->names.a + at + plen, name, len + 1);
    dst->names.n += (uint32_t)(plen + len + 1);
    return at;
}

int xg2__ir_append(xg2_ir *dst, const xg2_ir *src, const uint32_t *rule_map, const char *prefix) {
    uint32_t eb = dst->exprs.n, pb = dst->pool.n, bb = dst->bytes.n, nb = dst->names.n;
    if (vec_reserve(&dst->exprs, (uint64_t)eb + src->exprs.n) || vec_reserve(&dst->pool, (uint64_t)pb + src->pool.n) ||
        vec_reserve(&dst->bytes, (uint64_t)bb + src->bytes.n) || vec_reserve(&dst->names, (uint64_t)nb + src->names.n))
        return XG2_NOMEM();
    if (src->pool.n) memcpy(dst->pool.a + pb, src->pool.a, sizeof(uint32_t) * src->pool.n);
    if (src->bytes.n) memcpy(dst->bytes.a + bb, src->bytes.a, src->bytes.n);
    if (src->names.n) memcpy(dst->names.a + nb, src->names.a, src->names.n);
    /* Pool entries are relocated through the expression that owns them, each once
     * (an expression copied whole shares its slice). */
    uint8_t *done = xg2__calloc(src->pool.n ? src->pool.n : 1, 1);
    if (!done) return XG2_NOMEM();
    uint32_t *pool = dst->pool.a + pb;
#define MOVE(i, by) do { if (!done[i]) { done[i] = 1; pool[i] += (by); } } while (0)
    for (uint32_t i = 0; i < src->exprs.n; i++) {
        xg2_expr e = src->exprs.a[i];
        switch (e.kind) {
        case XE_BYTES: e.a += bb; break;
        case XE_MACRO: e.a += nb; break;
        case XE_REF: e.a = rule_map[e.a]; break;
        case XE_REPEAT: e.a += eb; break;
        case XE_CLASS:
        case XE_TOKEN: e.a += pb; break;
        case XE_SEQ:
        case XE_CHOICE:
        case XE_LENGTH:
            for (uint32_t k = 0; k < e.n; k++) MOVE(e.a + k, eb);
            e.a += pb;
            break;
        case XE_EXCEPT:
            for (uint32_t k = 0; k < 3; k++) MOVE(e.a + k, eb);
            for (uint32_t k = 0; k < e.n; k++) MOVE(e.a + 3 + 2 * k, bb);
            e.a += pb;
            break;
        case XE_DISPATCH:
            for (uint32_t k = 0; k < e.n; k++) {
                MOVE(e.a + 3 * k, bb);
                uint32_t *r = &pool[e.a + 3 * k + 2];
                if (!done[e.a + 3 * k + 2]) {
                    done[e.a + 3 * k + 2] = 1;
                    *r = rule_map[*r & ~XG2_DEAD_TRIGGER] | (*r & XG2_DEAD_TRIGGER);
                }
            }
            for (uint32_t k = 0; k < (uint32_t)e.min; k++) MOVE(e.a + 3 * e.n + 2 * k, bb);
            e.a += pb;
            break;
        }
        dst->exprs.a[eb + i] = e;
    }
#undef MOVE
    xg2__free(done);
    dst->exprs.n = eb + src->exprs.n;
    dst->pool.n = pb + src->pool.n;
    dst->bytes.n = bb + src->bytes.n;
    dst->names.n = nb + src->names.n;
    size_t plen = prefix ? strlen(prefix) : 0;
    for (uint32_t r = 0; r < src->rules.n; r++) {
        xg2_rule_ir ru = src->rules.a[r];
        ru.name += nb;
        if (plen) { /* (a piece's names in its own namespace) */
            ru.name = add_prefixed_name(dst, prefix, plen, xg2__ir_name(src, r));
            if (ru.name == UINT32_MAX) return XG2_NOMEM();
        }
        ru.body += eb;
        if (ru.lookahead >= 0) ru.lookahead += (int32_t)eb;
        ru.ext = 0;
        dst->rules.a[rule_map[r]] = ru;
    }
    unindex_names(dst);
    return XG2_OK;
}

/* Write each src rule r as dst rule rule_map[r] with its name (after `prefix`) and
 * attributes but an empty body: the rule's tables are elsewhere (a linked piece's),
 * and its expressions are appended only to print it (grammar_link.c). */
int xg2__ir_stub_rules(xg2_ir *dst, const xg2_ir *src, const uint32_t *rule_map, const char *prefix) {
    size_t plen = prefix ? strlen(prefix) : 0;
    for (uint32_t r = 0; r < src->rules.n; r++) {
        xg2_rule_ir ru = src->rules.a[r];
        ru.name = add_prefixed_name(dst, prefix, plen, xg2__ir_name(src, r));
        if (ru.name == UINT32_MAX) return XG2_NOMEM();
        ru.body = 0;
        ru.lookahead = -1;
        ru.ext = 0;
        dst->rules.a[rule_map[r]] = ru;
    }
    unindex_names(dst);
    return XG2_OK;
}

/* ---- character classes ---- */

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

int xg2__class_ranges(const xg2_ir *ir, const xg2_expr *e, xg2_u32vec *out) {
    out->n = 0;
    if (vec_reserve(out, 2ull * e->n + 4)) return XG2_NOMEM();
    if (e->n) memcpy(out->a, ir->pool.a + e->a, sizeof(uint32_t) * 2 * e->n);
    if (e->n > 16) {
        qsort(out->a, e->n, 2 * sizeof(uint32_t), cmp_range);
    } else { /* insertion sort: classes come nearly always sorted and short (qsort allocates) */
        for (uint32_t i = 1; i < e->n; i++) {
            uint32_t lo = out->a[2 * i], hi = out->a[2 * i + 1], j = i;
            for (; j > 0 && out->a[2 * (j - 1)] > lo; j--) {
                out->a[2 * j] = out->a[2 * (j - 1)];
                out->a[2 * j + 1] = out->a[2 * (j - 1) + 1];
            }
            out->a[2 * j] = lo;
            out->a[2 * j + 1] = hi;
        }
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < e->n; i++) {
        uint32_t lo = out->a[2 * i], hi = out->a[2 * i + 1];
        if (k && lo <= out->a[2 * k - 1] + 1) {
            if (hi > out->a[2 * k - 1]) out->a[2 * k - 1] = hi;
        } else {
            out->a[2 * k] = lo;
            out->a[2 * k + 1] = hi;
            k++;
        }
    }
    out->n = 2 * k;
    if (e->flags & XF_NEGATED) {
        /* Complement over U+0000..U+10FFFF, in place from a copy. */
        uint32_t m = k, small[32];
        uint32_t *src = m <= 16 ? small : xg2__malloc(sizeof(uint32_t) * 2 * m);
        if (!src) return XG2_NOMEM();
        memcpy(src, out->a, sizeof(uint32_t) * 2 * m);
        out->n = 0;
        uint32_t next = 0;
        for (uint32_t i = 0; i < m; i++) {
            if (src[2 * i] > next) {
                out->a[out->n++] = next;
                out->a[out->n++] = src[2 * i] - 1;
            }
            next = src[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) {
            out->a[out->n++] = next;
            out->a[out->n++] = 0x10FFFF;
        }
        if (src != small) xg2__free(src);
    }
    return XG2_OK;
}

/* ---- simplification ---- */

static uint32_t simplify(xg2_ir *ir, uint32_t id, const uint8_t *dead_rule, int depth);

/* Append the simplified children of list expr `id` into kids, flattening. */
static int collect(xg2_ir *ir, uint32_t id, int kind, xg2_u32vec *kids, const uint8_t *dead,
                   int depth, int *saw_fail) {
    xg2_expr e = ir->exprs.a[id];
    for (uint32_t i = 0; i < e.n; i++) {
        uint32_t c = simplify(ir, ir->pool.a[e.a + i], dead, depth + 1);
        if (ir->err) return 1;
        xg2_expr ce = ir->exprs.a[c];
        if (ce.kind == kind) {
            for (uint32_t j = 0; j < ce.n; j++)
                if (vec_push(kids, ir->pool.a[ce.a + j])) { ir->err = XG2_ERR_NOMEM; return 1; }
            continue;
        }
        if (ce.kind == XE_FAIL) { *saw_fail = 1; if (kind == XE_SEQ) return 0; continue; }
        if (ce.kind == XE_EMPTY && kind == XE_SEQ) continue;
        if (vec_push(kids, c)) { ir->err = XG2_ERR_NOMEM; return 1; }
    }
    return 0;
}

static int covered(const uint32_t *rg, uint32_t n, uint32_t cp) {
    for (uint32_t i = 0; i < n; i++)
        if (rg[2 * i] <= cp && cp <= rg[2 * i + 1]) return 1;
    return 0;
}

/* Whether class e has a code point outside the surrogates, read off its ranges
 * unsorted (simplify meets every occurrence of a class); -1: too many ranges
 * for this quadratic test.  A negated class's least encodable code point not
 * in its ranges is 0, U+E000 or one past a range. */
static int class_encodable(const xg2_ir *ir, const xg2_expr *e) {
    const uint32_t *rg = e->n ? ir->pool.a + e->a : NULL; /* (`[]`: no ranges, perhaps no pool yet) */
    if (!(e->flags & XF_NEGATED)) {
        for (uint32_t i = 0; i < e->n; i++)
            if (rg[2 * i] < 0xD800 || rg[2 * i + 1] > 0xDFFF) return 1;
        return 0;
    }
    if (e->n > 16) return -1;
    if (!covered(rg, e->n, 0) || !covered(rg, e->n, 0xE000)) return 1;
    for (uint32_t i = 0; i < e->n; i++) {
        uint32_t cp = rg[2 * i + 1] + 1;
        if (cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) && !covered(rg, e->n, cp)) return 1;
    }
    return 0;
}

static uint32_t simplify(xg2_ir *ir, uint32_t id, const uint8_t *dead, int depth) {
    if (ir->err) return 0;
    if (depth > 4 * XG2_MAX_NEST_DEPTH) { ir->err = XG2_ERR_LIMIT; return 0; }
    xg2_expr e = ir->exprs.a[id];
    switch (e.kind) {
    case XE_BYTES:
        return e.n ? id : 0;
    case XE_REF:
        return dead && dead[e.a] ? xg2__ir_fail(ir) : id;
    case XE_CLASS: {
        /* A class with no encodable code point (surrogates have no UTF-8) matches nothing. */
        int enc = class_encodable(ir, &e);
        if (enc >= 0) return enc ? id : xg2__ir_fail(ir);
        xg2_u32vec r = {0};
        if (xg2__class_ranges(ir, &e, &r)) { vec_free(&r); ir->err = XG2_ERR_NOMEM; return id; }
        int empty = 1;
        for (uint32_t i = 0; i + 1 < r.n && empty; i += 2) empty = r.a[i] >= 0xD800 && r.a[i + 1] <= 0xDFFF;
        vec_free(&r);
        return empty ? xg2__ir_fail(ir) : id;
    }
    case XE_REPEAT: {
        uint32_t c = simplify(ir, e.a, dead, depth + 1);
        if (ir->err) return 0;
        int ck = ir->exprs.a[c].kind;
        if (e.max == 0 || ck == XE_EMPTY) return 0;
        if (ck == XE_FAIL) return e.min == 0 ? 0 : xg2__ir_fail(ir);
        if (e.min == 1 && e.max == 1) return c;
        /* A quantifier of a quantifier, each one of ? * +, is one quantifier: (X+)+ is
         * X+, (X?)+ and (X+)* are X*.  Nested loops left as they are cost the subset
         * construction time exponential in the nesting ([a-z] with 20 '+': 2.8 s). */
        const xg2_expr ce = ir->exprs.a[c];
        if (ck == XE_REPEAT && e.min <= 1 && ce.min <= 1 && (e.max == -1 || e.max == 1) &&
            (ce.max == -1 || ce.max == 1))
            return xg2__ir_repeat(ir, ce.a, e.min * ce.min, e.max == -1 || ce.max == -1 ? -1 : 1);
        if (c == e.a) return id;
        return xg2__ir_repeat(ir, c, e.min, e.max);
    }
    case XE_SEQ:
    case XE_CHOICE: {
        xg2_u32vec kids = {0};
        int saw_fail = 0;
        uint32_t out = 0;
        if (collect(ir, id, e.kind, &kids, dead, depth, &saw_fail)) goto done;
        if (e.kind == XE_SEQ && saw_fail) { out = xg2__ir_fail(ir); goto done; }
        if (e.kind == XE_SEQ) {
            /* Merge runs of adjacent literals into one. */
            uint32_t k = 0;
            for (uint32_t i = 0; i < kids.n; i++) {
                xg2_expr ce = ir->exprs.a[kids.a[i]];
                if (k && ce.kind == XE_BYTES && ir->exprs.a[kids.a[k - 1]].kind == XE_BYTES) {
                    xg2_expr pe = ir->exprs.a[kids.a[k - 1]];
                    uint32_t n = pe.n + ce.n;
                    uint8_t *tmp = xg2__malloc(n);
                    if (!tmp) { ir->err = XG2_ERR_NOMEM; goto done; }
                    memcpy(tmp, ir->bytes.a + pe.a, pe.n);
                    memcpy(tmp + pe.n, ir->bytes.a + ce.a, ce.n);
                    kids.a[k - 1] = xg2__ir_bytes(ir, tmp, n);
                    xg2__free(tmp);
                } else {
                    kids.a[k++] = kids.a[i];
                }
            }
            kids.n = k;
        }
        out = xg2__ir_list(ir, e.kind, kids.a, kids.n);
    done:
        vec_free(&kids);
        return out;
    }
    case XE_EXCEPT: {
        uint32_t args[3];
        int same = 1;
        for (int i = 0; i < 3; i++) {
            args[i] = simplify(ir, ir->pool.a[e.a + i], dead, depth + 1);
            if (ir->err) return 0;
            same &= args[i] == ir->pool.a[e.a + i];
        }
        if (same) return id;
        /* (the words stay where they are: copy their pairs) */
        uint32_t at = pool_add(ir, args, 3);
        if (vec_reserve(&ir->pool, (uint64_t)ir->pool.n + 2u * e.n)) { ir->err = XG2_ERR_NOMEM; return 0; }
        for (uint32_t i = 0; i < 2 * e.n; i++) ir->pool.a[ir->pool.n++] = ir->pool.a[e.a + 3 + i];
        xg2_expr x = {XE_EXCEPT, 0, at, e.n, 0, 0};
        return add_expr(ir, x);
    }
    case XE_DISPATCH: /* a trigger whose rule matches nothing is never dispatched */
        for (uint32_t i = 0; dead && i < e.n; i++) {
            uint32_t *r = &ir->pool.a[e.a + 3 * i + 2];
            if (dead[*r & ~XG2_DEAD_TRIGGER]) *r |= XG2_DEAD_TRIGGER;
        }
        return id;
    case XE_LENGTH: {
        uint32_t body = simplify(ir, ir->pool.a[e.a], dead, depth + 1);
        uint32_t unit = simplify(ir, ir->pool.a[e.a + 1], dead, depth + 1);
        if (ir->err) return 0;
        if (ir->exprs.a[body].kind == XE_FAIL || ir->exprs.a[unit].kind == XE_FAIL) return xg2__ir_fail(ir);
        if (body == ir->pool.a[e.a] && unit == ir->pool.a[e.a + 1]) return id;
        return xg2__ir_length(ir, body, unit, e.min, e.max);
    }
    default:
        return id;
    }
}

/* ---- productivity, nullability and reachability ---- */

/* Does expr derive some finite string (prod) / the empty string (null), given
 * the current per-rule answers in `rule_ok`? */
static int expr_holds(const xg2_ir *ir, uint32_t id, const uint8_t *rule_ok, int nullable) {
    const xg2_expr *e = &ir->exprs.a[id];
    switch (e->kind) {
    case XE_EMPTY: return 1;
    case XE_FAIL: return 0;
    case XE_BYTES: return !nullable;
    case XE_CLASS: return !nullable;
    case XE_TOKEN: return !nullable;
    case XE_MACRO: return !nullable;
    case XE_REF: return rule_ok[e->a];
    case XE_EXCEPT: /* the empty string unless a word; else (roughly) a character that leaves the trie */
        return !xg2__except_has_empty_word(ir, e) ||
               (!nullable && expr_holds(ir, ir->pool.a[e->a], rule_ok, 0));
    case XE_REPEAT: return e->min == 0 || expr_holds(ir, e->a, rule_ok, nullable);
    case XE_DISPATCH: return 1; /* empty free text */
    case XE_LENGTH: /* (whether the count can be met is found when its automaton is built) */
        return (!nullable || e->min == 0) && expr_holds(ir, ir->pool.a[e->a], rule_ok, nullable);
    case XE_SEQ:
        for (uint32_t i = 0; i < e->n; i++)
            if (!expr_holds(ir, ir->pool.a[e->a + i], rule_ok, nullable)) return 0;
        return 1;
    case XE_CHOICE:
        for (uint32_t i = 0; i < e->n; i++)
            if (expr_holds(ir, ir->pool.a[e->a + i], rule_ok, nullable)) return 1;
        return 0;
    }
    return 0;
}

/* Least fixpoint over all rules; passes alternate direction so that grammars
 * written top-down or bottom-up both settle in a few passes. */
static int rule_fixpoint(const xg2_ir *ir, uint8_t *ok, int nullable) {
    memset(ok, 0, ir->rules.n);
    for (int changed = 1, pass = 0; changed; pass++) {
        int rc = xg2__budget_check(nullable ? "finding nullable rules" : "finding productive rules", NULL);
        if (rc) return rc;
        changed = 0;
        for (uint32_t k = 0; k < ir->rules.n; k++) {
            uint32_t r = (pass & 1) ? k : ir->rules.n - 1 - k;
            if (ok[r]) continue;
            const xg2_rule_ir *ru = &ir->rules.a[r];
            if (!expr_holds(ir, ru->body, ok, nullable)) continue;
            if (!nullable && ru->lookahead >= 0 && !expr_holds(ir, (uint32_t)ru->lookahead, ok, 0))
                continue;
            ok[r] = 1;
            changed = 1;
        }
    }
    return XG2_OK;
}

static int mark_refs(const xg2_ir *ir, uint32_t id, uint8_t *seen, xg2_u32vec *stack) {
    const xg2_expr *e = &ir->exprs.a[id];
    switch (e->kind) {
    case XE_REF:
        if (!seen[e->a]) {
            seen[e->a] = 1;
            if (vec_push(stack, e->a)) return 1;
        }
        return 0;
    case XE_REPEAT: return mark_refs(ir, e->a, seen, stack);
    case XE_DISPATCH: /* (dead triggers' rules too: the print names them) */
        for (uint32_t i = 0; i < e->n; i++) {
            uint32_t r = ir->pool.a[e->a + 3 * i + 2] & ~XG2_DEAD_TRIGGER;
            if (!seen[r]) {
                seen[r] = 1;
                if (vec_push(stack, r)) return 1;
            }
        }
        return 0;
    case XE_SEQ:
    case XE_CHOICE:
    case XE_LENGTH:
    case XE_EXCEPT:
        for (uint32_t i = 0; i < (e->kind == XE_EXCEPT ? 3 : e->n); i++)
            if (mark_refs(ir, ir->pool.a[e->a + i], seen, stack)) return 1;
        return 0;
    }
    return 0;
}

/* Expressions may be shared, so each node is renumbered once (done[]). */
static void renumber_refs(xg2_ir *ir, uint32_t id, const uint32_t *map, uint8_t *done) {
    if (done[id]) return;
    done[id] = 1;
    xg2_expr *e = &ir->exprs.a[id];
    switch (e->kind) {
    case XE_REF: e->a = map[e->a]; return;
    case XE_REPEAT: renumber_refs(ir, e->a, map, done); return;
    case XE_DISPATCH:
        for (uint32_t i = 0; i < e->n; i++) {
            uint32_t *r = &ir->pool.a[e->a + 3 * i + 2];
            *r = map[*r & ~XG2_DEAD_TRIGGER] | (*r & XG2_DEAD_TRIGGER);
        }
        return;
    case XE_SEQ:
    case XE_CHOICE:
    case XE_LENGTH:
    case XE_EXCEPT:
        for (uint32_t i = 0; i < (e->kind == XE_EXCEPT ? 3 : e->n); i++) renumber_refs(ir, ir->pool.a[e->a + i], map, done);
        return;
    }
}

static _Thread_local const xg2_ir *cmp_rules; /* qsort has no context argument */
static int cmp_def(const void *a, const void *b) {
    uint32_t x = cmp_rules->rules.a[*(const uint32_t *)a].def, y = cmp_rules->rules.a[*(const uint32_t *)b].def;
    return (x > y) - (x < y);
}

/* Keep only rules reachable from the root (root becomes rule 0). */
static int drop_unreachable(xg2_ir *ir) {
    uint32_t n = ir->rules.n;
    uint8_t *seen = xg2__calloc(n, 1);
    uint32_t *map = xg2__malloc(sizeof(uint32_t) * n);
    uint8_t *done = xg2__calloc(ir->exprs.n, 1);
    xg2_u32vec stack = {0};
    int rc = XG2_OK;
    if (!seen || !map || !done) { rc = XG2_NOMEM(); goto out; }
    seen[ir->root] = 1;
    if (vec_push(&stack, ir->root)) { rc = XG2_NOMEM(); goto out; }
    while (stack.n) {
        uint32_t r = stack.a[--stack.n];
        if (mark_refs(ir, ir->rules.a[r].body, seen, &stack)) { rc = XG2_NOMEM(); goto out; }
        if (ir->rules.a[r].lookahead >= 0 &&
            mark_refs(ir, (uint32_t)ir->rules.a[r].lookahead, seen, &stack)) {
            rc = XG2_NOMEM();
            goto out;
        }
    }
    /* The root first, then the others in definition order (so that printed
     * grammars parse back to the same order). */
    uint32_t k = 0, *byd = xg2__malloc(sizeof(uint32_t) * n);
    if (!byd) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t r = 0; r < n; r++)
        if (seen[r] && r != ir->root) byd[k++] = r;
    cmp_rules = ir;
    qsort(byd, k, sizeof(uint32_t), cmp_def);
    map[ir->root] = 0;
    for (uint32_t i = 0; i < k; i++) map[byd[i]] = i + 1;
    xg2__free(byd);
    k++;
    xg2_rule_ir *nr = xg2__malloc(sizeof(xg2_rule_ir) * (k ? k : 1));
    if (!nr) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t r = 0; r < n; r++)
        if (seen[r]) nr[map[r]] = ir->rules.a[r];
    for (uint32_t r = 0; r < k; r++) {
        renumber_refs(ir, nr[r].body, map, done);
        if (nr[r].lookahead >= 0) renumber_refs(ir, (uint32_t)nr[r].lookahead, map, done);
    }
    xg2__free(ir->rules.a);
    ir->rules.a = nr;
    ir->rules.n = ir->rules.cap = k;
    ir->root = 0;
    unindex_names(ir);
out:
    xg2__free(seen);
    xg2__free(map);
    xg2__free(done);
    vec_free(&stack);
    return rc;
}

/* ---- repetition compression ---- */

/* Rules made here are appended to nullable[] as they are created. */
typedef VEC(uint8_t) u8vec;

XG2_HIDDEN int xg2__fsm_unit_pattern(const xg2_ir *ir, uint32_t expr);

/* Rough automaton size of an expression (a byte, a class as its longest UTF-8
 * sequence; references count one), saturating at `cap`. */
/* The UTF-8 length of a class's largest code point. */
static uint32_t class_bytes(const xg2_ir *ir, const xg2_expr *e) {
    uint32_t hi = 0x10FFFF;
    if (!(e->flags & XF_NEGATED)) {
        hi = 0;
        for (uint32_t i = 0; i < e->n; i++)
            if (ir->pool.a[e->a + 2 * i + 1] > hi) hi = ir->pool.a[e->a + 2 * i + 1];
    }
    return hi < 0x80 ? 1 : hi < 0x800 ? 2 : hi < 0x10000 ? 3 : 4;
}

static uint64_t expr_weight(const xg2_ir *ir, uint32_t id, uint64_t cap, int depth) {
    const xg2_expr *e = &ir->exprs.a[id];
    if (depth > 4 * XG2_MAX_NEST_DEPTH) return cap;
    uint64_t w = 0;
    switch (e->kind) {
    case XE_BYTES: w = e->n; break;
    case XE_CLASS: w = class_bytes(ir, e); break;
    case XE_SEQ:
    case XE_CHOICE:
        for (uint32_t i = 0; i < e->n && w < cap; i++) w += expr_weight(ir, ir->pool.a[e->a + i], cap, depth + 1);
        break;
    case XE_REPEAT: {
        uint64_t k = e->max >= 0 ? (uint64_t)e->max : (uint64_t)e->min + 1;
        w = expr_weight(ir, e->a, cap, depth + 1) * (k ? k : 1);
        break;
    }
    default: w = 1;
    }
    return w < cap ? w : cap;
}

uint32_t xg2__ir_max_bytes(const xg2_ir *ir, uint32_t id, int depth) {
    const xg2_expr *e = &ir->exprs.a[id];
    if (depth > 4 * XG2_MAX_NEST_DEPTH) return UINT32_MAX;
    switch (e->kind) {
    case XE_EMPTY: case XE_FAIL: return 0;
    case XE_BYTES: return e->n;
    case XE_CLASS: return class_bytes(ir, e);
    case XE_SEQ: case XE_CHOICE: {
        uint64_t total = 0;
        for (uint32_t i = 0; i < e->n; i++) {
            uint32_t m = xg2__ir_max_bytes(ir, ir->pool.a[e->a + i], depth + 1);
            if (m == UINT32_MAX) return UINT32_MAX;
            if (e->kind == XE_SEQ) total += m;
            else if (m > total) total = m;
        }
        return total >= UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    }
    case XE_REPEAT: {
        if (e->max < 0) return UINT32_MAX;
        uint32_t m = xg2__ir_max_bytes(ir, e->a, depth + 1);
        uint64_t t = (uint64_t)m * (uint64_t)e->max;
        return m == UINT32_MAX || t >= UINT32_MAX ? UINT32_MAX : (uint32_t)t;
    }
    }
    return UINT32_MAX;
}

/* A repetition is compressed (counted) only when unrolling it would cost
 * more automaton than the budget: small bodies repeated a few dozen times
 * (a hostname label's {0,61}) stay plain automata, which mask fast.  A JSON
 * string character (a score of states) under a maxLength of more than 8 is
 * counted: near the bound its masks derive from each other (maskcache.c),
 * where written-out copies would each be a state of its own, walked anew. */
static int large_repeat(const xg2_ir *ir, const xg2_expr *e) {
    uint64_t count = e->max >= 0 ? (uint64_t)e->max : (uint64_t)e->min;
    if (count <= XG2_UNROLL_LIMIT) return 0;
    if (count > XG2_UNROLL_BUDGET) return 1;
    return count * expr_weight(ir, e->a, XG2_UNROLL_BUDGET + 1, 0) > XG2_UNROLL_BUDGET;
}

/* Can `id` be the child of a counted loop?  Plain bytes only: no references,
 * intrinsics, or large repetitions of its own; the automaton check (non-empty,
 * self-delimiting) is fsm.c's. */
static int plain_bytes(const xg2_ir *ir, uint32_t id, int depth) {
    const xg2_expr *e = &ir->exprs.a[id];
    if (depth > 4 * XG2_MAX_NEST_DEPTH) return 0;
    switch (e->kind) {
    case XE_EMPTY: case XE_BYTES: case XE_CLASS: return 1;
    case XE_REPEAT:
        if (e->flags & XF_COUNTED) return 0;
        if (large_repeat(ir, e)) return 0;
        return plain_bytes(ir, e->a, depth + 1);
    case XE_SEQ:
    case XE_CHOICE:
        for (uint32_t i = 0; i < e->n; i++)
            if (!plain_bytes(ir, ir->pool.a[e->a + i], depth + 1)) return 0;
        return 1;
    }
    return 0;
}

static uint32_t extract_repeats(xg2_ir *ir, uint32_t id, uint32_t rule, u8vec *nullable,
                                int depth) {
    if (ir->err) return id;
    if (depth > 4 * XG2_MAX_NEST_DEPTH) { ir->err = XG2_ERR_LIMIT; return id; }
    xg2_expr e = ir->exprs.a[id];
    if (e.kind == XE_SEQ || e.kind == XE_CHOICE) {
        xg2_u32vec kids = {0};
        int changed = 0;
        for (uint32_t i = 0; i < e.n; i++) {
            uint32_t c = ir->pool.a[e.a + i];
            uint32_t c2 = extract_repeats(ir, c, rule, nullable, depth + 1);
            changed |= c2 != c;
            if (vec_push(&kids, c2)) { ir->err = XG2_ERR_NOMEM; break; }
        }
        uint32_t out = changed && !ir->err ? xg2__ir_list(ir, e.kind, kids.a, kids.n) : id;
        vec_free(&kids);
        return out;
    }
    if (e.kind != XE_REPEAT) return id;
    uint32_t child = extract_repeats(ir, e.a, rule, nullable, depth + 1);
    if (ir->err) return id;
    int large = large_repeat(ir, &e);
    if (!large) return child == e.a ? id : xg2__ir_repeat(ir, child, e.min, e.max);
    if (plain_bytes(ir, child, 0)) {
        int unit = xg2__fsm_unit_pattern(ir, child);
        if (unit < 0) { ir->err = XG2_ERR_NOMEM; return id; }
        if (unit) {
            uint32_t c = xg2__ir_repeat(ir, child, e.min, e.max);
            if (!ir->err) ir->exprs.a[c].flags |= XF_COUNTED;
            return c;
        }
    }
    /* An empty iteration changes nothing, and the parser ignores empty
     * iterations of counted rules, so a nullable child needs no minimum. */
    int child_nullable = expr_holds(ir, child, nullable->a, 1);
    int32_t min = child_nullable ? 0 : e.min;
    if (min == 0 && e.max < 0) {
        /* (X?)* and (X+)* are X*, as simplify() makes them (the printed grammar parses back the same) */
        const xg2_expr ce = ir->exprs.a[child];
        if (ce.kind == XE_REPEAT && ce.min <= 1 && (ce.max == 1 || ce.max == -1)) child = ce.a;
        return xg2__ir_repeat(ir, child, 0, -1);
    }
    /* A rule that is exactly ref{n,m} is itself the counted rule (so a printed
     * grammar parses back to the same rules). */
    if (depth == 0 && ir->exprs.a[child].kind == XE_REF && ir->exprs.a[child].a != rule && rule != ir->root &&
        ir->rules.a[rule].lookahead < 0) {
        uint32_t body = xg2__ir_repeat(ir, child, min, e.max);
        if (!ir->err) ir->rules.a[rule].kind = RK_REPEAT;
        return body;
    }
    /* The counted rule needs its child as a rule of its own. */
    uint32_t crule;
    char base[220];
    if (ir->exprs.a[child].kind == XE_REF) {
        crule = ir->exprs.a[child].a;
    } else {
        snprintf(base, sizeof base, "%.200s_item", xg2__ir_name(ir, rule));
        crule = xg2__ir_new_rule(ir, base, child);
        if (ir->err || vec_push(nullable, (uint8_t)child_nullable)) goto oom;
    }
    uint32_t body = xg2__ir_repeat(ir, xg2__ir_ref(ir, crule), min, e.max);
    snprintf(base, sizeof base, "%.200s_repeat", xg2__ir_name(ir, rule));
    uint32_t rr = xg2__ir_new_rule(ir, base, body);
    if (ir->err || vec_push(nullable, (uint8_t)(min == 0))) goto oom;
    ir->rules.a[rr].kind = RK_REPEAT;
    return xg2__ir_ref(ir, rr);
oom:
    if (!ir->err) ir->err = XG2_ERR_NOMEM;
    return id;
}

int xg2__ir_uncount(xg2_ir *ir, uint32_t expr) {
    xg2_expr e = ir->exprs.a[expr];
    uint32_t crule = xg2__ir_new_rule(ir, "counted_item", e.a);
    uint32_t body = xg2__ir_repeat(ir, xg2__ir_ref(ir, crule), e.min, e.max);
    uint32_t rr = xg2__ir_new_rule(ir, "counted", body);
    if (ir->err) return ir->err == XG2_ERR_LIMIT ? xg2__fail(XG2_ERR_LIMIT, "more than %d rules", XG2_MAX_RULES) : XG2_NOMEM();
    ir->rules.a[rr].kind = RK_REPEAT;
    xg2_expr ref = {XE_REF, 0, rr, 0, 0, 0};
    ir->exprs.a[expr] = ref;
    return XG2_OK;
}

int xg2__ir_normalize(xg2_ir *ir) {
    uint8_t *ok = NULL;
    int rc = XG2_OK;
    for (uint32_t r = 0; r < ir->rules.n; r++) {
        if ((r & 63) == 0 && (rc = xg2__budget_check("normalising rule", xg2__ir_name(ir, r)))) return rc;
        xg2_rule_ir *ru = &ir->rules.a[r];
        ru->body = simplify(ir, ru->body, NULL, 0);
        if (ru->lookahead >= 0) ru->lookahead = (int32_t)simplify(ir, (uint32_t)ru->lookahead, NULL, 0);
    }
    if (ir->err) goto err;
    ok = xg2__malloc(ir->rules.n ? ir->rules.n : 1);
    if (!ok) return XG2_NOMEM();
    if ((rc = rule_fixpoint(ir, ok, 0))) goto out;
    if (!ok[ir->root]) {
        rc = xg2__fail(XG2_ERR_GRAMMAR, "the root rule \"%s\" matches no string",
                       xg2__ir_name(ir, ir->root));
        goto out;
    }
    for (uint32_t r = 0; r < ir->rules.n; r++) ok[r] = !ok[r]; /* now: dead */
    for (uint32_t r = 0; r < ir->rules.n; r++) {
        if ((r & 63) == 0 && (rc = xg2__budget_check("normalising rule", xg2__ir_name(ir, r)))) goto out;
        xg2_rule_ir *ru = &ir->rules.a[r];
        ru->body = simplify(ir, ru->body, ok, 0);
        if (ru->lookahead >= 0) ru->lookahead = (int32_t)simplify(ir, (uint32_t)ru->lookahead, ok, 0);
        if (ru->lookahead >= 0 && ir->exprs.a[ru->lookahead].kind == XE_EMPTY) ru->lookahead = -1;
    }
    if (ir->err) goto err;
    if ((rc = drop_unreachable(ir))) goto out;
    u8vec nullable = {0};
    if (vec_reserve(&nullable, ir->rules.n + 1)) { rc = XG2_NOMEM(); goto out; }
    if ((rc = rule_fixpoint(ir, nullable.a, 1))) { vec_free(&nullable); goto out; }
    nullable.n = ir->rules.n;
    uint32_t n_before = ir->rules.n;
    for (uint32_t r = 0; r < n_before && !ir->err; r++) {
        uint32_t b = extract_repeats(ir, ir->rules.a[r].body, r, &nullable, 0);
        ir->rules.a[r].body = b;
    }
    vec_free(&nullable);
    if (ir->err) goto err;
    goto out;
err:
    rc = ir->err == XG2_ERR_LIMIT
             ? xg2__fail(XG2_ERR_LIMIT, "grammar expression nested deeper than %d",
                         4 * XG2_MAX_NEST_DEPTH)
             : XG2_NOMEM();
out:
    xg2__free(ok);
    return rc;
}

/* ---- printing ---- */

static int put_cp(xg2_charvec *o, uint32_t cp, int in_class) {
    if (cp == '"' && !in_class) return xg2__charvec_printf(o, "\\\"");
    if (cp == '\\') return xg2__charvec_printf(o, "\\\\");
    if (in_class && (cp == ']' || cp == '-' || cp == '^' || cp == '['))
        return xg2__charvec_printf(o, "\\%c", (char)cp);
    if (cp == '\n') return xg2__charvec_printf(o, "\\n");
    if (cp == '\t') return xg2__charvec_printf(o, "\\t");
    if (cp == '\r') return xg2__charvec_printf(o, "\\r");
    if (cp < 0x20 || cp == 0x7F) return xg2__charvec_printf(o, "\\x%02x", cp);
    if (cp < 0x80) return xg2__charvec_printf(o, "%c", (char)cp);
    if (cp <= 0xFFFF) return xg2__charvec_printf(o, "\\u%04x", cp);
    return xg2__charvec_printf(o, "\\U%08x", cp);
}

static int print_bytes(xg2_charvec *o, const uint8_t *s, uint32_t n) {
    int bad = xg2__charvec_printf(o, "\"");
    for (uint32_t i = 0; i < n && !bad;) {
        uint8_t c = s[i];
        uint32_t cp = c, len = 1;
        if (c >= 0xC0 && c < 0xE0 && i + 1 < n) { cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu); len = 2; }
        else if (c >= 0xE0 && c < 0xF0 && i + 2 < n) {
            cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
            len = 3;
        } else if (c >= 0xF0 && i + 3 < n) {
            cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) |
                 (s[i + 3] & 0x3Fu);
            len = 4;
        }
        bad = put_cp(o, cp, 0);
        i += len;
    }
    return bad || xg2__charvec_printf(o, "\"");
}

/* prec: 0 = choice context, 1 = sequence element, 2 = quantified operand */
static int print_expr(const xg2_ir *ir, uint32_t id, xg2_charvec *o, int prec, int depth) {
    if (depth > 8 * XG2_MAX_NEST_DEPTH) return xg2__charvec_printf(o, "...");
    const xg2_expr *e = &ir->exprs.a[id];
    int bad = 0;
    switch (e->kind) {
    case XE_EMPTY: return xg2__charvec_printf(o, "\"\"");
    case XE_FAIL: return xg2__charvec_printf(o, "[^\\x00-\\U0010ffff]");
    case XE_BYTES: return print_bytes(o, ir->bytes.a + e->a, e->n);
    case XE_REF: return xg2__charvec_printf(o, "%s", xg2__ir_name(ir, e->a));
    case XE_CLASS:
        bad = xg2__charvec_printf(o, "[%s", (e->flags & XF_NEGATED) ? "^" : "");
        for (uint32_t i = 0; i < e->n && !bad; i++) {
            uint32_t lo = ir->pool.a[e->a + 2 * i], hi = ir->pool.a[e->a + 2 * i + 1];
            bad = put_cp(o, lo, 1);
            if (!bad && hi != lo) bad = xg2__charvec_printf(o, "-") || put_cp(o, hi, 1);
        }
        return bad || xg2__charvec_printf(o, "]");
    case XE_TOKEN:
        bad = xg2__charvec_printf(o, "%s(", (e->flags & XF_EXCLUDE) ? "ExcludeToken" : "Token");
        for (uint32_t i = 0; i < e->n && !bad; i++)
            bad = xg2__charvec_printf(o, "%s%u", i ? ", " : "", ir->pool.a[e->a + i]);
        return bad || xg2__charvec_printf(o, ")");
    case XE_MACRO: return xg2__charvec_printf(o, "%s(...)", ir->names.a + e->a);
    case XE_EXCEPT:
        bad = xg2__charvec_printf(o, "StringExcept(");
        for (uint32_t i = 0; i < 3 && !bad; i++) {
            if (i) bad = xg2__charvec_printf(o, ", ");
            if (!bad) bad = print_expr(ir, ir->pool.a[e->a + i], o, 2, depth + 1); /* as Length's */
        }
        for (uint32_t i = 0; i < e->n && !bad; i++) {
            const uint32_t *w = ir->pool.a + e->a + 3 + 2 * i;
            bad = xg2__charvec_printf(o, ", ") || print_bytes(o, ir->bytes.a + w[0], w[1]);
        }
        return bad || xg2__charvec_printf(o, ")");
    case XE_DISPATCH: /* XGrammar's layout */
        bad = xg2__charvec_printf(o, "TagDispatch(\n");
        for (uint32_t i = 0; i < e->n && !bad; i++) {
            const uint32_t *t = ir->pool.a + e->a + 3 * i;
            bad = xg2__charvec_printf(o, "  (") || print_bytes(o, ir->bytes.a + t[0], t[1]) ||
                  xg2__charvec_printf(o, ", %s),\n", xg2__ir_name(ir, t[2] & ~XG2_DEAD_TRIGGER));
        }
        if (!bad) bad = xg2__charvec_printf(o, "  loop_after_dispatch=%s,\n  excludes=(", (e->flags & XF_LOOP) ? "true" : "false");
        for (uint32_t i = 0; i < (uint32_t)e->min && !bad; i++) {
            const uint32_t *x = ir->pool.a + e->a + 3 * e->n + 2 * i;
            bad = (i && xg2__charvec_printf(o, ", ")) || print_bytes(o, ir->bytes.a + x[0], x[1]);
        }
        return bad || xg2__charvec_printf(o, ")\n)");
    case XE_LENGTH:
        /* the parser reads each argument as one quantified item: a choice needs its group */
        bad = xg2__charvec_printf(o, "Length(") || print_expr(ir, ir->pool.a[e->a], o, 2, depth + 1) ||
              xg2__charvec_printf(o, ", ") || print_expr(ir, ir->pool.a[e->a + 1], o, 2, depth + 1);
        if (bad) return bad;
        if (e->max < 0) return xg2__charvec_printf(o, ", %d)", e->min);
        return xg2__charvec_printf(o, ", %d, %d)", e->min, e->max);
    case XE_REPEAT:
        bad = print_expr(ir, e->a, o, 2, depth + 1);
        if (bad) return bad;
        if (e->min == 0 && e->max < 0) return xg2__charvec_printf(o, "*");
        if (e->min == 1 && e->max < 0) return xg2__charvec_printf(o, "+");
        if (e->min == 0 && e->max == 1) return xg2__charvec_printf(o, "?");
        if (e->max < 0) return xg2__charvec_printf(o, "{%d,}", e->min);
        if (e->max == e->min) return xg2__charvec_printf(o, "{%d}", e->min);
        return xg2__charvec_printf(o, "{%d,%d}", e->min, e->max);
    case XE_SEQ:
    case XE_CHOICE: {
        int need = e->kind == XE_SEQ ? prec >= 2 : prec >= 1;
        if (need && xg2__charvec_printf(o, "(")) return 1;
        for (uint32_t i = 0; i < e->n && !bad; i++) {
            uint32_t child = ir->pool.a[e->a + i];
            /* a sequence in a sequence (a choice in a choice) needs no group: the parser
             * would flatten it, and the print must read back as itself */
            int cprec = ir->exprs.a[child].kind == e->kind ? (e->kind == XE_SEQ ? 1 : 0) : (e->kind == XE_SEQ ? 2 : 1);
            if (i) bad = xg2__charvec_printf(o, e->kind == XE_SEQ ? " " : " | ");
            if (!bad) bad = print_expr(ir, child, o, cprec, depth + 1);
        }
        if (!bad && need) bad = xg2__charvec_printf(o, ")");
        return bad;
    }
    }
    return 0;
}

int xg2__ir_print(const xg2_ir *ir, xg2_charvec *o) {
    for (uint32_t r = 0; r < ir->rules.n; r++) {
        const xg2_rule_ir *ru = &ir->rules.a[r];
        if (xg2__charvec_printf(o, "%s", xg2__ir_name(ir, r))) return XG2_NOMEM();
        if (ru->max_tokens >= 0 || ru->max_chars >= 0) {
            int bad = xg2__charvec_printf(o, "[");
            if (!bad && ru->max_tokens >= 0) bad = xg2__charvec_printf(o, "max_tokens=%d", ru->max_tokens);
            if (!bad && ru->max_chars >= 0)
                bad = xg2__charvec_printf(o, "%smax_chars=%d", ru->max_tokens >= 0 ? ", " : "", ru->max_chars);
            if (bad || xg2__charvec_printf(o, "]")) return XG2_NOMEM();
        }
        if (xg2__charvec_printf(o, " ::= ")) return XG2_NOMEM();
        if (print_expr(ir, ru->body, o, 0, 0)) return XG2_NOMEM();
        if (ru->lookahead >= 0) {
            if (xg2__charvec_printf(o, " (= ")) return XG2_NOMEM();
            if (print_expr(ir, (uint32_t)ru->lookahead, o, 0, 0)) return XG2_NOMEM();
            if (xg2__charvec_printf(o, ")")) return XG2_NOMEM();
        }
        if (xg2__charvec_printf(o, "\n")) return XG2_NOMEM();
    }
    return XG2_OK;
}
