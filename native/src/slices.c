/*
 * slices.c -- token slices, precomputed once per vocabulary.
 *
 * Dense masks (inside a JSON string, in free text) would otherwise walk the
 * whole trie.  A slice is the set of tokens whose bytes are a prefix of a
 * string over one character class; when a parser state provably accepts every
 * string of the class (see maskcache.c), the slice's bitset is taken at once
 * and only the tokens outside it are walked.  Five classes cover the common
 * dense states: JSON string characters; "text" (letters, digits, space, any
 * non-ASCII character) for free-text states that exclude punctuation;
 * "visible" (the JSON string characters but white space: `\S`, `[^\s]`);
 * ASCII letters, digits and space (`[\w\s-]`, `[a-zA-Z0-9 ]`); and ASCII
 * letters and digits, for identifier-like patterns and formats (URI
 * segments, host names, e-mail parts) that allow neither spaces nor non-ASCII.
 */
#include "fsm.h"
#include "vocab.h"

/* U+2028 and U+2029 are left out of the two wide classes: patterns' "." excludes
 * them (ECMA-262 line terminators), and a state that allows them still takes the
 * slice (a class narrower than the state's is fine; the few tokens holding them
 * are walked). */
static const uint32_t json_ranges[] = {0x20, 0x21, 0x23, 0x5B, 0x5D, 0x2027, 0x202A, 0x10FFFF};
static const uint32_t text_ranges[] = {' ', ' ', '0', '9', 'A', 'Z', 'a', 'z', 0x80, 0x2027, 0x202A, 0x10FFFF};
/* (without ECMA-262's white space: U+00A0, U+1680, U+2000-U+200A, U+2028/9,
 * U+202F, U+205F, U+3000, U+FEFF) */
static const uint32_t visible_ranges[] = {0x21,   0x21,   0x23,   0x5B,   0x5D,   0x9F,   0xA1,   0x167F, 0x1681,
                                          0x1FFF, 0x200B, 0x2027, 0x202A, 0x202E, 0x2030, 0x205E, 0x2060, 0x2FFF,
                                          0x3001, 0xFEFE, 0xFF00, 0x10FFFF};
static const uint32_t wordspace_ranges[] = {' ', ' ', '0', '9', 'A', 'Z', 'a', 'z'};
static const uint32_t word_ranges[] = {'0', '9', 'A', 'Z', 'a', 'z'};

/* The byte DFA of class*, dense rows. */
static int class_dfa(const uint32_t *ranges, uint32_t n_ranges, xg2_slice *s) {
    xg2_ir ir;
    xg2_dfa d = {0};
    int rc = xg2__ir_init(&ir) ? XG2_NOMEM() : XG2_OK;
    if (!rc) {
        uint32_t cls = xg2__ir_class(&ir, ranges, n_ranges, 0);
        uint32_t star = xg2__ir_repeat(&ir, cls, 0, -1);
        rc = ir.err ? XG2_NOMEM() : xg2__fsm_build(&ir, star, NULL, NULL, UINT32_MAX, 1, &d);
    }
    if (!rc) {
        s->n_dfa = d.n;
        s->dfa = xg2__malloc(sizeof(int32_t) * 256 * (d.n ? d.n : 1));
        s->dfa_final = xg2__malloc(d.n ? d.n : 1);
        s->cuts = xg2__calloc(d.n ? d.n : 1, sizeof(xg2_byteset));
        s->alive = xg2__calloc(d.n ? d.n : 1, sizeof(xg2_byteset));
        if (!s->dfa || !s->dfa_final || !s->cuts || !s->alive) rc = XG2_NOMEM();
    }
    for (uint32_t q = 0; !rc && q < d.n; q++) {
        int32_t *row = s->dfa + 256 * q;
        for (int c = 0; c < 256; c++) row[c] = -1;
        for (uint32_t j = d.boff[q]; j < d.boff[q + 1]; j++)
            for (uint32_t c = d.br[j].lo; c <= d.br[j].hi; c++) row[c] = (int32_t)d.br[j].to;
        s->dfa_final[q] = d.final[q];
        for (int c = 0; c < 256; c++) {
            if (!c || row[c] != row[c - 1]) byteset_add(&s->cuts[q], (unsigned)c);
            if (row[c] >= 0) byteset_add(&s->alive[q], (unsigned)c);
        }
    }
    xg2__dfa_free(&d);
    xg2__ir_free(&ir);
    return rc;
}

