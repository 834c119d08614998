/*
 * grammar.h -- the runtime form of a grammar: every rule's DFA linked into
 * one global state space that the Earley parser steps through.
 *
 * Stepping state s on byte c:
 *
 *     t = trans[states[s].row + classmap[states[s].cls + c]]     (XG2_NONE: no edge)
 *
 * classmap folds the 256 bytes into the few classes a state distinguishes
 * (states with the same split share a map), so a state's row has one entry per
 * class.  Rule edges of s are
 * refs[states[s].ref_off .. + ref_n), sorted by rule.  A counted repetition
 * (RK_REPEAT) is one pseudo-state whose item carries the count.
 */
#ifndef XG2_GRAMMAR_H
#define XG2_GRAMMAR_H

#include "ir.h"

#define XG2_NONE 0xFFFFFFFFu

/* SF_TOKEN: the start of a Token / ExcludeToken rule, left on a whole token
 * (token_edges.c); its state + 1 is the rule's final state.  SF_FAN: a state
 * masked by its literals (literal_fans.h). */
enum { SF_FINAL = 1, SF_BYTES = 2, SF_REFS = 4, SF_REPEAT = 8, SF_TOKEN = 16, SF_FAN = 32 };

/* Literal fans (literal_fans.h).  A literal: bytes fan_text[text .. text + len),
 * from the fan it was recorded at.  A fan: state `state`'s literals are
 * fan_lits[lo .. hi), each less its first `skip` bytes; a chain (cut > 0): one
 * literal, its `cut` bytes after those (a single path down to a branch). */
typedef struct {
    uint32_t text, len;
} xg2_fan_lit;
typedef struct {
    uint32_t state, lo, hi, skip, cut;
} xg2_fan;

typedef struct {
    int32_t min, max;   /* iterations; max < 0: unbounded */
    xg2_byteset first;  /* bytes that start an iteration from the head */
    uint8_t rest_checked; /* a Length loop: steps keep the count able to end in [min, max] (rest[]) */
    uint32_t slack;       /* its largest finite rest: bounds are felt this much further than a token */
} xg2_loop;

typedef struct {
    uint32_t row;     /* first trans[] entry of this state's row */
    uint32_t cls;     /* offset of the state's 256-byte class map */
    uint32_t rule;    /* the rule this state belongs to */
    uint32_t ref_off; /* rule edges: refs[ref_off .. ref_off + ref_n) */
    uint32_t loop;    /* counted loop: (loop id << 1) | head, 0 outside loops */
    uint16_t ref_n;
    uint8_t flags;    /* SF_* */
    uint8_t groups;   /* 1 + its entry in group_tab (xg2__self_groups), 0: none */
} xg2_state;

typedef struct {
    uint32_t rule, to;
} xg2_ref;

typedef struct {
    uint32_t start;   /* global id of the start state (XG2_NONE: inlined everywhere) */
    uint32_t n_states;
    uint8_t kind;     /* RK_FSM or RK_REPEAT */
    uint8_t nullable;
    uint8_t dispatch;  /* a TagDispatch: its free-text states' masks do not look into the tags (maskcache.c) */
    uint8_t tagged;    /* a TokenTagDispatch calls it: a tag rule, as a TagDispatch's (grammar.c) */
    uint8_t piece;     /* copied in from a piece by linking (grammar_link.c) */
    int32_t lookahead; /* lookahead automaton id, or -1 */
    uint32_t child;   /* RK_REPEAT: the repeated rule and its bounds (max < 0: none) */
    int32_t min, max;
    int32_t max_tokens, max_chars; /* rule attributes (ir.h; -1: none): checked on the rule's own byte steps */
    /* Its states' keys (skey_tab below): mix(key, the state's index in the rule), or,
     * with keys_at > 0, skey_tab[keys_at - 1 + index]. */
    uint32_t keys_at;
    uint64_t key[2];
} xg2_rule;

