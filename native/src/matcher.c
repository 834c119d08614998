/*
 * matcher.c -- one generation: accept tokens, fill masks, jump forward,
 * roll back.
 *
 * History is a list of steps (a token, a string, or the stop token); step
 * base + k ends at parser length steps[k].  Rolling back n steps pops the
 * parser to steps[count - n].  The stop token is a step that consumes no bytes.
 *
 * Bounded history: with max_rollback >= 0 only the last rb_avail <= max_rollback
 * steps can be rolled back, so once the history has grown by half since the
 * last compaction (and by COMPACT_SLACK at least: amortised O(1) per byte) the
 * parser forgets what lies before them and steps drops its older entries
 * (base counts them).  max_history bounds the bytes the history may hold.
 */
#include "mask.h"
#include "token_edges.h"

#define COMPACT_SLACK (16u << 10)

struct xg2_matcher {
    xg2_compiled *c;
    const xg2_grammar *g;
    const xg2_vocab *v;
    xg2_parser parser;
    xg2_u32vec steps;   /* steps.a[k]: parser length after base + k steps */
    uint32_t base;      /* steps forgotten by compaction (0 unless max_rollback >= 0) */
    uint32_t stop_step; /* step number of the stop token (absolute), 0 if none */
    int32_t max_rollback;  /* -1: unlimited */
    uint32_t rb_avail;     /* steps rollback may undo now (with max_rollback >= 0) */
    uint64_t max_history;  /* history bytes allowed, 0: unlimited */
    uint64_t live;         /* history bytes right after the last compaction */
    int32_t *stop_ids;
    int32_t n_stop;
    int terminate_without_stop;
    int busy; /* set while a call runs: one matcher, one thread */
    xg2_mask_memo memo; /* cache entries of the last fill */
    int64_t work_limit; /* work units per fill / accept (xg2_matcher_set_work_limit); <= 0: none */
    int64_t last_fill_work; /* units the last fill spent (xg2_matcher_last_fill_work) */
};

/* Give the parser this call's work budget. */
static void start_work(xg2_matcher *m) {
    m->parser.work_left = m->work_limit > 0 ? m->work_limit : INT64_MAX;
    m->parser.cur_tok = m->base + m->steps.n; /* the next step's number (rule budgets count steps) */
}

/* rc, or the work limit's own message if that is what stopped the call. */
static int work_status(xg2_matcher *m, int rc, const char *what) {
    if (rc == XG2_ERR_LIMIT && xg2__work_exhausted(&m->parser))
        rc = xg2__fail(XG2_ERR_LIMIT, "%s work limit of %lld units exceeded", what, (long long)m->work_limit);
    m->parser.work_left = INT64_MAX;
    return rc;
}

/* Enter/leave a matcher call; a second concurrent caller gets XG2_ERR_STATE. */
static int enter(xg2_matcher *m) {
    xg2__clear_error();
    if (!m) return xg2__fail(XG2_ERR_ARG, "matcher is NULL");
    if (__atomic_exchange_n(&m->busy, 1, __ATOMIC_ACQUIRE))
        return xg2__fail(XG2_ERR_STATE, "the matcher is being used by another thread");
    return XG2_OK;
}
static void leave(xg2_matcher *m) { __atomic_store_n(&m->busy, 0, __ATOMIC_RELEASE); }

static int is_stop(const xg2_matcher *m, int32_t t) {
    for (int32_t i = 0; i < m->n_stop; i++)
        if (m->stop_ids[i] == t) return 1;
    return 0;
}

