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
    dfa_entry *next;          /* hash chain */
    dfa_entry *newer, *older; /* recency list */
};

static struct {
    pthread_mutex_t lock;
    dfa_entry **buckets;
    uint32_t n_buckets, n;
    size_t bytes;
    dfa_entry *newest, *oldest;
    size_t limit;
} cache = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, NULL, NULL, XG2_DFA_CACHE_BYTES};

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

static void unlink_recent(dfa_entry *e) {
    if (e->newer) e->newer->older = e->older;
    else cache.newest = e->older;
    if (e->older) e->older->newer = e->newer;
    else cache.oldest = e->newer;
    e->newer = e->older = NULL;
}

static void push_newest(dfa_entry *e) {
    e->older = cache.newest;
    e->newer = NULL;
    if (cache.newest) cache.newest->newer = e;
    cache.newest = e;
    if (!cache.oldest) cache.oldest = e;
}

/* Drop the least recently used entry (from its hash chain too). */
static void evict_oldest_locked(void) {
    dfa_entry *e = cache.oldest;
    unlink_recent(e);
    dfa_entry **p = &cache.buckets[e->hash & (cache.n_buckets - 1)];
    while (*p != e) p = &(*p)->next;
    *p = e->next;
    cache.n--;
    cache.bytes -= e->bytes;
    entry_free(e);
}

int xg2__dfa_cache_find(const uint32_t *key, uint32_t n_key, uint64_t h, xg2_dfa *out) {
    int found = 0;
    pthread_mutex_lock(&cache.lock);
    if (cache.n_buckets) {
        for (dfa_entry *e = cache.buckets[h & (cache.n_buckets - 1)]; e; e = e->next) {
            if (e->hash != h || e->n_key != n_key || memcmp(e->key, key, sizeof(uint32_t) * n_key)) continue;
            found = xg2__dfa_copy(&e->dfa, out) ? -1 : 1;
            unlink_recent(e);
            push_newest(e);
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
    if (e->bytes > cache.limit) {
        pthread_mutex_unlock(&cache.lock);
        goto fail;
    }
    while (cache.oldest && cache.bytes + e->bytes > cache.limit) evict_oldest_locked();
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
    push_newest(e);
    cache.n++;
    cache.bytes += e->bytes;
    pthread_mutex_unlock(&cache.lock);
    xg2__clear_error(); /* nothing failed as far as the caller is concerned */
    return;
fail:
    if (e) entry_free(e);
    xg2__clear_error();
}

int xg2_rule_cache_set_limit(size_t bytes) {
    pthread_mutex_lock(&cache.lock);
    cache.limit = bytes;
    while (cache.oldest && cache.bytes > cache.limit) evict_oldest_locked();
    pthread_mutex_unlock(&cache.lock);
    return XG2_OK;
}

size_t xg2_rule_cache_bytes(void) {
    pthread_mutex_lock(&cache.lock);
    size_t b = cache.bytes;
    pthread_mutex_unlock(&cache.lock);
    return b;
}