struct xg2_grammar {
    int refs;
    xg2_ir ir; /* normalised IR: rule names, printing */
    xg2_rule *rules;
    uint32_t n_rules, root;
    xg2_state *states;
    uint32_t n_states;
    uint32_t *trans;
    uint32_t n_trans;
    uint8_t *classmaps;
    uint32_t n_classmaps;
    xg2_byteset *class_cuts; /* per class map (cls / 256): the bytes that start a class run */
    /* The byte groups (xg2__byte_group) a state loops on, whole, outside counted
     * loops and rule edges: the distinct sets, which xg2_state.groups indexes (a
     * byte a state instead of 8; past XG2_MAX_GROUP_SETS sets, a state has none:
     * its walks step byte by byte, as without the shortcut). */
    uint64_t *group_tab;
    uint32_t n_group_tab;
    uint64_t *head_groups;   /* per state, for a counted loop's head (no rule edges): the byte groups
                              * each of whose bytes is a whole iteration back to it; 0 if none
                              * (NULL in a grammar without counted loops) */
    uint8_t *contained;      /* per state, bit k: slice k proven contained from it (maskcache.c;
                              * set by mask walks, atomically: a memo, not part of the grammar) */
    uint8_t *proofs_spent;   /* one byte, bit k: a proof of slice k ran out of pairs (the same) */
    xg2_ref *refs_tab;
    uint32_t n_refs;
    /* Lookahead assertions: byte DFAs, 256 entries per state, -1 = dead. */
    int32_t *la_trans;
    uint8_t *la_final;
    uint32_t *la_start;
    uint32_t n_la, n_la_states;
    /* follow[r]: bytes that can come right after rule r completes (its own
     * lookahead included); used to rule out tokens that cross a rule's end. */
    xg2_byteset *follow;
    /* A state's structural key (xg2__state_key) -- equal for states of equal rule
     * automata (rules referenced through them compared the same way, names and
     * ids ignored) with equal FOLLOW sets, so their token masks can be shared
     * across grammars (XGrammar-2 §3.3).  Kept per rule (xg2_rule.key), but for
     * the rules whose states are keyed one by one, here (a linked grammar copies
     * 16 bytes a rule instead of 16 a state). */
    uint64_t (*skey_tab)[2];
    uint32_t n_skey_tab;
    /* Fans (literal_fans.h), by state ascending, their literals and bytes. */
    xg2_fan *fans;
    xg2_fan_lit *fan_lits;
    uint8_t *fan_text;
    uint32_t n_fan, n_fan_lits, n_fan_text;
    xg2_loop *loops; /* loops[id - 1] */
    uint32_t n_loops;
    uint32_t *rest;  /* states of Length loops: rest[2s], rest[2s + 1] = fewest and most units
                      * left to the rule's end (XG2_REST_ANY: unbounded); NULL if no such loop */
    /* The root rule seen from outside, for linking this grammar into others as a piece
     * (grammar_link.c): FIRST of its start, the FOLLOW it was built with, its rule key. */
    xg2_byteset root_first, root_follow;
    uint64_t root_h[2];
    const struct xg2_grammar *const *ext; /* while building a linked grammar: the pieces (ir.h ext) */
    /* A linked grammar's pieces (retained), for printing: their rules' IR here is names
     * and attributes only (grammar_link.c); per piece its rule map and name prefix. */
    const struct xg2_grammar **linked;
    uint32_t n_linked;
    uint32_t **linked_rmap;
    char **linked_prefix;
    uint8_t token_kinds; /* bit 1: some Token rule, bit 2: some ExcludeToken rule */
    uint8_t has_budgets; /* some rule has max_tokens or max_chars */
    uint8_t piece;       /* built as a piece (xg2_grammar_from_ebnf_piece): its rules not stored in the rule cache */
    size_t memory_bytes;
};

XG2_HIDDEN void xg2__grammar_retain(const xg2_grammar *g);
/* Build the runtime tables of g from its normalised IR (g->ext set for a linked grammar's
 * stand-ins); free a grammar whatever it holds; the bytes it holds. */
XG2_HIDDEN int xg2__grammar_link_ir(xg2_grammar *g);
/* Parse and build a grammar whose root is followed by root_follow (32 bytes; NULL: nothing). */
XG2_HIDDEN int xg2__grammar_build(const char *text, size_t len, const char *root, const uint8_t *root_follow,
                                  xg2_grammar **out);
XG2_HIDDEN void xg2__grammar_destroy(xg2_grammar *g);
XG2_HIDDEN size_t xg2__grammar_memory(const xg2_grammar *g);
/* The byte groups (xg2__byte_group) wholly inside `bytes`: a set's 64-bit summary. */
XG2_HIDDEN uint64_t xg2__whole_groups(const xg2_byteset *bytes);

#define XG2_MAX_GROUP_SETS 255

/* The byte groups state st loops on, whole (group_tab); 0 if none. */
static inline uint64_t xg2__self_groups(const xg2_grammar *g, const xg2_state *st) {
    return st->groups ? g->group_tab[st->groups - 1] : 0;
}

/* The groups entry for the set x (0: none) in g's group_tab (XG2_MAX_GROUP_SETS
 * entries allocated), added if new and there is room. */