int xg2_matcher_new(const xg2_compiled *c, const int32_t *stop_ids, int32_t n_stop, int tws,
                    xg2_matcher **out) {
    xg2__clear_error();
    if (!c || !out || (n_stop > 0 && !stop_ids)) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    const xg2_vocab *v = c->v;
    if (n_stop < 0) {
        stop_ids = v->stop_ids;
        n_stop = v->n_stop;
    }
    for (int32_t i = 0; i < n_stop; i++)
        if (stop_ids[i] < 0 || stop_ids[i] >= v->vocab_size)
            return xg2__fail(XG2_ERR_ARG, "stop token id %d is out of range [0, %d)", stop_ids[i], v->vocab_size);
    xg2_matcher *m = xg2__calloc(1, sizeof *m);
    if (!m) return XG2_NOMEM();
    m->stop_ids = xg2__malloc(sizeof(int32_t) * (size_t)(n_stop ? n_stop : 1));
    if (!m->stop_ids || vec_push(&m->steps, 0)) goto oom;
    if (n_stop) memcpy(m->stop_ids, stop_ids, sizeof(int32_t) * (size_t)n_stop);
    m->n_stop = n_stop;
    m->terminate_without_stop = tws != 0;
    m->work_limit = XG2_DEFAULT_STEP_WORK;
    m->max_rollback = -1;
    int rc = xg2__parser_init(&m->parser, c->g);
    if (rc) {
        vec_free(&m->steps);
        xg2__free(m->stop_ids);
        xg2__free(m);
        return rc;
    }
    xg2__compiled_retain(c);
    m->c = (xg2_compiled *)c;
    m->g = c->g;
    m->v = v;
    *out = m;
    return XG2_OK;
oom:
    vec_free(&m->steps);
    xg2__free(m->stop_ids);
    xg2__free(m);
    return XG2_NOMEM();
}

void xg2_matcher_free(xg2_matcher *m) {
    if (!m) return;
    xg2__parser_free(&m->parser);
    xg2__mask_memo_clear(&m->memo);
    vec_free(&m->steps);
    xg2__free(m->stop_ids);
    xg2_compiled_free(m->c);
    xg2__free(m);
}

int xg2_matcher_fork(const xg2_matcher *src, xg2_matcher **out) {
    xg2_matcher *s = (xg2_matcher *)src;
    int rc = enter(s);
    if (rc) return rc;
    if (!out) { leave(s); return xg2__fail(XG2_ERR_ARG, "out is NULL"); }
    xg2_matcher *m = xg2__calloc(1, sizeof *m);
    if (!m) { leave(s); return XG2_NOMEM(); }
    *m = *s;
    m->busy = 0;
    m->memo.n = 0; /* its references are the source's */
    m->steps.a = NULL;
    m->steps.n = m->steps.cap = 0;
    m->stop_ids = xg2__malloc(sizeof(int32_t) * (size_t)(s->n_stop ? s->n_stop : 1));
    if (!m->stop_ids || vec_reserve(&m->steps, s->steps.n) || (rc = xg2__parser_copy(&m->parser, &s->parser))) {
        vec_free(&m->steps);
        xg2__free(m->stop_ids);
        xg2__free(m);
        leave(s);
        return rc ? rc : XG2_NOMEM();
    }
    if (s->n_stop) memcpy(m->stop_ids, s->stop_ids, sizeof(int32_t) * (size_t)s->n_stop);
    memcpy(m->steps.a, s->steps.a, sizeof(uint32_t) * s->steps.n);
    m->steps.n = s->steps.n;
    xg2__compiled_retain(m->c);
    leave(s);
    *out = m;
    return XG2_OK;
}

static uint64_t history_bytes(const xg2_matcher *m) {
    return xg2__parser_history_bytes(&m->parser) + (uint64_t)m->steps.n * sizeof(uint32_t);
}

/* Push bytes; on rejection or error undo them.  Returns 1/0 or -status.
 * per_byte: each byte gets the whole work budget (a string of any length may
 * be accepted; no one byte may cost more than the limit). */
static int push_all(xg2_matcher *m, const uint8_t *b, size_t n, int per_byte) {
    for (size_t i = 0; i < n; i++) {
        if (per_byte) start_work(m);
        int r = xg2__parser_push(&m->parser, b[i]);
        if (r > 0 && m->max_history && history_bytes(m) > m->max_history) {
            uint64_t have = history_bytes(m);
            xg2__parser_pop(&m->parser, (uint32_t)i + 1);
            return -xg2__fail(XG2_ERR_LIMIT,
                              "the matcher's history would exceed max_history_bytes = %llu (%llu bytes at byte %zu "
                              "of this step; set max_rollback_tokens so that old history can be dropped, or raise "
                              "the limit)",
                              (unsigned long long)m->max_history, (unsigned long long)have, i + 1);
        }
        if (r <= 0) {
            xg2__parser_pop(&m->parser, (uint32_t)i);
            return r;
        }
    }
    return 1;
}

/* Forget the history no rollback can reach, when it has grown enough since
 * the last time: by 1/den of what was live then, and by `floor` bytes at least.
 * Optional: out of memory just leaves it for later.  1 if it shrank. */
