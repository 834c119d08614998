/*
 * dfacache.c -- the process-wide cache of rule DFAs keyed by their NFA.
 */
#include "dfacache.h"

#include <pthread.h>

typedef struct dfa_entry dfa_entry;
struct dfa_entry {
    uint64_t hash;
    uint32_t *key;
    uint32_t n_key;
    xg2_dfa dfa;
    size_t bytes;
    dfa_entry *next; /* hash chain */
};

static struct {
    pthread_mutex_t lock;
    dfa_entry **buckets;
    uint32_t n_buckets, n;
    size_t bytes;
} cache = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

static size_t dfa_bytes(const xg2_dfa *d) {
    uint32_t nb = d->n ? d->boff[d->n] : 0, nr = d->n ? d->roff[d->n] : 0;
    return sizeof(uint32_t) * 3 * ((size_t)d->n + 1) + sizeof(xg2_brange) * nb + sizeof(xg2_redge) * nr + d->n +
           sizeof(xg2_loop_info) * d->n_loops;
}

static void entry_free(dfa_entry *e) {
    xg2__free(e->key);
    xg2__dfa_free(&e->dfa);
    xg2__free(e);
}

static void clear_locked(void) {
    for (uint32_t b = 0; b < cache.n_buckets; b++) {
        for (dfa_entry *e = cache.buckets[b], *next; e; e = next) {
            next = e->next;
            entry_free(e);
        }
        cache.buckets[b] = NULL;
    }
    cache.n = 0;
    cache.bytes = 0;
}

int xg2__dfa_cache_find(const uint32_t *key, uint32_t n_key, uint64_t h, xg2_dfa *out) {
    int found = 0;
    pthread_mutex_lock(&cache.lock);
    if (cache.n_buckets) {
        for (dfa_entry *e = cache.buckets[h & (cache.n_buckets - 1)]; e; e = e->next) {
            if (e->hash != h || e->n_key != n_key || memcmp(e->key, key, sizeof(uint32_t) * n_key)) continue;
            found = xg2__dfa_copy(&e->dfa, out) ? -1 : 1;
            break;
        }
    }
    pthread_mutex_unlock(&cache.lock);
    return found;
}

static int grow_locked(void) {
    uint32_t nb = cache.n_buckets ? cache.n_buckets * 2 : 256;
    dfa_entry **b = xg2__calloc(nb, sizeof *b);
    if (!b) return -1;
    for (uint32_t i = 0; i < cache.n_buckets; i++) {
        for (dfa_entry *e = cache.buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    }
    xg2__free(cache.buckets);
    cache.buckets = b;
    cache.n_buckets = nb;
    return 0;
}

int xg2__dfa_cache_fits(uint32_t n_key, const xg2_dfa *d) {
    return sizeof(dfa_entry) + sizeof(uint32_t) * (size_t)n_key + dfa_bytes(d) <= XG2_DFA_CACHE_ENTRY_BYTES;
}

void xg2__dfa_cache_add(const uint32_t *key, uint32_t n_key, uint64_t hash, const xg2_dfa *d) {
    dfa_entry *e = xg2__calloc(1, sizeof *e);
    if (!e) goto fail;
    e->hash = hash;
    e->n_key = n_key;
    e->key = xg2__malloc(sizeof(uint32_t) * (n_key ? n_key : 1));
    if (!e->key || xg2__dfa_copy(d, &e->dfa)) goto fail;
    memcpy(e->key, key, sizeof(uint32_t) * n_key);
    e->bytes = sizeof *e + sizeof(uint32_t) * n_key + dfa_bytes(d);
    pthread_mutex_lock(&cache.lock);
    if (cache.bytes + e->bytes > XG2_DFA_CACHE_BYTES) clear_locked();
    if (cache.n + 1 > cache.n_buckets && grow_locked()) {
        pthread_mutex_unlock(&cache.lock);
        goto fail;
    }
    for (dfa_entry *x = cache.buckets[e->hash & (cache.n_buckets - 1)]; x; x = x->next) {
        if (x->hash == e->hash && x->n_key == n_key && !memcmp(x->key, key, sizeof(uint32_t) * n_key)) {
            pthread_mutex_unlock(&cache.lock); /* another thread stored it first */
            goto fail;
        }
    }
    e->next = cache.buckets[e->hash & (cache.n_buckets - 1)];
    cache.buckets[e->hash & (cache.n_buckets - 1)] = e;
    cache.n++;
    cache.bytes += e->bytes;
    pthread_mutex_unlock(&cache.lock);
    xg2__clear_error(); /* nothing failed as far as the caller is concerned */
    return;
fail:
    if (e) entry_free(e);
    xg2__clear_error();
}
