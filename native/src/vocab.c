/*
 * vocab.c -- decode a tokenizer's tokens to bytes, sort them, build the trie.
 *
 * Three encodings:
 *   raw            the token string is its bytes (tiktoken);
 *   byte fallback  "<0xNN>" is byte NN, U+2581 stands for a space (SentencePiece);
 *   byte level     each character is one byte through GPT-2's byte-to-unicode
 *                  table; a token with a character outside that table is an added
 *                  token, kept as its own UTF-8 text.
 */
#include "vocab.h"

/* ---- decoding ---- */

/* Decode one UTF-8 code point at s[*i]; returns -1 on malformed input. */
static int32_t utf8_next(const uint8_t *s, size_t n, size_t *i) {
    uint8_t c = s[*i];
    int len;
    int32_t cp;
    if (c < 0x80) { *i += 1; return c; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return -1;
    if (*i + (size_t)len > n) return -1;
    for (int k = 1; k < len; k++) {
        uint8_t d = s[*i + (size_t)k];
        if ((d & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (d & 0x3F);
    }
    *i += (size_t)len;
    return cp;
}

/* GPT-2 byte-to-unicode: printable bytes map to themselves, the other 68 bytes
 * to U+0100.. in increasing byte order.  Inverse table over U+0000..U+0143. */
static void byte_level_inverse(int16_t inv[324]) {
    int shifted = 0;
    for (int i = 0; i < 324; i++) inv[i] = -1;
    for (int b = 0; b < 256; b++) {
        int kept = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        if (kept) inv[b] = (int16_t)b;
        else inv[256 + shifted++] = (int16_t)b;
    }
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode token s[0..n) into out (capacity >= n); returns the decoded length. */
static size_t decode_token(int type, const uint8_t *s, size_t n, uint8_t *out,
                           const int16_t *inv) {
    if (type == XG2_VOCAB_BYTE_FALLBACK) {
        if (n == 6 && s[0] == '<' && s[1] == '0' && (s[2] == 'x' || s[2] == 'X') && s[5] == '>' &&
            hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
            out[0] = (uint8_t)(hexval(s[3]) * 16 + hexval(s[4]));
            return 1;
        }
        size_t k = 0;
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
                out[k++] = ' ';
                i += 3;
            } else {
                out[k++] = s[i++];
            }
        }
        return k;
    }
    if (type == XG2_VOCAB_BYTE_LEVEL) {
        size_t k = 0, i = 0;
        while (i < n) {
            int32_t cp = utf8_next(s, n, &i);
            if (cp < 0 || cp >= 324 || inv[cp] < 0) goto raw; /* an added token */
            out[k++] = (uint8_t)inv[cp];
        }
        return k;
    }
raw:
    memcpy(out, s, n);
    return n;
}

/* ---- sorting and the trie ---- */

static int cmp_token(const xg2_vocab *v, int32_t x, int32_t y) {
    uint32_t lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return (x > y) - (x < y);
}

void xg2__vocab_merge_ids(const xg2_vocab *v, const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb,
                          int32_t *out) {
    uint32_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) out[k++] = cmp_token(v, a[i], b[j]) <= 0 ? a[i++] : b[j++];
    while (i < na) out[k++] = a[i++];
    while (j < nb) out[k++] = b[j++];
}

/* Merge sort of token ids by bytes (stable, no global state). */
void xg2__vocab_sort_ids(const xg2_vocab *v, int32_t *a, int32_t *tmp, uint32_t n) {
    if (n < 2) return;
    uint32_t h = n / 2;
    xg2__vocab_sort_ids(v, a, tmp, h);
    xg2__vocab_sort_ids(v, a + h, tmp, n - h);
    xg2__vocab_merge_ids(v, a, h, a + h, n - h, tmp);
    memcpy(a, tmp, sizeof(int32_t) * n);
}

int xg2__vocab_sort_unique_ids(const xg2_vocab *v, int32_t *ids, uint32_t *n) {
    if (*n < 2) return XG2_OK;
    int32_t *tmp = xg2__malloc(sizeof(int32_t) * *n);
    if (!tmp) return XG2_NOMEM();
    xg2__vocab_sort_ids(v, ids, tmp, *n);
    xg2__free(tmp);
    uint32_t m = 0;
    for (uint32_t j = 0; j < *n; j++)
        if (!m || ids[m - 1] != ids[j]) ids[m++] = ids[j];
    *n = m;
    return XG2_OK;
}

void xg2__trie_free(xg2_trie *t) {
    xg2__free(t->nodes);
    xg2__free(t->below);
    xg2__free(t->in_slices);
    xg2__free(t->ids);
    xg2__free(t->kid_at);
    xg2__free(t->kid_node);
    xg2__free(t->kid_byte);
    memset(t, 0, sizeof *t);
}

/* Entries of a trie: token id and how many leading bytes of it to skip. */
typedef struct {
    int32_t id;
    uint32_t skip;
} trie_entry;

static int cmp_entry(const xg2_vocab *v, const trie_entry *x, const trie_entry *y) {
    uint32_t lx = v->off[x->id + 1] - v->off[x->id] - x->skip, ly = v->off[y->id + 1] - v->off[y->id] - y->skip;
    int c = memcmp(v->bytes + v->off[x->id] + x->skip, v->bytes + v->off[y->id] + y->skip, lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void sort_entries(const xg2_vocab *v, trie_entry *a, trie_entry *tmp, uint32_t n) {
    if (n < 2) return;
    uint32_t h = n / 2;
    sort_entries(v, a, tmp, h);
    sort_entries(v, a + h, tmp, n - h);
    uint32_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_entry(v, &a[i], &a[j]) <= 0 ? a[i++] : a[j++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, sizeof(trie_entry) * n);
}

/* out[b], b <= 256: the first child of node p whose byte is b or above, else
 * the end of p's subtree. */
static void child_table(const xg2_trie *t, uint32_t p, uint32_t *out) {
    uint32_t end = p + t->nodes[p].subtree, ch = p + 1;
    for (uint32_t b = 0; b <= 256; b++) {
        while (ch < end && t->nodes[ch].byte < b) ch += t->nodes[ch].subtree;
        out[b] = ch;
    }
}

/* The sibling tables of the nodes with at least XG2_KIDS_MIN children (the
 * root's are root_next). */
static int sibling_tables(xg2_trie *t) {
    uint32_t nn = t->n_nodes;
    uint64_t total = 0;
    t->kid_at = xg2__malloc(sizeof(uint32_t) * (nn ? nn : 1));
    if (!t->kid_at) return XG2_NOMEM();
    for (uint32_t p = 0; p < nn; p++) {
        uint32_t kids = 0, end = p + t->nodes[p].subtree;
        for (uint32_t ch = p + 1; ch < end; ch += t->nodes[ch].subtree) kids++;
        t->kid_at[p] = p && kids >= XG2_KIDS_MIN ? (uint32_t)total : UINT32_MAX;
        if (t->kid_at[p] != UINT32_MAX) total += kids + 1;
    }
    if (total > UINT32_MAX / 2) return xg2__fail(XG2_ERR_LIMIT, "vocabulary too large for the trie");
    t->kid_node = xg2__malloc(sizeof(uint32_t) * (total ? total : 1));
    t->kid_byte = xg2__malloc(total ? total : 1);
    if (!t->kid_node || !t->kid_byte) return XG2_NOMEM();
    for (uint32_t p = 0; p < nn; p++) {
        if (t->kid_at[p] == UINT32_MAX) continue;
        uint32_t at = t->kid_at[p], k = 0, end = p + t->nodes[p].subtree;
        for (uint32_t ch = p + 1; ch < end; ch += t->nodes[ch].subtree) {
            t->kid_node[at + 1 + k] = ch;
            t->kid_byte[at + 1 + k] = t->nodes[ch].byte;
            k++;
        }
        t->kid_node[at] = k;
        t->kid_byte[at] = 0;
    }
    return XG2_OK;
}

/* Build nodes[] over the entries' bytes (each token's bytes after `skip`).
 * Sorted entries make appending nodes a depth-first order; a node's subtree
 * closes when a later entry no longer shares its prefix.  Consumes `ents`. */
static int build_entries(const xg2_vocab *v, trie_entry *ents, uint32_t n, xg2_trie *t) {
    memset(t, 0, sizeof *t);
    int rc = XG2_OK;
    uint32_t *path = NULL;
    trie_entry *tmp = xg2__malloc(sizeof(trie_entry) * (n ? n : 1));
    t->ids = xg2__malloc(sizeof(int32_t) * (n ? n : 1));
    if (!tmp || !t->ids) { rc = XG2_NOMEM(); goto out; }
    sort_entries(v, ents, tmp, n);
    t->n_ids = n;
    uint64_t total = 1;
    for (uint32_t i = 0; i < n; i++) {
        t->ids[i] = ents[i].id;
        total += v->off[ents[i].id + 1] - v->off[ents[i].id] - ents[i].skip;
    }
    if (total > UINT32_MAX / 2) { rc = xg2__fail(XG2_ERR_LIMIT, "vocabulary too large for the trie"); goto out; }
    t->nodes = xg2__calloc(total, sizeof(xg2_trie_node));
    path = xg2__malloc(sizeof(uint32_t) * ((size_t)v->max_token_len + 1));
    if (!t->nodes || !path) { rc = XG2_NOMEM(); goto out; }
    uint32_t nn = 1, depth = 0;
    path[0] = 0;
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0;
    for (uint32_t k = 0; k < n; k++) {
        const uint8_t *p = (const uint8_t *)v->bytes + v->off[ents[k].id] + ents[k].skip;
        uint32_t len = v->off[ents[k].id + 1] - v->off[ents[k].id] - ents[k].skip;
        uint32_t lcp = 0, m = prev_len < len ? prev_len : len;
        while (lcp < m && prev[lcp] == p[lcp]) lcp++;
        if (lcp > depth) lcp = depth;
        for (; depth > lcp; depth--) t->nodes[path[depth]].subtree = nn - path[depth];
        for (; depth < len; depth++) {
            xg2_trie_node *nd = &t->nodes[nn];
            nd->byte = p[depth];
            nd->depth = (uint16_t)(depth + 1);
            path[depth + 1] = nn++;
        }
        xg2_trie_node *end = &t->nodes[path[depth]];
        if (end->tok_count == 0) end->tok_begin = k;
        if (end->tok_count == UINT16_MAX) { rc = xg2__fail(XG2_ERR_LIMIT, "more than 65535 tokens decode to the same bytes"); goto out; }
        end->tok_count++;
        prev = p;
        prev_len = len;
    }
    for (; depth > 0; depth--) t->nodes[path[depth]].subtree = nn - path[depth];
    t->nodes[0].subtree = nn;
    t->n_nodes = nn;
    /* Subtree token ranges: entries are numbered in DFS order, so the subtree of
     * node i holds [first entry at or after i, first entry at or after its end). */
    uint32_t next = n;
    for (uint32_t i = nn; i-- > 0;) {
        xg2_trie_node *nd = &t->nodes[i];
        uint32_t after = i + nd->subtree < nn ? t->nodes[i + nd->subtree].tok_begin : n;
        if (nd->tok_count) next = nd->tok_begin;
        nd->tok_begin = next;
        nd->tok_end = after;
    }
    /* Jump tables: of the root's children, and of nodes with many children. */
    child_table(t, 0, t->root_next);
    if ((rc = sibling_tables(t))) goto out;
    /* Byte groups below each node, children first (they follow their parent). */
    t->below = xg2__calloc(nn, sizeof(uint64_t));
    if (!t->below) { rc = XG2_NOMEM(); goto out; }
    for (uint32_t i = nn; i-- > 0;)
        for (uint32_t ch = i + 1; ch < i + t->nodes[i].subtree; ch += t->nodes[ch].subtree)
            t->below[i] |= 1ull << xg2__byte_group(t->nodes[ch].byte) | t->below[ch];
out:
    xg2__free(path);
    xg2__free(tmp);
    xg2__free(ents);
    return rc;
}

int xg2__trie_build(const xg2_vocab *v, int32_t *ids, uint32_t n, xg2_trie *t) {
    trie_entry *ents = xg2__malloc(sizeof(trie_entry) * (n ? n : 1));
    if (!ents) { xg2__free(ids); memset(t, 0, sizeof *t); return XG2_NOMEM(); }
    for (uint32_t i = 0; i < n; i++) ents[i] = (trie_entry){ids[i], 0};
    xg2__free(ids);
    return build_entries(v, ents, n, t);
}

int xg2__trie_build_suffixes(const xg2_vocab *v, const int32_t *ids, const uint32_t *skip, uint32_t n, xg2_trie *t) {
    trie_entry *ents = xg2__malloc(sizeof(trie_entry) * (n ? n : 1));
    if (!ents) { memset(t, 0, sizeof *t); return XG2_NOMEM(); }
    for (uint32_t i = 0; i < n; i++) ents[i] = (trie_entry){ids[i], skip[i]};
    return build_entries(v, ents, n, t);
}

/* ---- public API ---- */

static void vocab_destroy(xg2_vocab *v) {
    xg2__free(v->bytes);
    xg2__free(v->off);
    xg2__free(v->flags);
    xg2__free(v->plain);
    xg2__free(v->stop_ids);
    xg2__free(v->special_ids);
    xg2__trie_free(&v->trie);
    xg2__slices_free(v);
    for (int k = 0; k < XG2_N_LONG; k++) {
        xg2__trie_free(&v->longs[k].trie);
        xg2__trie_free(&v->longs[k].json_rest);
        xg2__free(v->longs[k].bits);
    }
    xg2__pool_free(&v->pool);
    xg2__free(v);
}

void xg2__vocab_retain(const xg2_vocab *v) { XG2_REF_INC((xg2_vocab *)v); }

void xg2_vocab_free(xg2_vocab *v) {
    if (v && XG2_REF_DEC(v) == 0) vocab_destroy(v);
}

static int copy_ids(const int32_t *src, int32_t n, int32_t vocab_size, const char *what,
                    int32_t **dst) {
    *dst = xg2__malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!*dst) return XG2_NOMEM();
    for (int32_t i = 0; i < n; i++) {
        if (src[i] < 0 || src[i] >= vocab_size)
            return xg2__fail(XG2_ERR_ARG, "%s token id %d is out of range [0, %d)", what, src[i],
                             vocab_size);
        (*dst)[i] = src[i];
    }
    return XG2_OK;
}

/* Per long-token set, the trie of its tokens that are not members of the
 * JSON-string slice of at most 32 characters (left empty when the vocabulary
 * has no such slice). */
static int long_json_rest(xg2_vocab *v) {
    const xg2_slice *s = &v->slices[XG2_SLICE_JSON];
    if (!s->upto) return XG2_OK;
    const uint32_t *members = xg2__upto(v, s->upto, XG2_SLICE_MAX_CHARS);
    for (int k = 0; k < XG2_N_LONG; k++) {
        const uint32_t *bits = v->longs[k].bits;
        uint32_t m = 0;
        for (size_t i = 0; i < v->words; i++) m += (uint32_t)__builtin_popcount(bits[i] & ~members[i]);
        int32_t *ids = xg2__malloc(sizeof(int32_t) * (m ? m : 1));
        if (!ids) return XG2_NOMEM();
        m = 0;
        for (size_t i = 0; i < v->words; i++)
            for (uint32_t x = bits[i] & ~members[i]; x; x &= x - 1) ids[m++] = (int32_t)(i * 32 + (uint32_t)__builtin_ctz(x));
        int rc = xg2__trie_build(v, ids, m, &v->longs[k].json_rest);
        if (rc) return rc;
    }
    return XG2_OK;
}

int xg2_vocab_new(int type, const char *data, const uint32_t *offsets, int32_t n_tokens,
                  int32_t vocab_size, const int32_t *special_ids, int32_t n_special,
                  const int32_t *stop_ids, int32_t n_stop, xg2_vocab **out) {
    xg2__clear_error();
    if (!out) return xg2__fail(XG2_ERR_ARG, "out is NULL");
    if (type < XG2_VOCAB_RAW || type > XG2_VOCAB_BYTE_LEVEL)
        return xg2__fail(XG2_ERR_ARG, "unknown vocab type %d", type);
    if (n_tokens < 0 || vocab_size < 1 || vocab_size < n_tokens)
        return xg2__fail(XG2_ERR_ARG, "vocab_size %d must be >= 1 and >= the %d tokens", vocab_size,
                         n_tokens);
    if (n_tokens > 0 && (!data || !offsets)) return xg2__fail(XG2_ERR_ARG, "token data is NULL");
    if (n_special < 0 || n_stop < 0 || (n_special && !special_ids) || (n_stop && !stop_ids))
        return xg2__fail(XG2_ERR_ARG, "bad special/stop id list");
    for (int32_t i = 0; i < n_tokens; i++)
        if (offsets[i + 1] < offsets[i])
            return xg2__fail(XG2_ERR_ARG, "token offsets decrease at token %d", i);

    int rc = XG2_OK;
    xg2_vocab *v = xg2__calloc(1, sizeof *v);
    if (!v) return XG2_NOMEM();
    v->refs = 1;
    v->type = type;
    if ((rc = xg2__pool_init(&v->pool))) { xg2__free(v); return rc; }
    v->vocab_size = vocab_size;
    v->n_tokens = n_tokens;
    size_t total = n_tokens ? offsets[n_tokens] - offsets[0] : 0;
    v->bytes = xg2__malloc(total ? total : 1);
    v->off = xg2__malloc(sizeof(uint32_t) * ((size_t)n_tokens + 1));
    v->flags = xg2__calloc((size_t)vocab_size, 1);
    if (!v->bytes || !v->off || !v->flags) { rc = XG2_NOMEM(); goto fail; }

    int16_t inv[324];
    byte_level_inverse(inv);
    uint32_t pos = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        const uint8_t *s = (const uint8_t *)data + offsets[i];
        size_t n = offsets[i + 1] - offsets[i];
        v->off[i] = pos;
        size_t k = decode_token(type, s, n, (uint8_t *)v->bytes + pos, inv);
        if (k > XG2_MAX_TOKEN_LEN) {
            rc = xg2__fail(XG2_ERR_LIMIT, "token %d decodes to %zu bytes (limit %d)", i, k,
                           XG2_MAX_TOKEN_LEN);
            goto fail;
        }
        if (k == 0) v->flags[i] |= XG2_TOKEN_SPECIAL;
        if (k > v->max_token_len) v->max_token_len = (uint32_t)k;
        pos += (uint32_t)k;
    }
    v->off[n_tokens] = pos;
    for (int32_t i = n_tokens; i < vocab_size; i++) v->flags[i] |= XG2_TOKEN_PADDING;

    if ((rc = copy_ids(special_ids, n_special, vocab_size, "special", &v->special_ids))) goto fail;
    v->n_special = n_special;
    for (int32_t i = 0; i < n_special; i++) v->flags[special_ids[i]] |= XG2_TOKEN_SPECIAL;
    if ((rc = copy_ids(stop_ids, n_stop, vocab_size, "stop", &v->stop_ids))) goto fail;
    v->n_stop = n_stop;
    for (int32_t i = 0; i < n_stop; i++) v->flags[stop_ids[i]] |= XG2_TOKEN_STOP;

    /* Matchable tokens: not special, not stop, not padding, non-empty. */
    v->words = (uint32_t)(((int64_t)vocab_size + 31) / 32);
    int32_t *ids = xg2__malloc(sizeof(int32_t) * (size_t)(n_tokens ? n_tokens : 1));
    if (!ids) { rc = XG2_NOMEM(); goto fail; }
    v->plain = xg2__calloc(v->words ? v->words : 1, sizeof(uint32_t));
    if (!v->plain) { xg2__free(ids); rc = XG2_NOMEM(); goto fail; }
    uint32_t n = 0;
    for (int32_t i = 0; i < n_tokens; i++)
        if (!v->flags[i]) ids[n++] = i, v->plain[i >> 5] |= 1u << (i & 31);
    for (int k = 0; k < XG2_N_LONG && !rc; k++) { /* (before the full trie takes ids over) */
        int32_t *long_ids = xg2__malloc(sizeof(int32_t) * (n ? n : 1));
        v->longs[k].bits = xg2__calloc(v->words ? v->words : 1, sizeof(uint32_t));
        if (!long_ids || !v->longs[k].bits) { xg2__free(long_ids); xg2__free(ids); rc = XG2_NOMEM(); goto fail; }
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++)
            if (v->off[ids[i] + 1] - v->off[ids[i]] >= XG2_LONG_MIN[k]) {
                long_ids[m++] = ids[i];
                v->longs[k].bits[ids[i] >> 5] |= 1u << (ids[i] & 31);
            }
        rc = xg2__trie_build(v, long_ids, m, &v->longs[k].trie);
    }
    if (rc) { xg2__free(ids); goto fail; }
    if ((rc = xg2__trie_build(v, ids, n, &v->trie))) goto fail;
    if ((rc = xg2__slices_build(v))) goto fail;
    if ((rc = long_json_rest(v))) goto fail;
    *out = v;
    return XG2_OK;
fail:
    vocab_destroy(v);
    return rc;
}