static int compact(xg2_matcher *m, uint64_t den, uint64_t floor) {
    uint64_t used = history_bytes(m);
    uint64_t slack = m->live / den;
    if (slack < floor) slack = floor;
    if (m->max_rollback < 0 || used < m->live + slack) return 0;
    uint32_t drop = m->steps.n - 1 - m->rb_avail; /* entries before the oldest rollback target */
    uint32_t from = m->steps.a[drop], nf;
    if (xg2__parser_compact(&m->parser, from, &nf) == XG2_OK) {
        for (uint32_t k = 0; k <= m->rb_avail; k++) m->steps.a[k] = m->steps.a[drop + k] - from + nf;
        m->steps.n = m->rb_avail + 1;
        m->base += drop;
    }
    m->live = history_bytes(m);
    return m->live < used;
}

/* After a step. */
static void maybe_compact(xg2_matcher *m) { compact(m, 2, COMPACT_SLACK); }

/* Push a step's bytes; if that passes max_history, compact and try again when
 * the history grew by an eighth since the last compaction (still amortised). */
static int push_step(xg2_matcher *m, const uint8_t *b, size_t n, int per_byte) {
    int r = push_all(m, b, n, per_byte);
    if (r == -XG2_ERR_LIMIT && !xg2__work_exhausted(&m->parser) && compact(m, 8, 1)) {
        start_work(m);
        r = push_all(m, b, n, per_byte);
    }
    return r;
}

static int record_step(xg2_matcher *m) {
    if (vec_push(&m->steps, xg2__parser_len(&m->parser))) return XG2_NOMEM();
    if (m->max_rollback >= 0 && m->rb_avail < (uint32_t)m->max_rollback) m->rb_avail++;
    return XG2_OK;
}

/* Token t over the token edges of the current set (and its bytes, if text),
 * within max_history as push_step: 1 if taken, 0 if no edge takes it or
 * nothing survives, or -status. */
static int token_step(xg2_matcher *m, int32_t t) {
    const xg2_vocab *v = m->v;
    xg2_u32vec edge = {0};
    int r = xg2__token_edge_items(&m->parser, v, t, &edge);
    if (r || !edge.n) {
        vec_free(&edge);
        return r ? -r : 0;
    }
    const uint8_t *b = (const uint8_t *)v->bytes + v->off[t];
    uint32_t len = v->off[t + 1] - v->off[t], before = xg2__parser_len(&m->parser);
    for (int attempt = 0; attempt < 2; attempt++) {
        start_work(m);
        r = xg2__parser_push_token(&m->parser, b, len, v->flags[t] == 0, edge.a, edge.n);
        if (r <= 0 || !m->max_history || history_bytes(m) <= m->max_history) break;
        uint64_t have = history_bytes(m);
        xg2__parser_pop(&m->parser, xg2__parser_len(&m->parser) - before);
        if (attempt == 0 && compact(m, 8, 1)) { /* positions renumbered: find the edges again */
            before = xg2__parser_len(&m->parser);
            if ((r = xg2__token_edge_items(&m->parser, v, t, &edge))) { r = -r; break; }
            continue;
        }
        r = -xg2__fail(XG2_ERR_LIMIT, "the matcher's history would exceed max_history_bytes = %llu (%llu bytes at this step; "
                       "set max_rollback_tokens so that old history can be dropped, or raise the limit)",
                       (unsigned long long)m->max_history, (unsigned long long)have);
        break;
    }
    vec_free(&edge);
    return r;
}

