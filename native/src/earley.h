/*
 * earley.h -- an Earley parser over the linked per-rule DFAs, one input byte
 * per step, with its history kept so steps can be undone (all of them unless
 * the matcher bounds rollback, see xg2__parser_compact).
 *
 * Item (state, origin, count, guard):
 *   state   a global DFA state (or the pseudo-state of a counted repetition);
 *   origin  the input position where this rule instance began;
 *   count   completed iterations of a counted repetition, else 0;
 *   guard   pending lookahead assertions (0: none): rule R with (= L) that
 *           completed at position i lets its parent continue only while the
 *           text after i can still start with a string of L.  Rules predicted
 *           by a guarded item inherit its guard, so a failing assertion prunes
 *           everything that depends on it at the failing byte.
 *
 * Set i holds the items after i input bytes.  Items whose state has rule
 * edges (or a counter) are also listed in the set's wait list, which is what
 * a completion scans.  Popping a step truncates the flat arrays.  A matcher
 * with bounded rollback compacts the history (earley_compact.c).
 */
#ifndef XG2_EARLEY_H
#define XG2_EARLEY_H

#include "grammar.h"

typedef struct {
    uint32_t state, origin, count, guard;
} xg2_item;

typedef struct {
    uint32_t rule, guard;
} xg2_null_done;

typedef struct {
    xg2_u32vec pool, off; /* members of guard g: pool[off[g] .. off[g+1]) */
    uint32_t *tab;        /* interning: guard id + 1, 0 = empty slot */
    uint32_t cap;
    int err;              /* status of the last failed guard operation */
} xg2_guards;

typedef struct {
    const xg2_grammar *g;
    VEC(xg2_item) items;
    xg2_u32vec set_start;  /* ns + 1 entries; the last is items.n */
    xg2_u32vec wait;       /* item indices */
    xg2_u32vec wait_rule;  /* beside each: the one rule it waits on, or UINT32_MAX (several) */
    xg2_u32vec wait_start; /* ns + 1 entries; the last is wait.n */
    VEC(uint8_t) input;    /* input[i]: the byte between set i and i + 1 */
    uint32_t ns;           /* number of sets = input length + 1 */
    /* scratch for the set under construction */
    uint32_t *htab;        /* dedup: item index + 1 */
    uint32_t hcap;
    int hashed;
    VEC(xg2_null_done) nulls;
    xg2_u32vec tmp;
    xg2_guards guards;
    int root_done; /* local mode: the root instance completed at the last push */
    uint32_t scanned; /* items the last push made by scanning (the first of its set) */
    /* Work units left to this call (fill or accept): one per byte pushed and per
     * item added, and (maskcache.c) per trie node stepped.  Past zero, the
     * push fails with XG2_ERR_LIMIT (XG2_WORK_EXCEEDED below).  INT64_MAX after
     * init: unlimited until the caller sets it. */
    int64_t work_left;
    /* Rule budgets (max_tokens / max_chars, grammar.h), kept only when the
     * grammar has some: per set, the step number of the byte before it
     * (btok[0] = 0) and the code points begun before it.  cur_tok: the step
     * number of the bytes pushed now (the matcher sets it). */
    xg2_u32vec btok, bchr;
    uint32_t cur_tok;
} xg2_parser;

/* The work counter ran out (work_left < 0): what the caller reports. */
static inline int xg2__work_exhausted(const xg2_parser *p) { return p->work_left < 0; }
XG2_HIDDEN int xg2__work_fail(void);

/* Origin of the root item of a local parser (maskcache.c): its rule instance
 * began before the parser's history, so completing it just sets root_done. */
#define XG2_LOCAL_ROOT 0xFFFFFFFEu

#define XG2_GUARD_FAIL 0xFFFFFFFFu

XG2_HIDDEN int xg2__parser_init(xg2_parser *p, const xg2_grammar *g);
XG2_HIDDEN void xg2__parser_free(xg2_parser *p);
XG2_HIDDEN int xg2__parser_copy(xg2_parser *dst, const xg2_parser *src);

/* A parser whose first set is the closure of one item (state, XG2_LOCAL_ROOT,
 * count): the "local" view of a kernel item used to classify tokens. */
XG2_HIDDEN int xg2__parser_init_local(xg2_parser *p, const xg2_grammar *g, uint32_t state, uint32_t count);

/* Back to the initial set only. */
XG2_HIDDEN void xg2__parser_reset(xg2_parser *p);

/* Consume one byte: 1 if some item survives, 0 if the byte is rejected (the
 * parser is unchanged), or -status on failure (message set). */
XG2_HIDDEN int xg2__parser_push(xg2_parser *p, uint8_t c);

/* Consume one whole token: over the token edges of the items of the current
 * set listed in `edge` (token_edges.c), and over its bytes too if `text`.  1
 * if some item survives, 0 if not (the parser is unchanged), or -status. */
XG2_HIDDEN int xg2__parser_push_token(xg2_parser *p, const uint8_t *b, uint32_t len, int text, const uint32_t *edge,
                                      uint32_t n_edge);

/* Undo the last n bytes (n <= input length). */
XG2_HIDDEN void xg2__parser_pop(xg2_parser *p, uint32_t n);

static inline uint32_t xg2__parser_len(const xg2_parser *p) { return p->ns - 1; }

/* Bytes the history holds (items, wait lists, set bounds, input), as used. */
XG2_HIDDEN uint64_t xg2__parser_history_bytes(const xg2_parser *p);

/* Forget what no pop back to a position >= from and no live item can reach
 * (earley_compact.c); positions are renumbered, and *new_from is from's new
 * number (later positions shift with it).  A pop below it is no longer valid.
 * On failure (out of memory) the parser is unchanged. */
XG2_HIDDEN int xg2__parser_compact(xg2_parser *p, uint32_t from, uint32_t *new_from);

/* 1 if some item of the current set that could take a byte is close enough to
 * its rule's budget that a token of up to max_len bytes might pass it (a
 * cached mask would not see that: the caller walks the vocabulary instead). */
XG2_HIDDEN int xg2__parser_budget_near(const xg2_parser *p, uint32_t max_len);

/* 1 iff the input so far is a complete string of the grammar. */
XG2_HIDDEN int xg2__parser_can_end(const xg2_parser *p);

/* Bytes some live item has an edge on (a superset of the acceptable ones). */
/* The one item of the current set that can take a byte, if exactly one can
 * (the others only wait on rules; none takes a whole token): 1 and the item,
 * else 0.  (mask.c's resolve steps such an item's automaton itself.) */
XG2_HIDDEN int xg2__parser_lone_scanner(const xg2_parser *p, xg2_item *out);
XG2_HIDDEN void xg2__parser_next_bytes(const xg2_parser *p, xg2_byteset *out);

#endif
