/*
 * grammar_link.c -- a grammar linked from pieces compiled once (XGrammar-2 §3.3).
 *
 * A structural tag over a request's tool set is a few rules of its own (the
 * dispatch, each tool's name and end) around the tools' argument grammars, and
 * the same tools come back request after request in other sets.  Each tool's
 * grammar is compiled once as a piece -- on its own, its root followed by the
 * bytes that follow it in the tag -- and a tag's grammar is its own rules built
 * around stand-ins for the pieces' roots, then the pieces' tables copied in with
 * their state, rule, class-map, loop and lookahead ids moved.  Nothing of a
 * piece is parsed, built or keyed again:
 *
 *   - a stand-in is an automaton of the piece root's first bytes (and nullability),
 *     so FIRST and FOLLOW of the linking grammar's own rules come out as with
 *     the piece itself, and the linking grammar's rule keys take the piece
 *     root's key (grammar.c);
 *   - a piece's FOLLOW sets depend on what follows its root, which the linking
 *     grammar decides: a piece built for another follow set is refused, and
 *     the caller builds it again for the one asked (xg2_grammar_link's
 *     need_follow), so the result is the grammar the whole text would give
 *     (its states split differently, the language and masks the same).
 */
#include <stdio.h>

#include "grammar.h"

XG2_HIDDEN int xg2__ebnf_parse(xg2_ir *ir, const char *text, size_t len, const char *root);

int xg2_grammar_from_ebnf_piece(const char *text, size_t len, const char *root, const uint8_t *follow,
                                xg2_grammar **out) {
    xg2__clear_error();
    if (!text || !root || !follow || !out) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    return xg2__grammar_build(text, len, root, follow, out);
}

size_t xg2_grammar_memory_bytes(const xg2_grammar *g) { return g ? g->memory_bytes : 0; }

void xg2_grammar_root_follow(const xg2_grammar *g, uint8_t *out) {
    if (g && out) memcpy(out, &g->root_follow, 32);
}

/* memcpy that takes a NULL source with a zero size (an empty table is NULL). */
static void copy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}

/* dst[k] = src[k] + by, XG2_NONE kept: branch-free, so that it vectorises (a piece's
 * transition table is most of what linking copies). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void move_ids(uint32_t *restrict dst, const uint32_t *restrict src, size_t n, uint32_t by) {
    for (size_t k = 0; k < n; k++) {
        uint32_t t = src[k];
        dst[k] = t + (by & (uint32_t)-(int32_t)(t != XG2_NONE));
    }
}

/* Where each piece's ids start in the linked grammar. */
typedef struct {
    uint32_t rule_at;  /* the linking grammar's rule its root takes over */
    uint32_t *rmap;    /* piece rule -> linked rule */
    uint32_t states, trans, refs, loops, la, la_states, keys; /* its tables' offsets in the merged ones */
} piece_base;

/* A class map by its cuts (equal cuts, equal maps: grammar.c state_classes): the
 * merged grammar keeps one of each, as most pieces split bytes alike (JSON's quotes,
 * digits, whitespace). */
static uint32_t shared_map(xg2_grammar *m, uint32_t *tab, uint32_t cap, const xg2_byteset *cut, const uint8_t *map) {
    uint64_t h = xg2__mix64(xg2__mix64(cut->w[0], cut->w[1]), xg2__mix64(cut->w[2], cut->w[3]));
    uint32_t i = (uint32_t)h & (cap - 1);
    for (; tab[i]; i = (i + 1) & (cap - 1))
        if (!memcmp(&m->class_cuts[tab[i] - 1], cut, sizeof *cut)) return tab[i] - 1;
    uint32_t k = m->n_classmaps++;
    m->class_cuts[k] = *cut;
    memcpy(m->classmaps + 256 * (size_t)k, map, 256);
    tab[i] = k + 1;
    return k;
}

/* The linking grammar's fans (literal_fans.h), their states renumbered (smap
 * keeps the order: it only closes the stand-ins' gaps). */