/* Bytes of token t's longest prefix made of whole class characters. */
static uint32_t whole_prefix(const xg2_slice *s, const xg2_vocab *v, int32_t t) {
    const uint8_t *b = (const uint8_t *)v->bytes + v->off[t];
    uint32_t n = v->off[t + 1] - v->off[t], last = 0;
    int32_t q = 0;
    for (uint32_t i = 0; i < n; i++) {
        q = s->dfa[256 * q + b[i]];
        if (q < 0) break;
        if (s->dfa_final[q]) last = i + 1;
    }
    return last;
}

/* Make a per-length family of bitsets cumulative: set l also holds sets 1..l-1. */
static void make_cumulative(uint32_t *family, size_t words) {
    for (uint32_t l = 1; l < XG2_SLICE_MAX_CHARS; l++) {
        uint32_t *cur = family + (size_t)l * words;
        const uint32_t *prev = cur - words;
        for (size_t w = 0; w < words; w++) cur[w] |= prev[w];
    }
}

/* Characters of token t if it is in the slice (a trailing partial character
 * counts as one), or 0 if it is not. */
static uint32_t member_chars(const xg2_slice *s, const xg2_vocab *v, int32_t t) {
    const uint8_t *b = (const uint8_t *)v->bytes + v->off[t];
    uint32_t n = v->off[t + 1] - v->off[t], chars = 0;
    int32_t q = 0;
    for (uint32_t i = 0; i < n; i++) {
        q = s->dfa[256 * q + b[i]];
        if (q < 0) return 0;
        chars += s->dfa_final[q];
    }
    return chars + !s->dfa_final[q];
}

static int build_slice(xg2_vocab *v, const uint32_t *ranges, uint32_t n_ranges, xg2_slice *s) {
    int rc = class_dfa(ranges, n_ranges, s);
    if (rc) return rc;
    size_t words = v->words;
    s->all = xg2__calloc(words, sizeof(uint32_t));
    s->upto = xg2__calloc(words * XG2_SLICE_MAX_CHARS, sizeof(uint32_t));
    int32_t *rest = xg2__malloc(sizeof(int32_t) * (v->trie.n_ids ? v->trie.n_ids : 1));
    if (!s->all || !s->upto || !rest) {
        xg2__free(rest);
        return XG2_NOMEM();
    }
    uint32_t n_rest = 0;
    for (uint32_t k = 0; k < v->trie.n_ids; k++) {
        int32_t t = v->trie.ids[k];
        uint32_t c = member_chars(s, v, t);
        if (c) s->all[t >> 5] |= 1u << (t & 31);
        if (c && c <= XG2_SLICE_MAX_CHARS) s->upto[(size_t)(c - 1) * words + (t >> 5)] |= 1u << (t & 31);
        else rest[n_rest++] = t;
    }
    /* Whole-character tokens, the trie of those with no whole character first,
     * and the suffix trie of all the others. */
    s->whole = xg2__calloc(words, sizeof(uint32_t));
    int32_t *sid = xg2__malloc(sizeof(int32_t) * (v->trie.n_ids ? v->trie.n_ids : 1));
    uint32_t *skip = xg2__malloc(sizeof(uint32_t) * (v->trie.n_ids ? v->trie.n_ids : 1));
    int32_t *heads = xg2__malloc(sizeof(int32_t) * (v->trie.n_ids ? v->trie.n_ids : 1));
    if (!s->whole || !sid || !skip || !heads) {
        xg2__free(sid);
        xg2__free(skip);
        xg2__free(heads);
        xg2__free(rest);
        return XG2_NOMEM();
    }
    uint32_t n_suf = 0, n_heads = 0;
    for (uint32_t k = 0; k < v->trie.n_ids; k++) {
        int32_t t = v->trie.ids[k];
        uint32_t w = whole_prefix(s, v, t), len = v->off[t + 1] - v->off[t];
        if (w == len) {
            s->whole[t >> 5] |= 1u << (t & 31);
        } else if (w == 0) {
            heads[n_heads++] = t;
        } else {
            sid[n_suf] = t;
            skip[n_suf++] = w;
        }
    }
    int rc2 = xg2__trie_build_suffixes(v, sid, skip, n_suf, &s->suffixes);
    if (!rc2) rc2 = xg2__trie_build(v, heads, n_heads, &s->heads); /* takes heads */
    else xg2__free(heads);
    xg2__free(sid);
    xg2__free(skip);
    if (rc2) {
        xg2__free(rest);
        return rc2;
    }
    make_cumulative(s->upto, words);
    return xg2__trie_build(v, rest, n_rest, &s->rest);
}

/* in_slices of the full trie: a walk that follows one which took slice k in
 * bulk skips the subtrees made of k's members (see walk_from). */
