/*
 * vocab.h -- the decoded vocabulary and its flattened prefix trie.
 *
 * Trie layout (after the LLGuidance design note): nodes[] in depth-first order,
 * node 0 the root.  Every other node is one byte edge; the tokens whose bytes end
 * at a node are sorted_ids[tok_begin .. tok_begin + tok_count).  A node's subtree
 * is nodes[i .. i + subtree), so a byte the parser rejects skips the whole
 * subtree in one step.  `depth` is the number of bytes from the root: walking
 * nodes in order, the parser is popped back to depth - 1 before pushing `byte`.
 */
#ifndef XG2_VOCAB_H
#define XG2_VOCAB_H

#include "pool.h"

typedef struct {
    uint32_t subtree;   /* nodes in this subtree, self included */
    uint32_t tok_begin; /* first token of the subtree (index into ids); its own come first */
    uint32_t tok_end;   /* end of the subtree's tokens */
    uint16_t tok_count; /* tokens whose bytes end exactly here */
    uint16_t depth;     /* bytes from the root */
    uint8_t byte;       /* the edge byte into this node (unused for the root) */
} xg2_trie_node;

/* A prefix trie over a subset of the vocabulary, tokens in byte order. */
typedef struct {
    xg2_trie_node *nodes;
    uint64_t *below; /* per node: the groups (xg2__byte_group) of the bytes below it */
    uint8_t *in_slices; /* the vocabulary's full trie only, per node: bit k if every token
                         * of the subtree is a member of slice k (else NULL) */
    uint32_t n_nodes;
    int32_t *ids; /* token ids in byte order */
    uint32_t n_ids;
    /* root_next[b]: the first child of the root whose byte is b or above
     * (n_nodes if none), so a walk can go straight to the first bytes its
     * start allows instead of reading every child of the root. */
    uint32_t root_next[257];
    /* Sibling tables, for nodes other than the root with at least XG2_KIDS_MIN
     * children: kid_at[p] (UINT32_MAX if none) indexes kid_node/kid_byte, where
     * entry 0 holds the count k and entries 1..k the children (node, byte) in
     * byte order -- so a walk refused at one child can find the next one its
     * state steps on without reading the nodes between. */
    uint32_t *kid_at, *kid_node;
    uint8_t *kid_byte;
} xg2_trie;
#define XG2_KIDS_MIN 8

/* A token slice (after LLGuidance's slicer): the tokens whose bytes are a
 * prefix of a string over one character class.  A parser state that accepts
 * every such string takes the whole slice at once and walks only `rest`. */
#define XG2_SLICE_MAX_CHARS 32
typedef struct {
    int32_t *dfa;         /* byte DFA of the class's strings, 256 entries per state, -1 dead */
    uint8_t *dfa_final;   /* state is at a character boundary */
    xg2_byteset *cuts;    /* per state: the bytes that start a run of one row value */
    xg2_byteset *alive;   /* per state: the bytes with a row value >= 0 */
    uint32_t n_dfa;
    uint32_t *all;        /* bitset of every member token */
    uint32_t *upto;       /* upto + (l - 1) * words: members of at most l characters (l <= 32),
                           * a trailing partial character counting as one */
    xg2_trie rest;        /* tokens not in the slice of 32 characters */
    /* For a state whose class characters all lead to one state that they
     * return to, a token's fate is that of what follows its longest prefix of
     * whole class characters: `whole` holds the tokens made only of whole
     * characters, `heads` the tokens that start with none, `suffixes` every
     * other token under the bytes after that prefix. */
    uint32_t *whole;
    xg2_trie heads;
    xg2_trie suffixes;
} xg2_slice;

enum { XG2_SLICE_JSON, XG2_SLICE_TEXT, XG2_SLICE_VISIBLE, XG2_SLICE_WORDSPACE, XG2_SLICE_WORD, XG2_N_SLICES }; /* widest first */

/* Tokens of at least XG2_LONG_MIN[k] bytes, as a trie and a bitset: near a
 * counted loop's maximum only they can fare otherwise than further from it.
 * `json_rest`: those of them that are not members of the JSON-string slice of
 * at most 32 characters (near the maximum of a loop over JSON string
 * characters the members are taken by length, the others walked). */
