/*
 * xg2.h -- the whole ABI of the xg2 native core.
 *
 * Four opaque objects, each built from the one before:
 *
 *   xg2_vocab     a tokenizer's tokens decoded to bytes, sorted, in a prefix trie
 *   xg2_grammar   an EBNF grammar parsed, normalised and turned into per-rule FSMs
 *   xg2_compiled  a grammar bound to a vocab (owns the token-mask work for the pair)
 *   xg2_matcher   one generation: an Earley parser with its history (bounded on request)
 *
 * Conventions
 *   - Every function that can fail returns an int status (XG2_OK or an XG2_ERR_*
 *     code).  On failure, xg2_last_error() returns a message naming what was wrong
 *     and where; it is kept per thread, so read it on the thread that made the call.
 *   - Output handles are written only on success.  Passing NULL to a *_free
 *     function is a safe no-op.
 *   - Objects are reference counted internally: freeing a vocab or grammar that a
 *     compiled grammar still uses is safe; the memory lives until the last user
 *     is freed.
 *   - Threading: vocab, grammar and compiled objects are immutable after creation
 *     (apart from internal caches, which lock) and may be shared by any number of
 *     threads.  A matcher must not be used by two threads at once; different
 *     matchers may be used concurrently.
 *   - The library never aborts the process and never reads past a caller buffer:
 *     sizes are always passed explicitly and checked.
 *
 * This header is fed verbatim (minus preprocessor lines) to cffi's cdef(), so it
 * keeps to plain C declarations and integer #defines.
 */
#ifndef XG2_H
#define XG2_H

#include <stddef.h>
#include <stdint.h>

#define XG2_ABI_VERSION 3

/* Status codes.  ORDER STATUS: keep in sync with xg2_plugin/_errors.py.
 * New codes may be added; callers must treat unknown codes as errors. */
#define XG2_OK 0
#define XG2_ERR_ARG 1      /* invalid argument: NULL, out of range, wrong size */
#define XG2_ERR_GRAMMAR 2  /* the grammar text or structure is invalid */
#define XG2_ERR_NOMEM 3    /* an allocation failed */
#define XG2_ERR_LIMIT 4    /* a size or work limit was exceeded (message names it) */
#define XG2_ERR_STATE 5    /* the call is not valid in the object's current state */
#define XG2_ERR_INTERNAL 6 /* an internal invariant was violated (a bug) */

/* Vocabulary encodings. */
#define XG2_VOCAB_RAW 0           /* tokens are their own UTF-8 bytes (tiktoken style) */
#define XG2_VOCAB_BYTE_FALLBACK 1 /* SentencePiece: "<0xNN>" byte pieces, U+2581 for space */
#define XG2_VOCAB_BYTE_LEVEL 2    /* GPT-2 byte-to-unicode alphabet */

/* Flags reported per token by xg2_vocab_token(). */
#define XG2_TOKEN_SPECIAL 1 /* control/special token: never matched as bytes */
#define XG2_TOKEN_STOP 2    /* a stop (end-of-sequence) token */
#define XG2_TOKEN_PADDING 4 /* id beyond the tokenizer's vocabulary: never allowed */

typedef struct xg2_vocab xg2_vocab;
typedef struct xg2_grammar xg2_grammar;
typedef struct xg2_compiled xg2_compiled;
typedef struct xg2_matcher xg2_matcher;

/* ---- library ---------------------------------------------------------- */

/* Returns XG2_ABI_VERSION of the compiled library. */
int xg2_abi_version(void);

/* The message of the last failed call on this thread ("" if none).  The pointer
 * stays valid until the next failing call on the same thread. */
const char *xg2_last_error(void);

/* A compile budget for the calling thread, until the matching
 * xg2_budget_end(): grammar construction on this thread (xg2_grammar_from_ebnf)
 * fails with XG2_ERR_LIMIT ("compile time limit of X ms exceeded (while ...)",
 * "compile memory limit of N bytes exceeded ...") once max_ns nanoseconds have
 * passed since this call, or once the core's net allocation on this thread
 * since this call passes max_bytes; negative: no limit of that kind.  Checked
 * throughout parsing, normalisation, automaton construction and linking, so a
 * compile stops within a small multiple of the limit, everything freed.
 * Budgets nest (at most 8 deep; the tighter limit applies).  A server sets one
 * around each request's compile. */
int xg2_budget_begin(int64_t max_ns, int64_t max_bytes);
/* Close the innermost budget; returns the net bytes counted since the
 * outermost one opened. */
int64_t xg2_budget_end(void);

/* ---- vocab ------------------------------------------------------------ */

