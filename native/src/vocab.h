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

#include "internal.h"

typedef struct {
    uint32_t subtree;   /* nodes in this subtree, self included */
    uint32_t tok_begin; /* index into sorted_ids */
    uint16_t tok_count; /* tokens whose bytes end exactly here */
    uint16_t depth;     /* bytes from the root */
    uint8_t byte;       /* the edge byte into this node (unused for the root) */
} xg2_trie_node;

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
    int32_t *sorted_ids; /* tokens matchable as bytes, in byte order */
    uint32_t n_sorted;
    xg2_trie_node *nodes;
    uint32_t n_nodes;
    uint32_t max_token_len;
};

XG2_HIDDEN void xg2__vocab_retain(const xg2_vocab *v);

#endif
