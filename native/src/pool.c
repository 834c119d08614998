/*
 * pool.c -- the bounded, shared pool of token-mask cache entries.
 */
#include "pool.h"

void xg2__mask_entry_free(xg2_mask_entry *e) {
    if (!e) return;
    xg2__free(e->bits);
    xg2__free(e->acc);
    xg2__free(e->unc);
    xg2__free(e->unc_off);
    xg2__free(e);
}

int xg2__mask_entry_set_unc(xg2_mask_entry *e, const int32_t *ids, uint32_t n, const char *bytes,
                            const uint32_t *off) {
    if (!n) return XG2_OK;
    if (!(e->unc = xg2__malloc(sizeof(int32_t) * n))) return XG2_NOMEM();
    memcpy(e->unc, ids, sizeof(int32_t) * n);
    e->n_unc = n;
    e->bytes += sizeof(int32_t) * n;
    if (n < XG2_UNC_TEXT_MIN) return XG2_OK;
    uint64_t len = 0;
    for (uint32_t k = 0; k < n; k++) len += off[ids[k] + 1] - off[ids[k]];
    if (len > UINT32_MAX) return XG2_OK; /* (no such vocabulary; then read in place) */
    size_t size = sizeof(uint32_t) * ((size_t)n + 1) + (size_t)len;
    uint32_t *o = xg2__malloc(size);
    if (!o) return XG2_NOMEM();
    uint8_t *text = (uint8_t *)(o + n + 1);
    uint32_t at = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t from = off[ids[k]], l = off[ids[k] + 1] - from;
        o[k] = at;
        memcpy(text + at, bytes + from, l);
        at += l;
    }
    o[n] = at;
    e->unc_off = o;
    e->bytes += size;
    return XG2_OK;
}

xg2_mask_entry *xg2__mask_entry_new(const int32_t *acc, uint32_t n_acc, const int32_t *unc, uint32_t n_unc,
                                    const char *bytes, const uint32_t *off) {
    xg2_mask_entry *e = xg2__calloc(1, sizeof *e);
    if (!e) return NULL;
    e->refs = 1;
    e->bytes = sizeof *e + sizeof(int32_t) * n_acc;
    if ((n_acc && !(e->acc = xg2__malloc(sizeof(int32_t) * n_acc))) ||
        xg2__mask_entry_set_unc(e, unc, n_unc, bytes, off)) {
        xg2__mask_entry_free(e);
        return NULL;
    }
    if (n_acc) memcpy(e->acc, acc, sizeof(int32_t) * n_acc);
    e->n_acc = n_acc;
    return e;
}

void xg2__pool_release(xg2_mask_entry *e) {
    if (e && XG2_REF_DEC(e) == 0) xg2__mask_entry_free(e);
}

