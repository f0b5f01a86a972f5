/* bench_hist.c - log-linear latency histogram: record, merge, percentiles. */
#include "bench_hist.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#define HIST_LINEAR (1u << BENCH_HIST_SUB_BITS)     /* values with a bucket each */
#define HIST_HALF (1u << (BENCH_HIST_SUB_BITS - 1)) /* buckets per power of two */

void bench_hist_init(struct bench_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

unsigned bench_hist_bucket_of(uint64_t value)
{
    if (value < HIST_LINEAR)
        return (unsigned)value;
    unsigned msb = 63u - (unsigned)__builtin_clzll(value);
    unsigned shift = msb - BENCH_HIST_SUB_BITS + 1u; /* >= 1 */
    /* value >> shift lies in [HIST_HALF, HIST_LINEAR) */
    return shift * HIST_HALF + (unsigned)(value >> shift);
}

uint64_t bench_hist_bucket_high(unsigned bucket)
{
    assert(bucket < BENCH_HIST_BUCKETS);
    if (bucket < HIST_LINEAR)
        return bucket;
    unsigned shift = (bucket - HIST_LINEAR) / HIST_HALF + 1u;
    uint64_t sub = bucket - shift * HIST_HALF;
    return ((sub + 1u) << shift) - 1u; /* unsigned wrap gives UINT64_MAX for the last bucket */
}

void bench_hist_record(struct bench_hist *h, uint64_t value)
{
    h->buckets[bench_hist_bucket_of(value)]++;
    h->count++;
    h->sum += value;
    if (value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
}

void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src)
{
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t bench_hist_percentile(const struct bench_hist *h, double pct)
{
    assert(pct > 0.0 && pct <= 100.0);
    if (h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)ceil(pct / 100.0 * (double)h->count);
    if (rank < 1)
        rank = 1;
    if (rank > h->count)
        rank = h->count;
    uint64_t seen = 0;
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = bench_hist_bucket_high(i);
            if (v > h->max)
                v = h->max;
            if (v < h->min)
                v = h->min;
            return v;
        }
    }
    return h->max; /* unreachable while count equals the bucket total */
}

double bench_hist_mean(const struct bench_hist *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}