static inline uint8_t xg2__group_entry(xg2_grammar *g, uint64_t x) {
    if (!x) return 0;
    for (uint32_t k = 0; k < g->n_group_tab; k++)
        if (g->group_tab[k] == x) return (uint8_t)(k + 1);
    if (g->n_group_tab == XG2_MAX_GROUP_SETS) return 0;
    g->group_tab[g->n_group_tab++] = x;
    return (uint8_t)g->n_group_tab;
}

/* Shrink g's group_tab to the entries it holds (built with room for XG2_MAX_GROUP_SETS). */
static inline void xg2__group_tab_fit(xg2_grammar *g) {
    uint64_t *fit = xg2__realloc(g->group_tab, sizeof(uint64_t) * (g->n_group_tab ? g->n_group_tab : 1));
    if (fit) g->group_tab = fit;
}

/* State s's structural key (see skey_tab). */
static inline void xg2__state_key(const xg2_grammar *g, uint32_t s, uint64_t key[2]) {
    const xg2_rule *rt = &g->rules[g->states[s].rule];
    uint32_t i = s - rt->start;
    if (rt->keys_at) {
        key[0] = g->skey_tab[rt->keys_at - 1 + i][0];
        key[1] = g->skey_tab[rt->keys_at - 1 + i][1];
        return;
    }
    key[0] = xg2__mix64(rt->key[0], i);
    key[1] = xg2__mix64(rt->key[1], i);
}

static inline uint32_t xg2__step(const xg2_grammar *g, uint32_t s, uint8_t c) {
    const xg2_state *st = &g->states[s];
    return g->trans[st->row + g->classmaps[st->cls + c]];
}

/* The count of an item that moves from state s to t on byte c, or UINT32_MAX
 * if a counted loop forbids the move (see fsm.h).  Outside loops: 0. */
static inline uint32_t xg2__loop_step(const xg2_grammar *g, uint32_t s, uint32_t t, uint8_t c, uint32_t count) {
    uint32_t ls = g->states[s].loop, lt = g->states[t].loop;
    if (!(ls | lt)) return 0;
    uint32_t n = count;
    int iterating = ls && !(ls & 1); /* inside an iteration */
    if (ls & 1) {
        const xg2_loop *l = &g->loops[(ls >> 1) - 1];
        if (byteset_has(&l->first, c)) {
            if (l->max >= 0 && count >= (uint32_t)l->max) return UINT32_MAX;
            iterating = 1;
        } else {
            if (count < (uint32_t)l->min) return UINT32_MAX;
            n = 0; /* left the loop */
        }
    }
    if (lt & 1) {
        const xg2_loop *l = &g->loops[(lt >> 1) - 1];
        if (iterating && (ls >> 1) == (lt >> 1)) {
            n = count + 1; /* an iteration ends */
            if (l->max < 0 && n > (uint32_t)l->min) n = (uint32_t)l->min;
        } else {
            n = 0; /* entering the loop */
        }
    } else if (!lt) {
        n = 0;
    }
    if (lt && g->loops[(lt >> 1) - 1].rest_checked) { /* a Length loop: no dead ends */
        const xg2_loop *l = &g->loops[(lt >> 1) - 1];
        const uint32_t *r = g->rest + 2 * (size_t)t;
        if (l->max >= 0 && (uint64_t)n + r[0] > (uint64_t)l->max) return UINT32_MAX;
        if (r[1] != XG2_REST_ANY && (uint64_t)n + r[1] < (uint64_t)l->min) return UINT32_MAX;
    }
    return n;
}

/* How far (in iterations) from a bound a loop's count must be for one token
 * not to feel it: far (xg2__count_far) plus a Length loop's slack. */
static inline uint32_t xg2__loop_far(const xg2_grammar *g, uint32_t loop_id, uint32_t far) {
    return far + g->loops[loop_id - 1].slack;
}

/* May an item at state s with this count complete its rule (if s is final)? */
static inline int xg2__loop_may_end(const xg2_grammar *g, uint32_t s, uint32_t count) {
    uint32_t l = g->states[s].loop;
    return !(l & 1) || count >= (uint32_t)g->loops[(l >> 1) - 1].min;
}

/* Target of state s over rule r, or XG2_NONE. */
static inline uint32_t xg2__step_rule(const xg2_grammar *g, uint32_t s, uint32_t r) {
    const xg2_state *st = &g->states[s];
    const xg2_ref *e = g->refs_tab + st->ref_off;
    for (uint32_t i = 0; i < st->ref_n; i++)
        if (e[i].rule == r) return e[i].to;
    return XG2_NONE;
}

#endif