/* Build a vocab from encoded token strings.
 *   data/offsets: token i is data[offsets[i] .. offsets[i+1]), n_tokens + 1 offsets.
 *   vocab_size:   the model's vocabulary size (mask width), >= n_tokens; ids in
 *                 [n_tokens, vocab_size) are padding and never allowed.
 *   special_ids:  tokens that are control tokens (never matched as text).
 *   stop_ids:     the stop tokens, allowed exactly when the grammar can end.
 * Tokens that decode to no bytes are treated as special. */
int xg2_vocab_new(int vocab_type, const char *data, const uint32_t *offsets, int32_t n_tokens,
                  int32_t vocab_size, const int32_t *special_ids, int32_t n_special,
                  const int32_t *stop_ids, int32_t n_stop, xg2_vocab **out);
void xg2_vocab_free(xg2_vocab *vocab);

/* The mask width (model vocabulary size) and the tokenizer's token count. */
int32_t xg2_vocab_size(const xg2_vocab *vocab);
int32_t xg2_vocab_num_tokens(const xg2_vocab *vocab);

/* Decoded bytes and XG2_TOKEN_* flags of one token id in [0, vocab_size).
 * *data stays valid for the vocab's lifetime. */
int xg2_vocab_token(const xg2_vocab *vocab, int32_t id, const char **data, size_t *len,
                    int *flags);

/* Copy up to cap stop / special token ids into out; returns how many there are. */
int32_t xg2_vocab_stop_ids(const xg2_vocab *vocab, int32_t *out, int32_t cap);
int32_t xg2_vocab_special_ids(const xg2_vocab *vocab, int32_t *out, int32_t cap);

/* The token-mask cache: entries computed on first use, shared by every grammar
 * compiled for this vocabulary (states with equal structure share one entry),
 * entries not used lately evicted beyond the limit (default 512 MiB; a second
 * chance list, an approximation of least recently used). */
int xg2_vocab_set_cache_limit(xg2_vocab *vocab, size_t bytes);
size_t xg2_vocab_cache_bytes(const xg2_vocab *vocab);
int xg2_vocab_cache_stats(const xg2_vocab *vocab, uint64_t *entries, uint64_t *hits, uint64_t *misses,
                          uint64_t *evictions);
void xg2_vocab_clear_cache(xg2_vocab *vocab);

/* ---- grammar ---------------------------------------------------------- */

/* Parse EBNF text (XGrammar's dialect, see README) whose start rule is root_rule.
 * Errors give line and column and what was expected. */
int xg2_grammar_from_ebnf(const char *text, size_t len, const char *root_rule,
                          xg2_grammar **out);
void xg2_grammar_free(xg2_grammar *grammar);

/* The rule names an EBNF rule body mentions, each followed by a space, into
 * out (up to cap bytes; 2 * len always suffices); returns the bytes that takes
 * (-1: bad argument).  (The JSON Schema front-end reads the rules its bodies use.) */
int64_t xg2_ebnf_rule_names(const char *text, size_t len, char *out, size_t cap);

/* Print the normalised grammar as EBNF text.  Writes at most cap bytes (no NUL)
 * and sets *len to the full length, so a first call with cap 0 sizes the buffer. */
int xg2_grammar_print(const xg2_grammar *grammar, char *buf, size_t cap, size_t *len);

/* Linking (XGrammar-2 §3.3): a grammar whose pieces -- a tool's argument grammar,
 * say -- are compiled once and copied into every grammar that uses them.
 * xg2_grammar_from_ebnf_piece compiles a piece whose root is followed by the bytes
 * of `follow` (a 256-bit set, bit b of byte b / 8 for byte b).  xg2_grammar_link
 * compiles `text` in which each names[i] is not defined but stands for pieces[i]
 * (its root rule; its other rules are named after prefixes[i], if prefixes is not
 * NULL, in the result); need_follow (n * 32 bytes) receives the follow set each piece's
 * root has in the text.  If a piece was built for another follow set, *out is NULL
 * (XG2_OK): build those again with the sets asked for and call again.  The result
 * matches what the whole text would give (xg2_grammar_print prints it whole). */
int xg2_grammar_from_ebnf_piece(const char *text, size_t len, const char *root_rule,
                                const uint8_t *follow, xg2_grammar **out);
void xg2_grammar_root_follow(const xg2_grammar *grammar, uint8_t *out);
size_t xg2_grammar_memory_bytes(const xg2_grammar *grammar);
int xg2_grammar_link(const char *text, size_t len, const char *root_rule, uint32_t n,
                     const char *const *names, xg2_grammar *const *pieces, const char *const *prefixes,
                     uint8_t *need_follow, xg2_grammar **out);

/* The process-wide cache of rule automata (minimal DFAs shared by grammars
 * with equal rules): its limit in bytes (least recently used ones dropped
 * beyond it; default 32 MiB) and the bytes it holds. */
int xg2_rule_cache_set_limit(size_t bytes);
size_t xg2_rule_cache_bytes(void);