int xg2_matcher_accept_token(xg2_matcher *m, int32_t t, int *accepted) {
    int rc = enter(m);
    if (rc) return rc;
    if (!accepted) { rc = xg2__fail(XG2_ERR_ARG, "accepted is NULL"); goto out; }
    *accepted = 0;
    const xg2_vocab *v = m->v;
    if (t < 0 || t >= v->vocab_size) {
        rc = xg2__fail(XG2_ERR_ARG, "token id %d is out of range [0, %d)", t, v->vocab_size);
        goto out;
    }
    if (m->stop_step) goto out; /* terminated: every token is rejected (as XGrammar) */
    if (m->g->token_kinds) { /* a token edge first: a stop token may be the grammar's last terminal */
        uint32_t before = xg2__parser_len(&m->parser);
        int r = token_step(m, t);
        if (r < 0) { rc = work_status(m, -r, "accept"); goto out; }
        if (r) {
            if ((rc = record_step(m))) { xg2__parser_pop(&m->parser, xg2__parser_len(&m->parser) - before); goto out; }
            if (is_stop(m, t) && xg2__parser_can_end(&m->parser)) m->stop_step = m->base + m->steps.n - 1;
            *accepted = 1;
            maybe_compact(m);
            goto out;
        }
    }
    if (is_stop(m, t)) {
        if (xg2__parser_can_end(&m->parser)) {
            if ((rc = record_step(m))) goto out;
            m->stop_step = m->base + m->steps.n - 1;
            *accepted = 1;
            maybe_compact(m);
        }
        goto out;
    }
    if (v->flags[t]) goto out; /* special, padding, or a stop token this matcher does not use */
    uint32_t len = v->off[t + 1] - v->off[t];
    start_work(m);
    int r = push_step(m, (const uint8_t *)v->bytes + v->off[t], len, 0);
    if (r < 0) { rc = work_status(m, -r, "accept"); goto out; }
    if (r) {
        if ((rc = record_step(m))) { xg2__parser_pop(&m->parser, len); goto out; }
        *accepted = 1;
        maybe_compact(m);
    }
out:
    leave(m);
    return rc;
}

int xg2_matcher_accept_bytes(xg2_matcher *m, const char *data, size_t len, int *accepted) {
    int rc = enter(m);
    if (rc) return rc;
    if (!accepted || (len && !data)) { rc = xg2__fail(XG2_ERR_ARG, "NULL argument"); goto out; }
    *accepted = 0;
    if (m->stop_step) goto out;
    start_work(m);
    int r = push_step(m, (const uint8_t *)data, len, 1);
    if (r < 0) { rc = work_status(m, -r, "accept"); goto out; }
    if (r) {
        if ((rc = record_step(m))) { xg2__parser_pop(&m->parser, (uint32_t)len); goto out; }
        *accepted = 1;
        maybe_compact(m);
    }
out:
    leave(m);
    return rc;
}

static void set_stop_bits(const xg2_matcher *m, uint32_t *row) {
    for (int32_t i = 0; i < m->n_stop; i++) {
        uint32_t t = (uint32_t)m->stop_ids[i];
        row[t >> 5] |= 1u << (t & 31);
    }
}

/* Shared by the single and the batch fill (the caller holds the matcher). */
XG2_HIDDEN int xg2__matcher_fill(xg2_matcher *m, uint32_t *row, int *need_apply) {
    const xg2_vocab *v = m->v;
    size_t words = v->words;
    if (m->stop_step) {
        memset(row, 0, words * sizeof(uint32_t));
        set_stop_bits(m, row);
    } else {
        start_work(m);
        int64_t budget = m->parser.work_left;
        int rc, empty = 0;
        if (xg2__parser_budget_near(&m->parser, v->max_token_len)) { /* cached entries know no budgets */
            memset(row, 0, words * sizeof(uint32_t));
            rc = xg2__mask_walk(&m->parser, v, row);
        } else {
            /* (a token-level grammar's fill may leave an empty row to token_mask_add) */
            rc = xg2__mask_fill(&m->parser, v, row, &m->memo, m->g->token_kinds ? &empty : NULL);
        }
        m->last_fill_work = budget - m->parser.work_left;
        if ((rc = work_status(m, rc, "fill"))) return rc;
        if (m->g->token_kinds && (rc = xg2__token_mask_add(&m->parser, m->c, row, empty))) return rc;
        if (xg2__parser_can_end(&m->parser)) set_stop_bits(m, row);
    }
    /* need_apply is 0 only if every id < vocab_size is allowed.  The last word
     * first: a mask of nearly every token (free text) lacks the special tokens,
     * which vocabularies put at the end, so this seldom scans the row. */
    uint32_t tail = (uint32_t)v->vocab_size & 31;
    uint32_t last_mask = tail ? (1u << tail) - 1 : 0xFFFFFFFFu;
    int full = (row[words - 1] & last_mask) == last_mask;
    for (size_t w = 0; w + 1 < words && full; w++) full = row[w] == 0xFFFFFFFFu;
    if (need_apply) *need_apply = !full;
    return XG2_OK;
}