int32_t xg2_vocab_size(const xg2_vocab *v) { return v ? v->vocab_size : 0; }
int32_t xg2_vocab_num_tokens(const xg2_vocab *v) { return v ? v->n_tokens : 0; }

int xg2_vocab_token(const xg2_vocab *v, int32_t id, const char **data, size_t *len, int *flags) {
    if (!v || !data || !len || !flags) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    if (id < 0 || id >= v->vocab_size)
        return xg2__fail(XG2_ERR_ARG, "token id %d is out of range [0, %d)", id, v->vocab_size);
    *flags = v->flags[id];
    if (id < v->n_tokens) {
        *data = v->bytes + v->off[id];
        *len = v->off[id + 1] - v->off[id];
    } else {
        *data = v->bytes;
        *len = 0;
    }
    return XG2_OK;
}

static int32_t copy_out(const int32_t *src, int32_t n, int32_t *out, int32_t cap) {
    for (int32_t i = 0; i < n && i < cap && out; i++) out[i] = src[i];
    return n;
}

int32_t xg2_vocab_stop_ids(const xg2_vocab *v, int32_t *out, int32_t cap) {
    return v ? copy_out(v->stop_ids, v->n_stop, out, cap) : 0;
}

int32_t xg2_vocab_special_ids(const xg2_vocab *v, int32_t *out, int32_t cap) {
    return v ? copy_out(v->special_ids, v->n_special, out, cap) : 0;
}