/* Number of rules and of FSM states after normalisation (for diagnostics). */
int32_t xg2_grammar_num_rules(const xg2_grammar *grammar);
int32_t xg2_grammar_num_states(const xg2_grammar *grammar);

/* ---- compiled grammar ------------------------------------------------- */

int xg2_compiled_new(const xg2_grammar *grammar, const xg2_vocab *vocab, xg2_compiled **out);
void xg2_compiled_free(xg2_compiled *compiled);

/* Bytes of memory held by the compiled grammar (grammar tables and caches). */
size_t xg2_compiled_memory_bytes(const xg2_compiled *compiled);

/* Compute ahead the token masks of up to max_states automaton states (all if
 * negative), nearest the grammar's start first, into the vocabulary's shared
 * mask cache (bounded by its limit), so later fills there are cache hits.  Meant
 * for a background thread right after compile (an engine overlaps it with
 * prefill); safe beside matchers of the same grammar.  Stops after the state in
 * progress once max_ns nanoseconds have passed (no limit if negative): the time
 * prefill leaves.  *done: states computed or found cached. */
int xg2_compiled_precompute(const xg2_compiled *compiled, int32_t max_states, int64_t max_ns, int32_t *done);

/* The same, with flags:
 *   XG2_PRECOMPUTE_OWN: not the states of rules a linked grammar took in from
 *     its pieces (xg2_grammar_link), which keep their mask keys -- computed once
 *     on each piece's own grammar, they serve every grammar it is linked into;
 *   XG2_PRECOMPUTE_PLAIN: only states reached by printable ASCII and whitespace
 *     bytes (not inside an escape or a multi-byte character: rare in a tool's
 *     arguments, and their masks are large). */
#define XG2_PRECOMPUTE_OWN 1
#define XG2_PRECOMPUTE_PLAIN 2
int xg2_compiled_precompute_states(const xg2_compiled *compiled, int32_t max_states, int64_t max_ns, uint32_t flags,
                                   int32_t *done);

/* The same for the states a sample text passes through, byte by byte (stopping
 * at the first byte the grammar refuses): for a tool's arguments, the states a
 * call is likely to meet, not every state of its schema.  *done: masks filled. */
int xg2_compiled_precompute_text(const xg2_compiled *compiled, const char *text, size_t len, int64_t max_ns,
                                 int32_t *done);

/* ---- matcher ---------------------------------------------------------- */

/* A matcher at the start of the grammar.
 *   stop_ids/n_stop: if n_stop >= 0, these replace the vocab's stop tokens.
 *   terminate_without_stop: if nonzero, the matcher counts as terminated as soon
 *   as the grammar is complete, without a stop token. */
int xg2_matcher_new(const xg2_compiled *compiled, const int32_t *stop_ids, int32_t n_stop,
                    int terminate_without_stop, xg2_matcher **out);
void xg2_matcher_free(xg2_matcher *matcher);

/* An independent copy of the matcher's whole state (history included). */
int xg2_matcher_fork(const xg2_matcher *matcher, xg2_matcher **out);

/* Advance by one token.  *accepted is 1 if the token was consumed, 0 if the
 * grammar rejects it (state unchanged).  A token id outside [0, vocab_size) is
 * XG2_ERR_ARG.  After a stop token was accepted every token is rejected.
 * With terminate_without_stop the matcher is terminated whenever the
 * grammar is complete, but tokens that extend the grammar are still accepted
 * (as in XGrammar). */
int xg2_matcher_accept_token(xg2_matcher *matcher, int32_t token, int *accepted);

/* Advance by raw bytes, as one rollback step.  All or nothing. */
int xg2_matcher_accept_bytes(xg2_matcher *matcher, const char *data, size_t len, int *accepted);

/* Write the next-token mask into row[0 .. n_words), n_words == ceil(vocab_size/32):
 * bit (t & 31) of word (t >> 5) is 1 iff token t may come next.  Stop tokens are
 * allowed exactly when the grammar can end.  After a stop token was accepted
 * the row allows only the stop tokens (so a finished row in a padded batch
 * stays valid), although accept_token refuses every token then.  *need_apply
 * is 0 iff every token in the vocabulary is allowed.  The matcher state is
 * unchanged. */
int xg2_matcher_fill_mask(xg2_matcher *matcher, int32_t *row, int64_t n_words, int *need_apply);

/* The longest byte string every continuation must start with, without a
 * partial UTF-8 character at its end (while the input ends inside a character,
 * it starts with the rest of that character).  Writes at most cap bytes and sets *len to the full length
 * (bounded by an internal limit).  The matcher state is unchanged. */
int xg2_matcher_jump_forward(xg2_matcher *matcher, char *buf, size_t cap, size_t *len);

