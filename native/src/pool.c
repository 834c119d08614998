/*
 * pool.c -- the bounded, shared pool of token-mask cache entries.
 */
#include "pool.h"

void xg2__mask_entry_free(xg2_mask_entry *e) {
    if (!e) return;
    xg2__free(e->bits);
    xg2__free(e->acc);
    xg2__free(e->unc);
    xg2__free(e);
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
    pthread_mutex_destroy(&p->lock);
    memset(p, 0, sizeof *p);
}

static uint32_t bucket_of(const xg2_pool *p, uint64_t k1) {
    return (uint32_t)(xg2__mix64(k1, 0x9e3779b9u) >> 17) & (p->n_buckets - 1);
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
    xg2_mask_entry **link = &p->buckets[bucket_of(p, e->k1)];
    while (*link != e) link = &(*link)->hnext;
    *link = e->hnext;
    lru_unlink(p, e);
    p->n--;
    p->bytes -= e->bytes;
    p->evictions++;
    xg2__pool_release(e); /* the pool's reference */
}

/* Evict least recently used entries down to the limit, but never `keep` (the
 * entry just inserted, which the caller is about to use). */
static void evict(xg2_pool *p, const xg2_mask_entry *keep) {
    while (p->bytes > p->limit && p->tail && p->tail != keep) remove_entry(p, p->tail);
}

xg2_mask_entry *xg2__pool_find(xg2_pool *p, uint64_t k1, uint64_t k2) {
    pthread_mutex_lock(&p->lock);
    xg2_mask_entry *e = NULL;
    if (p->n_buckets) {
        for (e = p->buckets[bucket_of(p, k1)]; e; e = e->hnext)
            if (e->k1 == k1 && e->k2 == k2) break;
    }
    if (e) {
        XG2_REF_INC(e);
        if (p->head != e) {
            lru_unlink(p, e);
            lru_push_front(p, e);
        }
        p->hits++;
    } else {
        p->misses++;
    }
    pthread_mutex_unlock(&p->lock);
    return e;
}

static int grow(xg2_pool *p) {
    uint32_t nb = p->n_buckets ? p->n_buckets * 2 : 1024;
    xg2_mask_entry **b = xg2__calloc(nb, sizeof *b);
    if (!b) return XG2_NOMEM();
    xg2_mask_entry **old = p->buckets;
    uint32_t ob = p->n_buckets;
    p->buckets = b;
    p->n_buckets = nb;
    for (uint32_t i = 0; i < ob; i++) {
        for (xg2_mask_entry *e = old[i], *next; e; e = next) {
            next = e->hnext;
            uint32_t k = bucket_of(p, e->k1);
            e->hnext = b[k];
            b[k] = e;
        }
    }
    xg2__free(old);
    return XG2_OK;
}

xg2_mask_entry *xg2__pool_insert(xg2_pool *p, xg2_mask_entry *e) {
    pthread_mutex_lock(&p->lock);
    if (p->n + 1 > p->n_buckets && grow(p)) {
        pthread_mutex_unlock(&p->lock);
        xg2__mask_entry_free(e);
        return NULL;
    }
    uint32_t k = bucket_of(p, e->k1);
    for (xg2_mask_entry *x = p->buckets[k]; x; x = x->hnext) {
        if (x->k1 == e->k1 && x->k2 == e->k2) { /* another thread got there first */
            XG2_REF_INC(x);
            pthread_mutex_unlock(&p->lock);
            xg2__mask_entry_free(e);
            return x;
        }
    }
    e->refs = 2; /* the caller's and the pool's */
    e->hnext = p->buckets[k];
    p->buckets[k] = e;
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
