/*
 * mask.c -- walk the token trie against the live parser.
 *
 * Nodes are visited in depth-first order.  Before trying node i the parser is
 * popped back to depth(i) - 1 bytes above the start; if it accepts the node's
 * byte, every token ending at the node is allowed and the walk descends (i+1),
 * otherwise the whole subtree is skipped (i + subtree).  A rejected prefix
 * therefore costs one step however many tokens share it.
 */
#include "mask.h"

int xg2__mask_walk(xg2_parser *p, const xg2_vocab *v, uint32_t *row) {
    const xg2_trie_node *nodes = v->nodes;
    const int32_t *ids = v->sorted_ids;
    uint32_t depth = 0;
    for (uint32_t i = 1; i < v->n_nodes;) {
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