static int mark_subtrees(xg2_vocab *v) {
    xg2_trie *t = &v->trie;
    uint8_t *member = xg2__calloc(v->vocab_size ? (size_t)v->vocab_size : 1, 1);
    t->in_slices = xg2__malloc(t->n_nodes ? t->n_nodes : 1);
    if (!member || !t->in_slices) { xg2__free(member); return XG2_NOMEM(); }
    for (int k = 0; k < XG2_N_SLICES; k++)
        for (int32_t i = 0; i < v->vocab_size; i++)
            if (v->slices[k].all[i >> 5] >> (i & 31) & 1) member[i] |= (uint8_t)(1u << k);
    for (uint32_t i = 0; i < t->n_nodes; i++) {
        uint8_t m = (1u << XG2_N_SLICES) - 1;
        for (uint32_t j = t->nodes[i].tok_begin; j < t->nodes[i].tok_end && m; j++) m &= member[t->ids[j]];
        t->in_slices[i] = m;
    }
    xg2__free(member);
    return XG2_OK;
}

/* v->json_bounded (see vocab.h), from the JSON slice. */
static int build_json_bounded(xg2_vocab *v) {
    const xg2_slice *s = &v->slices[XG2_SLICE_JSON];
    xg2_json_bounded *jb = &v->json_bounded;
    size_t words = v->words;
    const uint32_t *members = xg2__upto(v, s->upto, XG2_SLICE_MAX_CHARS);
    jb->starts = s->alive[0]; /* and the escape's backslash */
    byteset_add(&jb->starts, '\\');
    jb->sfx_upto = xg2__calloc(words * XG2_SLICE_MAX_CHARS, sizeof(uint32_t));
    int32_t *cont = xg2__malloc(sizeof(int32_t) * (v->trie.n_ids ? v->trie.n_ids : 1));
    if (!jb->sfx_upto || !cont) {
        xg2__free(cont);
        return XG2_NOMEM();
    }
    uint32_t n_cont = 0;
    for (uint32_t k = 0; k < v->trie.n_ids; k++) {
        int32_t t = v->trie.ids[k];
        if (members[t >> 5] >> (t & 31) & 1) continue;
        const uint8_t *b = (const uint8_t *)v->bytes + v->off[t];
        uint32_t w = whole_prefix(s, v, t), len = v->off[t + 1] - v->off[t], chars = 0;
        if (w == 0) continue; /* walked from the start (the slice's heads) */
        for (uint32_t i = 0, q = 0; i < w; i++) {
            q = (uint32_t)s->dfa[256 * q + b[i]];
            chars += s->dfa_final[q];
        }
        if (w == len || chars > XG2_SLICE_MAX_CHARS || byteset_has(&jb->starts, b[w]))
            cont[n_cont++] = t;
        else
            jb->sfx_upto[(size_t)(chars - 1) * words + (t >> 5)] |= 1u << (t & 31);
    }
    make_cumulative(jb->sfx_upto, words);
    return xg2__trie_build(v, cont, n_cont, &jb->cont);
}

int xg2__slices_build(xg2_vocab *v) {
    int rc = build_slice(v, json_ranges, sizeof json_ranges / sizeof *json_ranges / 2, &v->slices[XG2_SLICE_JSON]);
    if (!rc) rc = build_slice(v, text_ranges, sizeof text_ranges / sizeof *text_ranges / 2, &v->slices[XG2_SLICE_TEXT]);
    if (!rc)
        rc = build_slice(v, visible_ranges, sizeof visible_ranges / sizeof *visible_ranges / 2,
                         &v->slices[XG2_SLICE_VISIBLE]);
    if (!rc)
        rc = build_slice(v, wordspace_ranges, sizeof wordspace_ranges / sizeof *wordspace_ranges / 2,
                         &v->slices[XG2_SLICE_WORDSPACE]);
    if (!rc) rc = build_slice(v, word_ranges, sizeof word_ranges / sizeof *word_ranges / 2, &v->slices[XG2_SLICE_WORD]);
    if (!rc) rc = mark_subtrees(v);
    if (!rc) rc = build_json_bounded(v);
    return rc;
}

void xg2__slices_free(xg2_vocab *v) {
    for (int k = 0; k < XG2_N_SLICES; k++) {
        xg2_slice *s = &v->slices[k];
        xg2__free(s->dfa);
        xg2__free(s->dfa_final);
        xg2__free(s->cuts);
        xg2__free(s->alive);
        xg2__free(s->all);
        xg2__free(s->upto);
        xg2__free(s->whole);
        xg2__trie_free(&s->rest);
        xg2__trie_free(&s->heads);
        xg2__trie_free(&s->suffixes);
        memset(s, 0, sizeof *s);
    }
    xg2__free(v->json_bounded.sfx_upto);
    xg2__trie_free(&v->json_bounded.cont);
    memset(&v->json_bounded, 0, sizeof v->json_bounded);
}