#define XG2_N_LONG 3
static const uint32_t XG2_LONG_MIN[XG2_N_LONG] = {8, 16, 32};
typedef struct {
    xg2_trie trie;
    uint32_t *bits;
    xg2_trie json_rest;
} xg2_long_tokens;

/* For a full walk near a JSON string's maxLength (maskcache.c,
 * walk_bounded_string): the matchable tokens that are not members of the JSON
 * slice of at most 32 characters yet start with whole string characters,
 * split by what follows those.  `sfx_upto` + (l - 1) * words: those with at
 * most l whole characters first and then a byte no JSON string character
 * starts with (the string is left there: their fate is that of the rest, at
 * any count, given the room for the l characters).  `cont`: the others (more
 * than 32 whole characters, or then a backslash or a character the slice
 * leaves out), walked whole. */
typedef struct {
    uint32_t *sfx_upto;
    xg2_trie cont;
    xg2_byteset starts; /* the bytes a JSON string character starts with (the slice's first bytes, a backslash) */
} xg2_json_bounded;

struct xg2_vocab {
    int refs;
    int type;
    int32_t vocab_size; /* mask width */
    int32_t n_tokens;   /* tokenizer tokens; ids >= n_tokens are padding */
    char *bytes;        /* decoded bytes of token i: bytes[off[i] .. off[i+1]) */
    uint32_t *off;
    uint8_t *flags; /* XG2_TOKEN_* per id in [0, vocab_size) */
    int32_t *stop_ids;
    int32_t n_stop;
    int32_t *special_ids;
    int32_t n_special;
    xg2_trie trie;       /* every token matchable as bytes */
    uint32_t max_token_len;
    uint32_t words;      /* mask words: ceil(vocab_size / 32) */
    uint32_t *plain;     /* the tokens neither special, stop nor padding (ExcludeToken's range) */
    xg2_slice slices[XG2_N_SLICES];
    xg2_long_tokens longs[XG2_N_LONG];
    xg2_json_bounded json_bounded;
    xg2_pool pool;       /* token-mask cache entries of every grammar for this vocabulary */
};

XG2_HIDDEN void xg2__vocab_retain(const xg2_vocab *v);

/* Build a trie over tokens (sorted here by bytes); `ids` is taken over. */
XG2_HIDDEN int xg2__trie_build(const xg2_vocab *v, int32_t *ids, uint32_t n, xg2_trie *out);
/* A trie over the tokens' bytes after skip[i] leading bytes; ids[] is copied. */
XG2_HIDDEN int xg2__trie_build_suffixes(const xg2_vocab *v, const int32_t *ids, const uint32_t *skip, uint32_t n,
                                        xg2_trie *out);
XG2_HIDDEN void xg2__trie_free(xg2_trie *t);

/* Counts further than this from a bound behave alike for one token: each
 * iteration takes at least one byte. */
static inline uint32_t xg2__count_far(const xg2_vocab *v) {
    return (v->max_token_len < 32766 ? v->max_token_len : 32766) + 1;
}

/* Merge two lists of token ids sorted by their bytes into out (na + nb ids). */
XG2_HIDDEN void xg2__vocab_merge_ids(const xg2_vocab *v, const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb,
                                     int32_t *out);

/* Sort token ids by their bytes (tmp: scratch of n ids). */
XG2_HIDDEN void xg2__vocab_sort_ids(const xg2_vocab *v, int32_t *ids, int32_t *tmp, uint32_t n);

/* Sort token ids by their bytes and drop repeats (*n updated). */
XG2_HIDDEN int xg2__vocab_sort_unique_ids(const xg2_vocab *v, int32_t *ids, uint32_t *n);

/* A per-length family of cumulative bitsets (a slice's `upto`, `sfx_upto`):
 * the set for at most `chars` characters, capped at XG2_SLICE_MAX_CHARS
 * (chars >= 1). */
static inline const uint32_t *xg2__upto(const xg2_vocab *v, const uint32_t *family, uint32_t chars) {
    return family + (size_t)((chars < XG2_SLICE_MAX_CHARS ? chars : XG2_SLICE_MAX_CHARS) - 1) * v->words;
}

/* slices.c */
XG2_HIDDEN int xg2__slices_build(xg2_vocab *v);
XG2_HIDDEN void xg2__slices_free(xg2_vocab *v);

#endif
