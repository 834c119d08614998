/*
 * dfacache.h -- minimal DFAs of rule bodies shared across grammars.
 *
 * Subset construction and minimisation are most of what compiling a grammar
 * costs, and JSON Schema grammars repeat the same rules (any JSON value, the
 * characters of a string, numbers) in every schema.  So the DFA of a rule is
 * cached process-wide under its NFA: the NFA is a deterministic function of the
 * rule body as built (inlined rules expanded), so equal NFAs give equal DFAs.
 * Rule references are numbered by first appearance in the key and in the
 * cached DFA, and renamed to the caller's rules on a hit.
 *
 * Bounded: past its limit (XG2_DFA_CACHE_BYTES unless set) the least recently
 * used DFAs are dropped (the ones every JSON Schema grammar uses stay;
 * emptying the whole cache, as it once did, made each schema after that
 * rebuild them); a DFA over XG2_DFA_CACHE_ENTRY_BYTES is not kept (the rules
 * that recur across grammars are small; a big one is one schema's own).
 * Thread-safe (one mutex; lookups copy the DFA out).
 */
#ifndef XG2_DFACACHE_H
#define XG2_DFACACHE_H

#include "fsm.h"

#define XG2_DFA_CACHE_BYTES ((size_t)32 << 20)
#define XG2_DFA_CACHE_ENTRY_BYTES ((size_t)1 << 20)

/* hash: xg2__hash_u32s(key, n_key), computed once for the lookup and the store.
 * On a hit: *out is a copy of the cached DFA (rule edges hold slot numbers)
 * and 1 is returned; 0 on a miss; -1 on allocation failure. */
XG2_HIDDEN int xg2__dfa_cache_find(const uint32_t *key, uint32_t n_key, uint64_t hash, xg2_dfa *out);

/* Whether a DFA of this size would be kept (callers skip preparing others). */
XG2_HIDDEN int xg2__dfa_cache_fits(uint32_t n_key, const xg2_dfa *d);

/* Store a copy of d (rule edges already slot numbers; xg2__dfa_cache_fits)
 * under key.  Failing to store (no memory) is not an error: the cache is only a
 * cache. */
XG2_HIDDEN void xg2__dfa_cache_add(const uint32_t *key, uint32_t n_key, uint64_t hash, const xg2_dfa *d);

#endif
