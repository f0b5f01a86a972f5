/* sim_rand.h - the simulator's only randomness: xoshiro256** seeded from one seed by splitmix64. */
#ifndef SLOTD_SIM_RAND_H
#define SLOTD_SIM_RAND_H

#include <stdbool.h>
#include <stdint.h>

struct sim_rand {
    uint64_t s[4];
};

static inline uint64_t sim_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A 64-bit finalizer, also used to hash entry contents. */
static inline uint64_t sim_mix64(uint64_t x)
{
    uint64_t y = x;
    return sim_splitmix64(&y);
}

static inline void sim_rand_seed(struct sim_rand *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = sim_splitmix64(&x);
}

static inline uint64_t sim__rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t sim_rand_next(struct sim_rand *r)
{
    uint64_t *s = r->s;
    uint64_t result = sim__rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = sim__rotl(s[3], 45);
    return result;
}

/* Uniform in [0, n); n > 0 (Lemire's multiply-shift, bias negligible for our n). */
static inline uint64_t sim_rand_below(struct sim_rand *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)sim_rand_next(r) * n) >> 64);
}

/* Uniform in [lo, hi]; lo <= hi. */
static inline uint64_t sim_rand_range(struct sim_rand *r, uint64_t lo, uint64_t hi)
{
    return lo + sim_rand_below(r, hi - lo + 1);
}

/* True with probability ppm / 1e6. */
static inline bool sim_rand_ppm(struct sim_rand *r, uint32_t ppm)
{
    return ppm > 0 && sim_rand_below(r, 1000000) < ppm;
}

#endif /* SLOTD_SIM_RAND_H */