int xg2_matcher_fill_mask(xg2_matcher *m, int32_t *row, int64_t n_words, int *need_apply) {
    int rc = enter(m);
    if (rc) return rc;
    int64_t want = ((int64_t)m->v->vocab_size + 31) / 32;
    if (!row) rc = xg2__fail(XG2_ERR_ARG, "bitmask row is NULL");
    else if (n_words != want)
        rc = xg2__fail(XG2_ERR_ARG, "bitmask row has %lld int32 words; this vocabulary needs %lld",
                       (long long)n_words, (long long)want);
    else rc = xg2__matcher_fill(m, (uint32_t *)row, need_apply);
    leave(m);
    return rc;
}

int64_t xg2_matcher_last_fill_work(const xg2_matcher *m) { return m ? m->last_fill_work : -1; }

int xg2_matcher_jump_forward(xg2_matcher *m, char *buf, size_t cap, size_t *len) {
    int rc = enter(m);
    if (rc) return rc;
    if (!len || (cap && !buf)) { leave(m); return xg2__fail(XG2_ERR_ARG, "NULL argument"); }
    uint8_t out[XG2_MAX_JUMP_FORWARD];
    size_t n = 0;
    if (!m->stop_step) {
        start_work(m);
        while (n < sizeof out && !xg2__parser_can_end(&m->parser)) {
            /* Candidates from the items' edges, then each checked by the parser
             * (lookahead assertions and loop counts can rule some out). */
            xg2_byteset next;
            xg2__parser_next_bytes(&m->parser, &next);
            int only = -1, count = 0;
            for (int c = 0; c < 256 && count < 2 && !rc; c++) {
                if (!byteset_has(&next, (unsigned)c)) continue;
                int r = xg2__parser_push(&m->parser, (uint8_t)c);
                if (r < 0) { rc = -r; break; }
                if (r) {
                    xg2__parser_pop(&m->parser, 1);
                    only = c;
                    count++;
                }
            }
            if (rc || count != 1) break;
            int r = xg2__parser_push(&m->parser, (uint8_t)only);
            if (r < 0) { rc = -r; break; }
            if (!r) break;
            out[n++] = (uint8_t)only;
        }
        xg2__parser_pop(&m->parser, (uint32_t)n);
        rc = work_status(m, rc, "jump-forward");
    }
    /* No partial UTF-8 character at the end.  (Inside a character the bytes
     * start with its continuation; the str API of the Python layer drops that.) */
    size_t k = n;
    while (k > 0 && (out[k - 1] & 0xC0) == 0x80) k--;
    if (k > 0 && out[k - 1] >= 0xC0) {
        size_t need = out[k - 1] >= 0xF0 ? 4 : out[k - 1] >= 0xE0 ? 3 : 2;
        if (n - (k - 1) < need) n = k - 1;
    }
    if (!rc) {
        *len = n;
        if (cap) memcpy(buf, out, n < cap ? n : cap);
    }
    leave(m);
    return rc;
}

int xg2_matcher_set_work_limit(xg2_matcher *m, int64_t units) {
    int rc = enter(m);
    if (rc) return rc;
    m->work_limit = units > 0 ? units : 0;
    leave(m);
    return XG2_OK;
}

int64_t xg2_matcher_work_limit(const xg2_matcher *m) { return m ? m->work_limit : 0; }

int xg2_matcher_rollback(xg2_matcher *m, int32_t n) {
    int rc = enter(m);
    if (rc) return rc;
    uint32_t have = m->base + m->steps.n - 1;
    uint32_t avail = m->max_rollback >= 0 ? m->rb_avail : m->steps.n - 1;
    if (n < 0 || (uint32_t)n > have) {
        rc = xg2__fail(XG2_ERR_ARG, "cannot roll back %d steps: only %u were accepted", n, have);
    } else if ((uint32_t)n > avail) {
        rc = xg2__fail(XG2_ERR_ARG, "cannot roll back %d steps: max_rollback_tokens is %d, and %u steps can be rolled back now",
                       n, m->max_rollback, avail);
    } else {
        uint32_t keep = m->steps.n - 1 - (uint32_t)n; /* index into steps */
        xg2__parser_pop(&m->parser, xg2__parser_len(&m->parser) - m->steps.a[keep]);
        m->steps.n = keep + 1;
        if (m->stop_step > m->base + keep) m->stop_step = 0;
        if (m->max_rollback >= 0) m->rb_avail -= (uint32_t)n;
    }
    leave(m);
    return rc;
}

