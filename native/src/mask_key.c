/*
 * mask_key.c -- the key of a kernel item's mask entry (maskcache.h): its
 * state's structural key and, for a counted state, how far its count is from
 * the bounds -- as far as a token can tell (beyond xg2__count_far every count
 * masks alike).
 */
#include "maskcache.h"

void xg2__mask_key(const xg2_grammar *g, const xg2_vocab *v, const xg2_item *it, uint64_t *k1, uint64_t *k2) {
    const xg2_state *st = &g->states[it->state];
    uint32_t bucket = 0;
    int32_t min, max;
    if (st->flags & SF_REPEAT) {
        min = g->rules[st->rule].min;
        max = g->rules[st->rule].max;
    } else if (st->loop) {
        min = g->loops[(st->loop >> 1) - 1].min;
        max = g->loops[(st->loop >> 1) - 1].max;
    } else {
        min = max = 0;
    }
    if (st->flags & SF_REPEAT || st->loop) {
        uint32_t far = xg2__count_far(v);
        if (st->loop) far = xg2__loop_far(g, st->loop >> 1, far);
        uint32_t lo = it->count < (uint32_t)min ? (uint32_t)min - it->count : 0;
        uint32_t hi = max < 0 ? far : (uint32_t)max - it->count;
        if (lo > far) lo = far;
        if (hi > far) hi = far;
        bucket = lo << 16 | hi;
    }
    uint64_t key[2];
    xg2__state_key(g, it->state, key);
    *k1 = xg2__mix64(key[0], bucket);
    *k2 = xg2__mix64(key[1], bucket ^ 0x85ebca6bu);
}