int xg2_vocab_set_cache_limit(xg2_vocab *v, size_t bytes) {
    if (!v) return xg2__fail(XG2_ERR_ARG, "vocab is NULL");
    xg2__pool_set_limit(&v->pool, bytes);
    return XG2_OK;
}

size_t xg2_vocab_cache_bytes(const xg2_vocab *v) {
    if (!v) return 0;
    xg2_pool *p = (xg2_pool *)&v->pool;
    pthread_mutex_lock(&p->lock);
    size_t b = p->bytes; /* entries; the bucket array is a few bytes per entry */
    pthread_mutex_unlock(&p->lock);
    return b;
}

int xg2_vocab_cache_stats(const xg2_vocab *v, uint64_t *entries, uint64_t *hits, uint64_t *misses, uint64_t *evictions) {
    if (!v || !entries || !hits || !misses || !evictions) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    xg2_pool *p = (xg2_pool *)&v->pool;
    pthread_mutex_lock(&p->lock);
    *entries = p->n;
    *hits = p->hits;
    *misses = p->misses;
    *evictions = p->evictions;
    pthread_mutex_unlock(&p->lock);
    return XG2_OK;
}

void xg2_vocab_clear_cache(xg2_vocab *v) {
    if (v) xg2__pool_clear(&v->pool);
}