int xg2_matcher_reset(xg2_matcher *m) {
    int rc = enter(m);
    if (rc) return rc;
    xg2__parser_reset(&m->parser); /* set 0 is kept whole by compaction */
    m->steps.a[0] = 0;
    m->steps.n = 1;
    m->base = m->stop_step = m->rb_avail = 0;
    m->live = 0;
    leave(m);
    return XG2_OK;
}

int xg2_matcher_is_terminated(const xg2_matcher *m) {
    if (!m) return 0;
    return m->stop_step != 0 || (m->terminate_without_stop && xg2__parser_can_end(&m->parser));
}

int xg2_matcher_is_completed(const xg2_matcher *m) { return m ? xg2__parser_can_end(&m->parser) : 0; }

int32_t xg2_matcher_num_steps(const xg2_matcher *m) { return m ? (int32_t)(m->base + m->steps.n - 1) : 0; }

int xg2_matcher_set_history_limits(xg2_matcher *m, int32_t max_rollback_steps, int64_t max_history_bytes) {
    int rc = enter(m);
    if (rc) return rc;
    if (max_rollback_steps < -1) {
        rc = xg2__fail(XG2_ERR_ARG, "max_rollback_tokens must be -1 (unlimited) or >= 0, got %d", max_rollback_steps);
    } else if (max_history_bytes < -1 || max_history_bytes == 0) {
        rc = xg2__fail(XG2_ERR_ARG, "max_history_bytes must be -1 (unlimited) or positive, got %lld",
                       (long long)max_history_bytes);
    } else {
        uint32_t kept = m->steps.n - 1;
        m->max_rollback = max_rollback_steps;
        m->rb_avail = max_rollback_steps < 0 ? 0 : kept < (uint32_t)max_rollback_steps ? kept : (uint32_t)max_rollback_steps;
        m->max_history = max_history_bytes < 0 ? 0 : (uint64_t)max_history_bytes;
        m->live = 0; /* the next accept at the limit may compact */
    }
    leave(m);
    return rc;
}

uint64_t xg2_matcher_history_bytes(const xg2_matcher *m) { return m ? history_bytes(m) : 0; }

int32_t xg2_matcher_stop_ids(const xg2_matcher *m, int32_t *out, int32_t cap) {
    if (!m) return 0;
    for (int32_t i = 0; i < m->n_stop && i < cap && out; i++) out[i] = m->stop_ids[i];
    return m->n_stop;
}

/* For the batch fill. */
XG2_HIDDEN int xg2__matcher_enter(xg2_matcher *m) { return enter(m); }
XG2_HIDDEN void xg2__matcher_leave(xg2_matcher *m) { leave(m); }
XG2_HIDDEN int32_t xg2__matcher_vocab_size(const xg2_matcher *m) { return m->v->vocab_size; }

int xg2_matcher_debug_state(const xg2_matcher *m, char *buf, size_t cap, size_t *len) {
    if (!m || !len || (cap && !buf)) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    const xg2_parser *p = &m->parser;
    const xg2_grammar *g = m->g;
    xg2_charvec o = {0};
    uint32_t k = p->ns - 1;
    int bad = xg2__charvec_printf(&o, "position %u, %u steps, %s\n", k, m->base + m->steps.n - 1,
                                  m->stop_step ? "terminated" : xg2__parser_can_end(p) ? "can end" : "open");
    for (uint32_t i = p->set_start.a[k]; i < p->set_start.a[k + 1] && !bad; i++) {
        const xg2_item *it = &p->items.a[i];
        const xg2_state *st = &g->states[it->state];
        bad = xg2__charvec_printf(&o, "  %s state %u (+%u)%s%s origin %u count %u guard %u\n",
                                  xg2__ir_name(&g->ir, st->rule), it->state, it->state - g->rules[st->rule].start,
                                  (st->flags & SF_FINAL) ? " final" : "", (st->flags & SF_REPEAT) ? " repeat" : "",
                                  it->origin, it->count, it->guard);
    }
    if (bad) { vec_free(&o); return XG2_NOMEM(); }
    *len = o.n;
    if (cap) memcpy(buf, o.a, o.n < cap ? o.n : cap);
    vec_free(&o);
    return XG2_OK;
}
