/* bench_hist.h - log-linear (HDR-style) latency histogram with bounded memory and <= 0.8% error. */
#ifndef SLOTD_BENCH_HIST_H
#define SLOTD_BENCH_HIST_H

#include <stdint.h>

/*
 * Values below 2^BENCH_HIST_SUB_BITS get one bucket each. Above that every power of two
 * [2^k, 2^(k+1)) is split into 2^(BENCH_HIST_SUB_BITS-1) equal buckets, so a bucket is at
 * most 1/128 of its values wide. The whole uint64_t range fits in BENCH_HIST_BUCKETS buckets
 * (7424 x 8 bytes = 58 KiB), whatever the number of samples.
 */
#define BENCH_HIST_SUB_BITS 8
#define BENCH_HIST_BUCKETS                                                                         \
    ((1u << BENCH_HIST_SUB_BITS) + (64u - BENCH_HIST_SUB_BITS) * (1u << (BENCH_HIST_SUB_BITS - 1)))

struct bench_hist {
    uint64_t count;
    uint64_t sum; /* wraps after 2^64 (584 years of nanoseconds) */
    uint64_t min; /* UINT64_MAX while count == 0 */
    uint64_t max;
    uint64_t buckets[BENCH_HIST_BUCKETS];
};

/* h: borrowed for the call. Empties the histogram. */
void bench_hist_init(struct bench_hist *h);

/* h: borrowed for the call. Counts one value (any uint64_t). */
void bench_hist_record(struct bench_hist *h, uint64_t value);

/* dst, src: borrowed for the call. Adds src's samples to dst. */
void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src);

/*
 * h: borrowed for the call. The value at percentile pct (0 < pct <= 100): the highest value
 * of the bucket holding the sample of rank ceil(pct/100 * count), clamped to [min, max], so
 * it is never below the true percentile and at most 1/128 above it. 0 when h is empty.
 */
uint64_t bench_hist_percentile(const struct bench_hist *h, double pct);

/* h: borrowed for the call. Arithmetic mean, 0 when empty. */
double bench_hist_mean(const struct bench_hist *h);

/* Bucket index of value, and the highest value a bucket holds (exposed for tests). */
unsigned bench_hist_bucket_of(uint64_t value);
uint64_t bench_hist_bucket_high(unsigned bucket);

#endif /* SLOTD_BENCH_HIST_H */
