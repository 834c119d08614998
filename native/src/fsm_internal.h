/*
 * fsm_internal.h -- what the per-rule automaton builders share: the NFA (built
 * in fsm.c), the NFA as subset construction reads it, and the DFA passes of
 * fsm_dfa.c that fsm.c and fsm_length.c call.
 *
 * Private to fsm.c, fsm_dfa.c and fsm_length.c (one concept a file: NFA
 * construction and the cache, DFA construction and minimisation, Length);
 * everything else sees fsm.h.
 */
#ifndef XG2_FSM_INTERNAL_H
#define XG2_FSM_INTERNAL_H

#include "fsm.h"


#define MAX_INLINE_DEPTH 64

enum { NE_EPS, NE_BYTE, NE_RULE };

typedef struct {
    uint32_t from, to, a, b; /* byte edge: bytes a..b; rule edge: rule a */
    uint8_t kind;
} nedge;

typedef struct {
    uint32_t head, entry, exit; /* NFA states: the head, the state entering it, the exit */
    int32_t min, max;
    uint32_t expr;
} loop_rec;

/* An open expansion of a right-linear region: every member ends at `to`. */
typedef struct {
    uint32_t region, to, serial;
} region_ctx;

typedef struct {
    const xg2_ir *ir;
    const uint8_t *inline_rule;
    xg2_regions *regions;
    VEC(region_ctx) ctxs;  /* open expansions, innermost last */
    xg2_u32vec pending;    /* members whose fragment is still to build */
    int bytes_only;
    VEC(nedge) e;
    uint32_t n;
    xg2_u32vec tag;    /* loop tag of each NFA state */
    uint32_t cur_tag;  /* tag given to new states */
    VEC(loop_rec) loops;
    uint32_t stack[MAX_INLINE_DEPTH];
    uint64_t stack_hash[MAX_INLINE_DEPTH + 1]; /* [i]: the rules stack[0 .. i) */
    int sp;
    int rc;
    int flat;          /* inside copies of a repetition marked in regions->flat_repeat */
    xg2_u32vec ranges;
} nfa_builder;

/* The NFA as subset construction reads it (xg2__make_csr). */
typedef struct {
    uint32_t n, final;
    uint32_t *off; /* byte and rule edges of state s: e[off[s] .. off[s+1]) */
    nedge *e;
    uint32_t *eoff; /* epsilon edges of s, targets: eto[eoff[s] .. eoff[s+1]) */
    uint32_t *eto;
    uint32_t *mark;
    uint32_t stamp;
    xg2_u32vec stack;
    const uint32_t *tag;   /* loop tag per NFA state */
    const loop_rec *loops; /* loops[k - 1] */
    uint32_t n_loops;
    uint8_t *in_head_closure; /* n_loops rows of n: state is in the eps-closure of loop k's head */
    const char *name;         /* the rule's, for a compile-budget error (NULL: an expression) */
} nfa_csr;

typedef VEC(xg2_brange) brvec;
typedef VEC(xg2_redge) revec;

/* ---- fsm_dfa.c ---- */

/* The NFA's edges by state, epsilon edges apart.  xg2__free_csr frees c after a
 * failure too (c zeroed or made by xg2__make_csr). */
XG2_HIDDEN int xg2__make_csr(nfa_builder *b, uint32_t final, nfa_csr *c);
XG2_HIDDEN void xg2__free_csr(nfa_csr *c);

/* Subset construction of c's NFA into out (at most `limit` states). */
XG2_HIDDEN int xg2__determinize(nfa_csr *c, uint32_t limit, xg2_dfa *out);

/* Strongly connected components of d, sinks first: comp[s] of each state, *n_comp. */
XG2_HIDDEN int xg2__dfa_scc(const xg2_dfa *d, uint32_t *comp, uint32_t *n_comp);

/* Minimisation: block[s] the class of each state, *n_blocks classes (name: the
 * rule, for budget messages, or NULL). */
XG2_HIDDEN int xg2__minimize(const xg2_dfa *d, const char *name, uint32_t *block, uint32_t *n_blocks);

/* d quotiented by block, trimmed and numbered breadth-first into out. */
XG2_HIDDEN int xg2__rebuild(const xg2_dfa *d, const uint32_t *block, uint32_t nblk, xg2_dfa *out);

/* ---- fsm_length.c ---- */

/* The automaton of the XE_LENGTH expression expr (rule: the rule it is the
 * body of, for messages; UINT32_MAX: none). */
XG2_HIDDEN int xg2__build_length(const xg2_ir *ir, uint32_t expr, const uint8_t *inline_rule, xg2_regions *regions,
                            uint32_t rule, xg2_dfa *out);


/* Not empty, and no string a proper prefix of another: nothing goes on from a
 * final state (a counted loop's child, a Length unit). */
static inline int self_delimiting(const xg2_dfa *d) {
    int ok = d->n > 0 && !d->final[0];
    for (uint32_t s = 0; s < d->n && ok; s++)
        if (d->final[s] && (d->boff[s + 1] > d->boff[s] || d->roff[s + 1] > d->roff[s])) ok = 0;
    return ok;
}

#endif