static int copy_fans(const xg2_grammar *b, const uint32_t *smap, xg2_grammar *m) {
    if (!b->n_fan) return XG2_OK;
    m->fans = xg2__malloc(sizeof(xg2_fan) * b->n_fan);
    m->fan_lits = xg2__malloc(sizeof(xg2_fan_lit) * b->n_fan_lits);
    m->fan_text = xg2__malloc(b->n_fan_text ? b->n_fan_text : 1);
    if (!m->fans || !m->fan_lits || !m->fan_text) return XG2_NOMEM();
    for (uint32_t k = 0; k < b->n_fan; k++) {
        m->fans[k] = b->fans[k];
        m->fans[k].state = smap[b->fans[k].state];
    }
    copy(m->fan_lits, b->fan_lits, sizeof(xg2_fan_lit) * b->n_fan_lits);
    copy(m->fan_text, b->fan_text, b->n_fan_text);
    m->n_fan = b->n_fan, m->n_fan_lits = b->n_fan_lits, m->n_fan_text = b->n_fan_text;
    return XG2_OK;
}

static int merge(xg2_grammar *b, uint32_t n, const xg2_grammar *const *pieces, const char *const *prefixes,
                 piece_base *pb, xg2_grammar *m) {
    uint32_t *smap = xg2__malloc(sizeof(uint32_t) * (b->n_states ? b->n_states : 1));
    if (!smap) return XG2_NOMEM();
    /* The linking grammar's states but its stand-ins'; then each piece's. */
    uint32_t ns = 0;
    for (uint32_t s = 0; s < b->n_states; s++)
        smap[s] = b->ir.rules.a[b->states[s].rule].ext ? XG2_NONE : ns++;
    uint64_t nr = b->n_rules, nt = b->n_trans, nm = b->n_classmaps, nref = b->n_refs, nl = b->n_loops,
             nla = b->n_la, nlas = b->n_la_states, nkey = b->n_skey_tab, total = ns;
    int rest = b->rest != NULL;
    for (uint32_t i = 0; i < n; i++) {
        const xg2_grammar *p = pieces[i];
        if (pb[i].rule_at == XG2_NONE) continue;
        pb[i].states = (uint32_t)total, pb[i].trans = (uint32_t)nt;
        pb[i].refs = (uint32_t)nref, pb[i].loops = (uint32_t)nl, pb[i].la = (uint32_t)nla, pb[i].la_states = (uint32_t)nlas;
        pb[i].keys = (uint32_t)nkey;
        pb[i].rmap = xg2__malloc(sizeof(uint32_t) * p->n_rules);
        if (!pb[i].rmap) { xg2__free(smap); return XG2_NOMEM(); }
        for (uint32_t r = 0; r < p->n_rules; r++) pb[i].rmap[r] = r == p->root ? pb[i].rule_at : (uint32_t)nr++;
        total += p->n_states, nt += p->n_trans, nm += p->n_classmaps, nref += p->n_refs, nl += p->n_loops;
        nla += p->n_la, nlas += p->n_la_states, nkey += p->n_skey_tab;
        rest |= p->rest != NULL;
    }
    int rc = XG2_OK;
    uint32_t *map_tab = NULL, *map_of = NULL;
    if (nr > XG2_MAX_RULES) { rc = xg2__fail(XG2_ERR_LIMIT, "more than %d rules", XG2_MAX_RULES); goto out; }
    if (total > XG2_MAX_TOTAL_STATES || nt > UINT32_MAX / 2 || nkey > UINT32_MAX / 2) {
        rc = xg2__fail(XG2_ERR_LIMIT, "the grammar needs %llu automaton states (limit %d)", (unsigned long long)total,
                       XG2_MAX_TOTAL_STATES);
        goto out;
    }
    m->n_rules = (uint32_t)nr, m->n_states = (uint32_t)total, m->n_trans = (uint32_t)nt; /* (maps: as shared) */
    m->n_refs = (uint32_t)nref, m->n_loops = (uint32_t)nl, m->n_la = (uint32_t)nla, m->n_la_states = (uint32_t)nlas;
    m->n_skey_tab = (uint32_t)nkey;
    size_t S = total ? total : 1;
    m->rules = xg2__malloc(sizeof(xg2_rule) * (nr ? nr : 1));
    m->states = xg2__malloc(sizeof(xg2_state) * S);
    m->trans = xg2__malloc(sizeof(uint32_t) * (nt ? nt : 1));
    m->classmaps = xg2__malloc(256 * (nm ? nm : 1));
    m->class_cuts = xg2__malloc(sizeof(xg2_byteset) * (nm ? nm : 1));
    m->group_tab = xg2__malloc(sizeof(uint64_t) * XG2_MAX_GROUP_SETS);
    if (nl) m->head_groups = xg2__calloc(S, sizeof(uint64_t)); /* (only with counted loops) */
    m->contained = xg2__calloc(S, 1);
    m->proofs_spent = xg2__calloc(1, 1);
    m->refs_tab = xg2__malloc(sizeof(xg2_ref) * (nref ? nref : 1));
    m->la_trans = xg2__malloc(sizeof(int32_t) * 256 * (nlas ? nlas : 1));
    m->la_final = xg2__malloc(nlas ? nlas : 1);
    m->la_start = xg2__malloc(sizeof(uint32_t) * (nla ? nla : 1));
    m->follow = xg2__malloc(sizeof(xg2_byteset) * (nr ? nr : 1));
    m->skey_tab = xg2__malloc(sizeof *m->skey_tab * (nkey ? nkey : 1));
    m->loops = xg2__malloc(sizeof(xg2_loop) * (nl ? nl : 1));
    uint32_t map_cap = 64, max_maps = 1;
    while (map_cap < 2 * nm) map_cap *= 2;
    for (uint32_t i = 0; i < n; i++)
        if (pb[i].rule_at != XG2_NONE && pieces[i]->n_classmaps > max_maps) max_maps = pieces[i]->n_classmaps;
    map_tab = xg2__calloc(map_cap, sizeof(uint32_t));
    map_of = xg2__malloc(sizeof(uint32_t) * max_maps);
    if (rest) m->rest = xg2__calloc(2 * S, sizeof(uint32_t));
    if (!m->rules || !m->states || !m->trans || !m->classmaps || !m->class_cuts || !m->group_tab || (nl && !m->head_groups) ||
        !m->contained || !m->proofs_spent || !m->refs_tab || !m->la_trans || !m->la_final || !m->la_start ||
        !m->follow || !m->skey_tab || !m->loops || (rest && !m->rest) || !map_tab || !map_of) {
        rc = XG2_NOMEM();
        goto out;
    }

    /* The linking grammar: its tables keep their offsets; state ids close the stand-ins' gaps. */
    for (uint32_t r = 0; r < b->n_rules; r++) {
        m->rules[r] = b->rules[r];
        if (b->rules[r].start != XG2_NONE) m->rules[r].start = smap[b->rules[r].start];
        m->follow[r] = b->follow[r];
    }
    for (uint32_t s = 0; s < b->n_states; s++) {
        uint32_t t = smap[s];
        if (t == XG2_NONE) continue;
        m->states[t] = b->states[s];
        m->states[t].groups = xg2__group_entry(m, xg2__self_groups(b, &b->states[s]));
        if (b->head_groups) m->head_groups[t] = b->head_groups[s];
        if (b->rest) copy(m->rest + 2 * (size_t)t, b->rest + 2 * (size_t)s, 2 * sizeof(uint32_t));
    }
    for (uint32_t k = 0; k < b->n_trans; k++) m->trans[k] = b->trans[k] == XG2_NONE ? XG2_NONE : smap[b->trans[k]];
    for (uint32_t k = 0; k < b->n_refs; k++) m->refs_tab[k] = (xg2_ref){b->refs_tab[k].rule, smap[b->refs_tab[k].to]};
    for (uint32_t k = 0; k < b->n_classmaps; k++) /* (distinct: they keep their indices) */
        shared_map(m, map_tab, map_cap, &b->class_cuts[k], b->classmaps + 256 * (size_t)k);
    copy(m->loops, b->loops, sizeof(xg2_loop) * b->n_loops);
    copy(m->skey_tab, b->skey_tab, sizeof *m->skey_tab * b->n_skey_tab); /* (its rules' keys_at hold) */
    copy(m->la_trans, b->la_trans, sizeof(int32_t) * 256 * (size_t)b->n_la_states);
    copy(m->la_final, b->la_final, b->n_la_states);
    copy(m->la_start, b->la_start, sizeof(uint32_t) * b->n_la);
    m->token_kinds = b->token_kinds;
    m->has_budgets = b->has_budgets;
    if ((rc = copy_fans(b, smap, m))) goto out;

    /* Each piece, moved. */
    for (uint32_t i = 0; i < n && !rc; i++) {
        const xg2_grammar *p = pieces[i];
        const piece_base *o = &pb[i];
        if (o->rule_at == XG2_NONE) continue;
        if ((rc = xg2__budget_check("linking piece", xg2__ir_name(&p->ir, p->root)))) break;
        for (uint32_t r = 0; r < p->n_rules; r++) {
            xg2_rule ru = p->rules[r];
            if (ru.start != XG2_NONE) ru.start += o->states;
            if (ru.kind == RK_REPEAT) ru.child = o->rmap[ru.child];
            if (ru.lookahead >= 0) ru.lookahead += (int32_t)o->la;
            if (ru.keys_at) ru.keys_at += o->keys;
            ru.piece = 1;
            m->rules[o->rmap[r]] = ru;
            m->follow[o->rmap[r]] = p->follow[r];
        }
        for (uint32_t k = 0; k < p->n_classmaps; k++)
            map_of[k] = shared_map(m, map_tab, map_cap, &p->class_cuts[k], p->classmaps + 256 * (size_t)k);
        uint8_t group_of[XG2_MAX_GROUP_SETS + 1] = {0}; /* the piece's group entries in m's table */
        for (uint32_t k = 0; k < p->n_group_tab; k++) group_of[k + 1] = xg2__group_entry(m, p->group_tab[k]);
        for (uint32_t s = 0; s < p->n_states; s++) {
            xg2_state st = p->states[s];
            st.groups = group_of[st.groups];
            st.row += o->trans;
            st.cls = 256u * map_of[st.cls >> 8];
            st.rule = o->rmap[st.rule];
            st.ref_off += o->refs;
            if (st.loop) st.loop = (((st.loop >> 1) + o->loops) << 1) | (st.loop & 1);
            st.flags &= (uint8_t)~SF_FAN; /* (a piece's fans are not copied: none has a TagDispatch) */
            m->states[o->states + s] = st;
        }
        if (p->head_groups) copy(m->head_groups + o->states, p->head_groups, sizeof(uint64_t) * p->n_states);
        copy(m->skey_tab + o->keys, p->skey_tab, sizeof *m->skey_tab * p->n_skey_tab);
        if (p->rest) copy(m->rest + 2 * (size_t)o->states, p->rest, 2 * sizeof(uint32_t) * p->n_states);
        move_ids(m->trans + o->trans, p->trans, p->n_trans, o->states);
        for (uint32_t k = 0; k < p->n_refs; k++)
            m->refs_tab[o->refs + k] = (xg2_ref){o->rmap[p->refs_tab[k].rule], p->refs_tab[k].to + o->states};
        copy(m->loops + o->loops, p->loops, sizeof(xg2_loop) * p->n_loops);
        for (size_t k = 0; k < 256 * (size_t)p->n_la_states; k++)
            m->la_trans[256 * (size_t)o->la_states + k] = p->la_trans[k] < 0 ? -1 : p->la_trans[k] + (int32_t)o->la_states;
        copy(m->la_final + o->la_states, p->la_final, p->n_la_states);
        for (uint32_t k = 0; k < p->n_la; k++) m->la_start[o->la + k] = p->la_start[k] + o->la_states;
        m->token_kinds |= p->token_kinds;
        m->has_budgets |= p->has_budgets;
    }
    if (rc) goto out;

    /* The IR: the linking grammar's, each piece's appended (its root over the stand-in). */
    m->ir = b->ir;
    memset(&b->ir, 0, sizeof b->ir); /* (m's now) */
    uint64_t ne = m->ir.exprs.n, np = m->ir.pool.n, nby = m->ir.bytes.n, nna = m->ir.names.n;
    for (uint32_t i = 0; i < n; i++) {
        if (pb[i].rule_at == XG2_NONE) continue;
        const xg2_ir *pi = &pieces[i]->ir;
        nna += pi->names.n + (uint64_t)pi->rules.n * (prefixes && prefixes[i] ? strlen(prefixes[i]) : 0);
        if (pieces[i]->token_kinds) ne += pi->exprs.n, np += pi->pool.n, nby += pi->bytes.n; /* (copied whole) */
    }
    if (vec_reserve(&m->ir.rules, nr) || vec_reserve(&m->ir.exprs, ne) || vec_reserve(&m->ir.pool, np) ||
        vec_reserve(&m->ir.bytes, nby) || vec_reserve(&m->ir.names, nna)) {
        rc = XG2_NOMEM();
        goto out;
    }
    m->ir.rules.n = (uint32_t)nr;
    /* A piece's rules keep their names and attributes here, their expressions stay in
     * the piece (retained, for printing): a third of what linking would copy.  Unless
     * the piece has Token rules, whose bodies binding to a vocabulary reads. */
    m->linked = xg2__calloc(n ? n : 1, sizeof *m->linked);
    m->linked_rmap = xg2__calloc(n ? n : 1, sizeof *m->linked_rmap);
    m->linked_prefix = xg2__calloc(n ? n : 1, sizeof *m->linked_prefix);
    if (!m->linked || !m->linked_rmap || !m->linked_prefix) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t i = 0; i < n && !rc; i++) {
        if (pb[i].rule_at == XG2_NONE) continue;
        const char *prefix = prefixes ? prefixes[i] : NULL;
        if (pieces[i]->token_kinds) {
            rc = xg2__ir_append(&m->ir, &pieces[i]->ir, pb[i].rmap, prefix);
            continue;
        }
        if ((rc = xg2__ir_stub_rules(&m->ir, &pieces[i]->ir, pb[i].rmap, prefix))) break;
        size_t plen = prefix ? strlen(prefix) : 0;
        char *kept = xg2__malloc(plen + 1); /* (the caller's prefix need not outlive the call) */
        if (!kept) { rc = XG2_NOMEM(); break; }
        copy(kept, prefix, plen);
        kept[plen] = 0;
        uint32_t k = m->n_linked++;
        xg2__grammar_retain(pieces[i]);
        m->linked[k] = pieces[i];
        m->linked_rmap[k] = pb[i].rmap;
        m->linked_prefix[k] = kept;
        pb[i].rmap = NULL; /* (m's now) */
        const xg2_ir *pi = &pieces[i]->ir; /* (counted as if copied: a grammar's bytes say what it keeps alive) */
        m->memory_bytes += pi->exprs.n * sizeof(xg2_expr) + pi->pool.n * 4u + pi->bytes.n + pi->names.n;
    }
    m->root = b->root;
    m->root_first = b->root_first;
    m->root_follow = b->root_follow;
    copy(m->root_h, b->root_h, sizeof m->root_h);