int xg2__pool_init(xg2_pool *p) {
    memset(p, 0, sizeof *p);
    p->limit = XG2_DEFAULT_CACHE_LIMIT;
    /* Lookups hold the lock for well under a microsecond: spin briefly before
     * sleeping, or two threads filling masks side by side fall into futex
     * hand-offs that cost more than the fills. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    int bad = pthread_mutex_init(&p->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    return bad ? xg2__fail(XG2_ERR_INTERNAL, "mutex init failed") : XG2_OK;
}

void xg2__pool_free(xg2_pool *p) {
    for (xg2_mask_entry *e = p->head, *next; e; e = next) {
        next = e->next;
        xg2__pool_release(e);
    }
    xg2__free(p->buckets);
    xg2__free(p->old);
    pthread_mutex_destroy(&p->lock);
    memset(p, 0, sizeof *p);
}

static uint32_t slot_of(uint64_t k1, uint32_t n_buckets) {
    return (uint32_t)(xg2__mix64(k1, 0x9e3779b9u) >> 17) & (n_buckets - 1);
}

/* The chain that holds (or would hold) key k1: the old table's bucket while
 * that is not moved yet, else the current table's. */
static xg2_mask_entry **chain_of(xg2_pool *p, uint64_t k1) {
    if (p->old) {
        uint32_t k = slot_of(k1, p->n_old);
        if (k >= p->moved) return &p->old[k];
    }
    return &p->buckets[slot_of(k1, p->n_buckets)];
}

/* Move up to `count` buckets of the old table. */
static void move_buckets(xg2_pool *p, uint32_t count) {
    for (; p->old && count; count--) {
        for (xg2_mask_entry *e = p->old[p->moved], *next; e; e = next) {
            next = e->hnext;
            uint32_t k = slot_of(e->k1, p->n_buckets);
            e->hnext = p->buckets[k];
            p->buckets[k] = e;
        }
        if (++p->moved == p->n_old) {
            xg2__free(p->old);
            p->old = NULL;
            p->n_old = p->moved = 0;
        }
    }
}

static void lru_unlink(xg2_pool *p, xg2_mask_entry *e) {
    if (e->prev) e->prev->next = e->next; else p->head = e->next;
    if (e->next) e->next->prev = e->prev; else p->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(xg2_pool *p, xg2_mask_entry *e) {
    e->prev = NULL;
    e->next = p->head;
    if (p->head) p->head->prev = e;
    p->head = e;
    if (!p->tail) p->tail = e;
}

static void remove_entry(xg2_pool *p, xg2_mask_entry *e) {
    xg2_mask_entry **link = chain_of(p, e->k1);
    while (*link != e) link = &(*link)->hnext;
    *link = e->hnext;
    lru_unlink(p, e);
    p->n--;
    p->bytes -= e->bytes;
    p->evictions++;
    xg2__pool_release(e); /* the pool's reference */
}

/* Evict from the end of the list down to the limit, but never `keep` (the entry
 * just inserted, which the caller is about to use); an entry looked up since it
 * came to the front is spared once, moved to the front unmarked (each is moved
 * at most once a call, so the loop ends). */
static void evict(xg2_pool *p, const xg2_mask_entry *keep) {
    while (p->bytes > p->limit && p->tail && p->tail != keep) {
        xg2_mask_entry *e = p->tail;
        if (e->used) {
            e->used = 0;
            lru_unlink(p, e);
            lru_push_front(p, e);
            continue;
        }
        remove_entry(p, e);
    }
}

/* The entry for a key, a hit counted and marked, with a reference for the
 * caller; or NULL, a miss counted.  Under the lock, the table not empty. */
static xg2_mask_entry *lookup_locked(xg2_pool *p, uint64_t k1, uint64_t k2) {
    xg2_mask_entry *e = *chain_of(p, k1);
    while (e && (e->k1 != k1 || e->k2 != k2)) e = e->hnext;
    if (!e) {
        p->misses++;
        return NULL;
    }
    XG2_REF_INC(e);
    if (!e->used) e->used = 1;
    p->hits++;
    return e;
}

xg2_mask_entry *xg2__pool_find(xg2_pool *p, uint64_t k1, uint64_t k2) {
    xg2_mask_entry *e;
    uint64_t k[2] = {k1, k2};
    xg2__pool_find_many(p, k, 1, &e);
    return e;
}

void xg2__pool_find_many(xg2_pool *p, const uint64_t *k, uint32_t n, xg2_mask_entry **out) {
    pthread_mutex_lock(&p->lock);
    if (!p->n_buckets) {
        for (uint32_t i = 0; i < n; i++) out[i] = NULL;
        p->misses += n;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    move_buckets(p, 2);
    if (n > 1) { /* (fetch ahead: the buckets, then the chains' first entries) */
        for (uint32_t i = 0; i < n; i++) __builtin_prefetch(chain_of(p, k[2 * i]));
        for (uint32_t i = 0; i < n; i++) {
            const xg2_mask_entry *head = *chain_of(p, k[2 * i]);
            if (head) __builtin_prefetch(head);
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if ((out[i] = lookup_locked(p, k[2 * i], k[2 * i + 1])) && out[i]->acc) __builtin_prefetch(out[i]->acc);
    pthread_mutex_unlock(&p->lock);
}

/* Start moving to a table twice the size (the previous move is finished
 * first; it always is by then: n doubles between two grows, and every insert
 * moves two buckets). */
static int grow(xg2_pool *p) {
    uint32_t nb = p->n_buckets ? p->n_buckets * 2 : 1024;
    xg2_mask_entry **b = xg2__calloc(nb, sizeof *b);
    if (!b) return XG2_NOMEM();
    move_buckets(p, UINT32_MAX);
    p->old = p->buckets;
    p->n_old = p->n_buckets;
    p->moved = 0;
    p->buckets = b;
    p->n_buckets = nb;
    if (!p->old) p->n_old = 0;
    return XG2_OK;
}

xg2_mask_entry *xg2__pool_insert(xg2_pool *p, xg2_mask_entry *e) {
    pthread_mutex_lock(&p->lock);
    if (p->n + 1 > p->n_buckets && grow(p)) {
        pthread_mutex_unlock(&p->lock);
        xg2__mask_entry_free(e);
        return NULL;
    }
    move_buckets(p, 2);
    xg2_mask_entry **chain = chain_of(p, e->k1);
    for (xg2_mask_entry *x = *chain; x; x = x->hnext) {
        if (x->k1 == e->k1 && x->k2 == e->k2) { /* another thread got there first */
            XG2_REF_INC(x);
            pthread_mutex_unlock(&p->lock);
            xg2__mask_entry_free(e);
            return x;
        }
    }
    e->refs = 2; /* the caller's and the pool's */
    e->hnext = *chain;
    *chain = e;
    lru_push_front(p, e);
    p->n++;
    p->bytes += e->bytes;
    evict(p, e);
    pthread_mutex_unlock(&p->lock);
    return e;
}

void xg2__pool_set_limit(xg2_pool *p, size_t limit) {
    pthread_mutex_lock(&p->lock);
    p->limit = limit;
    evict(p, NULL);
    pthread_mutex_unlock(&p->lock);
}

void xg2__pool_clear(xg2_pool *p) {
    pthread_mutex_lock(&p->lock);
    while (p->tail) remove_entry(p, p->tail);
    pthread_mutex_unlock(&p->lock);
}
