/*
 * literal_fans.h -- a state from which many literals branch out, masked as the
 * union of one cache entry per literal.
 *
 * After a tool-call trigger the grammar chooses among the request's tool
 * names: a tree of byte edges that ends, name by name, where the tool's
 * arguments begin.  The rule's automaton is the request's own (its keys are
 * new whenever the tool set is), so its mask would be a fresh walk of the
 * vocabulary in every request -- a thousand cold cache lines for 50 names.
 * But what one name accepts does not depend on the others: from such a state
 * the tokens that are a prefix of one remaining literal are accepted (the
 * rule consumes them without ending), those that run past a literal's end are
 * uncertain (the live parser decides them), no other token is.  That split
 * depends on the literal's bytes and the vocabulary alone, so each literal's
 * entry is computed once per process and the state's mask is their union:
 * a lookup per remaining name.
 *
 * A fan state is a state of a rule a TagDispatch calls whose moves, down to
 * each literal's end (its leaf: the first state that is not interior), are
 * single bytes through interior states: byte edges only, no rule end, no
 * counted loop.  The literals are recorded at link time, once from the root of
 * each depth-first run over the interior states (each fan in the run takes a
 * stretch of them, less its first bytes); a literal's key is the hash of its
 * bytes, taken at fill time.  The union is
 * then cached under the fan state's own key too, so the same tool set again
 * costs one lookup.
 *
 * A chain is a fan of one literal: a state further up a single path that
 * several literals share (Harmony's `commentary to=functions.` before every
 * name), masked by the path down to the branch (xg2_fan.cut bytes; the tokens
 * that run past it are uncertain, as past a literal's end).  Its own key holds
 * every name below it, new in each request; the path's entry is shared by all.
 */
#ifndef XG2_LITERAL_FANS_H
#define XG2_LITERAL_FANS_H

#include "fsm.h"
#include "grammar.h"
#include "vocab.h"

/* At least this many literals below a state make it a fan (fewer: its
 * residual key, shared once a name is unique, does as well); at most
 * XG2_FAN_MAX_LITERALS, each at most XG2_FAN_MAX_BYTES long. */
#define XG2_FAN_MIN_LITERALS 4
#define XG2_FAN_MAX_LITERALS 4096
#define XG2_FAN_MAX_BYTES 256
/* ... and a branch (two ways on) at most this many bytes below, less one. */
#define XG2_FAN_BRANCH_NEAR 3
/* Bytes of literal text one grammar records at most (then no more fans). */
#define XG2_FAN_MAX_TEXT (1u << 20)

/* Flag the fan states of g's tag rules (tag_rule[r]: called by a TagDispatch)
 * and record their literals.  dfa: the rules' automata (local numbering). */
XG2_HIDDEN int xg2__fans_build(xg2_grammar *g, const xg2_dfa *dfa, const uint8_t *tag_rule);

/* The fan (index into g->fans) a kernel item at state s is masked by: s's own,
 * or, for a state whose only move is one call, the callee start's (the state
 * after a trigger, whose dispatch calls the tags' rule); XG2_NONE if none. */
static inline uint32_t xg2__fan_of(const xg2_grammar *g, uint32_t s) {
    const xg2_state *st = &g->states[s];
    if (!(st->flags & SF_FAN)) {
        if (st->flags != SF_REFS || st->ref_n != 1 || st->loop) return XG2_NONE;
        s = g->rules[g->refs_tab[st->ref_off].rule].start;
        if (s == XG2_NONE || !(g->states[s].flags & SF_FAN)) return XG2_NONE;
    }
    uint32_t lo = 0, hi = g->n_fan;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (g->fans[mid].state < s) lo = mid + 1;
        else hi = mid;
    }
    return lo < g->n_fan && g->fans[lo].state == s ? lo : XG2_NONE;
}

/* The pool's entries for fan k's literals (their bytes less the fan's skip),
 * out[0 .. hi - lo), each with a reference the caller drops: looked up together
 * (their cold misses overlap), the missing ones computed (the trie walked along
 * their bytes) and inserted.  On an error none is held.  work (NULL:
 * unlimited) as for xg2__mask_entry_get. */
XG2_HIDDEN int xg2__fan_entries(const xg2_grammar *g, const xg2_vocab *v, uint32_t k, int64_t *work,
                                xg2_mask_entry **out);

/* Cache the union of a fan's literal entries under the fan state's own key
 * (k1, k2): acc, deduplicated, and unc, in byte order -- so a fill there next
 * time (the same tool set again) is one lookup.  Best effort: a failed
 * allocation leaves nothing cached. */
XG2_HIDDEN void xg2__fan_union_insert(const xg2_vocab *v, uint64_t k1, uint64_t k2, const int32_t *acc,
                                      uint32_t n_acc, const int32_t *unc, uint32_t n_unc);

#endif