/* The work budget of one call: a fill_mask (batch fills too), accept_token,
 * jump_forward, or one byte of accept_bytes, that needs more than `units` work units (one
 * per byte the parser takes, parser item made and vocabulary-trie node
 * stepped) fails with XG2_ERR_LIMIT "fill work limit of N units exceeded"
 * (accept, jump-forward likewise) and leaves the matcher as it was; nothing
 * half-computed is cached, so a later call is unaffected.  Ordinary fills run
 * 20k-50k units per ms; new matchers get 1,000,000 units (~20-200 ms of work),
 * forks their source's limit.  units <= 0: no limit. */
int xg2_matcher_set_work_limit(xg2_matcher *matcher, int64_t units);
int64_t xg2_matcher_work_limit(const xg2_matcher *matcher);
/* Work units the last fill_mask of this matcher spent (with a cold mask cache
 * they include computing its entries): a deterministic cost measure.  -1 for NULL. */
int64_t xg2_matcher_last_fill_work(const xg2_matcher *matcher);

/* Undo the last n accepted steps (tokens, strings, or the stop token). */
int xg2_matcher_rollback(xg2_matcher *matcher, int32_t n);

/* Back to the start of the grammar. */
int xg2_matcher_reset(xg2_matcher *matcher);

/* 1 after a stop token was accepted (or, with terminate_without_stop, while the
 * grammar is complete); 0 otherwise. */
int xg2_matcher_is_terminated(const xg2_matcher *matcher);

/* 1 iff the input accepted so far is a complete string of the grammar. */
int xg2_matcher_is_completed(const xg2_matcher *matcher);

/* Steps accepted so far (rollback can undo them all unless the history is
 * bounded). */
int32_t xg2_matcher_num_steps(const xg2_matcher *matcher);

/* Bound the matcher's history (a new matcher has neither bound; a fork copies
 * them).
 *   max_rollback_steps: -1, or rollback may undo only the last this many steps
 *     (more is XG2_ERR_ARG); the parser then forgets, from time to time, the
 *     history that neither a rollback nor a live parse can reach, so memory
 *     stays what the open rules need (flat for a regular grammar).
 *   max_history_bytes: -1, or an accept that would make the history (see
 *     xg2_matcher_history_bytes) exceed it fails with XG2_ERR_LIMIT and changes
 *     nothing. */
int xg2_matcher_set_history_limits(xg2_matcher *matcher, int32_t max_rollback_steps, int64_t max_history_bytes);

/* Bytes the matcher's history uses now (parser sets and items, the input,
 * the step list; allocations may hold up to about twice this). */
uint64_t xg2_matcher_history_bytes(const xg2_matcher *matcher);

/* A human-readable dump of the parser's current item set (for debugging; the
 * format may change).  Writes at most cap bytes and sets *len to the full length. */
int xg2_matcher_debug_state(const xg2_matcher *matcher, char *buf, size_t cap, size_t *len);

/* Copy up to cap of the matcher's stop token ids; returns how many there are. */
int32_t xg2_matcher_stop_ids(const xg2_matcher *matcher, int32_t *out, int32_t cap);

/* Fill one mask row per matcher on up to n_threads threads (a pool kept for
 * the process; the calling thread works too).
 *   bitmask: rows of row_words int32 words; matcher i fills row rows[i]
 *            (or row i when rows is NULL); every row index must be < n_rows.
 * Matchers must be distinct.  Returns the first failure, if any. */
int xg2_batch_fill_masks(xg2_matcher *const *matchers, int32_t n, int32_t *bitmask,
                         int64_t n_rows, int64_t row_words, const int32_t *rows,
                         int32_t n_threads);

/* Accept tokens[i] in matchers[i] on up to n_threads threads; accepted[i] is
 * set to 1 or 0.  Matchers must be distinct.  Returns the first failure, if any. */
int xg2_batch_accept_tokens(xg2_matcher *const *matchers, int32_t n, const int32_t *tokens, int8_t *accepted,
                            int32_t n_threads);

/* Write minus infinity into logits[r][t] for every token t < vocab_size whose bit is
 * 0 in bitmask row r (bit t % 32 of word t / 32), for the n rows r listed in rows
 * (rows 0 .. n-1 when rows is NULL).  logits: element type XG2_DTYPE_*, rows
 * logits_stride elements apart, contiguous within a row; bitmask rows bitmask_stride
 * words apart.  The caller checks shapes and indices. */
#define XG2_DTYPE_F32 0
#define XG2_DTYPE_F16 1
#define XG2_DTYPE_BF16 2
#define XG2_DTYPE_F64 3
int xg2_apply_bitmask(void *logits, int dtype, int64_t logits_stride, const int32_t *bitmask,
                      int64_t bitmask_stride, const int64_t *rows, int64_t n, int64_t vocab_size);

#endif /* XG2_H */