out:
    xg2__free(smap);
    xg2__free(map_tab);
    xg2__free(map_of);
    return rc;
}

int xg2_grammar_link(const char *text, size_t len, const char *root, uint32_t n, const char *const *names,
                     xg2_grammar *const *pieces, const char *const *prefixes, uint8_t *need_follow, xg2_grammar **out) {
    xg2__clear_error();
    if (!text || !root || !out || (n && (!names || !pieces || !need_follow))) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    *out = NULL;
    if (n > XG2_MAX_RULES) return xg2__fail(XG2_ERR_LIMIT, "more than %d pieces", XG2_MAX_RULES);
    for (uint32_t i = 0; i < n; i++) {
        if (!names[i] || !pieces[i]) return xg2__fail(XG2_ERR_ARG, "piece %u: NULL name or grammar", i);
        if (pieces[i]->n_linked) /* (its pieces' expressions are not in it: one level of linking) */
            return xg2__fail(XG2_ERR_ARG, "piece %u (\"%s\") is itself a linked grammar", i, names[i]);
    }
    xg2_grammar *b = xg2__calloc(1, sizeof *b), *m = NULL;
    piece_base *pb = xg2__calloc(n ? n : 1, sizeof *pb);
    if (!b || !pb) { xg2__free(b); xg2__free(pb); return xg2__budget_status(XG2_NOMEM(), "starting"); }
    b->refs = 1;
    int rc = xg2__ir_init(&b->ir) ? XG2_NOMEM() : XG2_OK;
    /* Each piece's root is a rule defined before the text is read: a stand-in body
     * the normaliser sees as productive (nullable like the piece), never expanded. */
    for (uint32_t i = 0; i < n && !rc; i++) {
        uint32_t r = xg2__ir_rule_id(&b->ir, names[i], strlen(names[i]), 0, 0);
        if (b->ir.err) { rc = XG2_NOMEM(); break; }
        if (b->ir.rules.a[r].ext) { rc = xg2__fail(XG2_ERR_ARG, "piece \"%s\" is given twice", names[i]); break; }
        uint8_t x = 'x';
        uint32_t body = xg2__ir_bytes(&b->ir, &x, 1);
        if (pieces[i]->rules[pieces[i]->root].nullable) body = xg2__ir_repeat(&b->ir, body, 0, 1);
        if (b->ir.err) { rc = XG2_NOMEM(); break; }
        xg2_rule_ir *ru = &b->ir.rules.a[r];
        ru->body = body;
        ru->defined = 1;
        ru->def = b->ir.n_defs++;
        ru->ext = i + 1;
    }
    b->ext = (const xg2_grammar *const *)pieces;
    if (!rc) rc = xg2__ebnf_parse(&b->ir, text, len, root);
    if (!rc) rc = xg2__grammar_link_ir(b);

    int mismatch = 0;
    for (uint32_t i = 0; i < n; i++) pb[i].rule_at = XG2_NONE;
    for (uint32_t i = 0; i < n && !rc; i++) copy(need_follow + 32 * (size_t)i, &pieces[i]->root_follow, 32);
    for (uint32_t r = 0; r < b->ir.rules.n && !rc; r++) {
        uint32_t e = b->ir.rules.a[r].ext;
        if (!e || b->rules[r].start == XG2_NONE) continue;
        pb[e - 1].rule_at = r;
        copy(need_follow + 32 * (size_t)(e - 1), &b->follow[r], 32);
        mismatch |= memcmp(&b->follow[r], &pieces[e - 1]->root_follow, sizeof b->follow[r]) != 0;
    }
    if (!rc && !mismatch) {
        m = xg2__calloc(1, sizeof *m);
        if (!m) rc = XG2_NOMEM();
        else {
            m->refs = 1;
            rc = merge(b, n, (const xg2_grammar *const *)pieces, prefixes, pb, m);
            if (!rc) xg2__group_tab_fit(m);
            if (!rc) m->memory_bytes += xg2__grammar_memory(m);
        }
    }
    for (uint32_t i = 0; i < n; i++) xg2__free(pb[i].rmap);
    xg2__free(pb);
    xg2__grammar_destroy(b);
    rc = xg2__budget_status(rc, "linking the grammar");
    if (rc) {
        if (m) xg2__grammar_destroy(m);
        return rc;
    }
    *out = m; /* (NULL: a piece was built for another follow set) */
    return XG2_OK;
}
