/* The core's hashes (see hash.h). */
#include <string.h>

#include "./hash.h"

static uint64_t hash_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* Four independent lanes over 32-byte blocks, then the rest eight bytes at a time. */
uint64_t ck__hash_fast(const char *data, size_t len, uint64_t seed) {
    const uint64_t k1 = 0x9E3779B185EBCA87ull, k2 = 0xC2B2AE3D27D4EB4Full;
    const unsigned char *p = (const unsigned char *)data;
    uint64_t a = seed + k1 + k2, b = seed + k2, c = seed, d = seed - k1;
    size_t n = len;
    while (n >= 32) {
        uint64_t w[4];
        memcpy(w, p, 32);
        a = hash_rotl(a + w[0] * k2, 31) * k1;
        b = hash_rotl(b + w[1] * k2, 31) * k1;
        c = hash_rotl(c + w[2] * k2, 31) * k1;
        d = hash_rotl(d + w[3] * k2, 31) * k1;
        p += 32;
        n -= 32;
    }
    uint64_t h = hash_rotl(a, 1) + hash_rotl(b, 7) + hash_rotl(c, 12) + hash_rotl(d, 18) +
                 (uint64_t)len;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = hash_rotl(h ^ (w * k2), 27) * k1 + k2;
        p += 8;
        n -= 8;
    }
    while (n--) h = hash_rotl(h ^ (*p++ * k1), 11) * k2;
    h ^= h >> 33;
    h *= k2;
    h ^= h >> 29;
    return h;
}

uint64_t ck__hash_text(const char *data, size_t len) { return ck__hash_fast(data, len, 0x5EED); }

/* ---- SHA-256 (FIPS 180-4) ---- */

static const uint32_t hash_k256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t hash_rotr32(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void hash_sha256_block(uint32_t st[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = hash_rotr32(w[i - 15], 7) ^ hash_rotr32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = hash_rotr32(w[i - 2], 17) ^ hash_rotr32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = st[0], b = st[1], c = st[2], d = st[3];
    uint32_t e = st[4], f = st[5], g = st[6], h = st[7];
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = hash_rotr32(e, 6) ^ hash_rotr32(e, 11) ^ hash_rotr32(e, 25);
        uint32_t t1 = h + s1 + ((e & f) ^ (~e & g)) + hash_k256[i] + w[i];
        uint32_t s0 = hash_rotr32(a, 2) ^ hash_rotr32(a, 13) ^ hash_rotr32(a, 22);
        uint32_t t2 = s0 + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    st[0] += a;
    st[1] += b;
    st[2] += c;
    st[3] += d;
    st[4] += e;
    st[5] += f;
    st[6] += g;
    st[7] += h;
}

void ck__sha256_init(ck__sha256 *s) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->state, iv, sizeof iv);
    s->total = 0;
    s->used = 0;
}

void ck__sha256_update(ck__sha256 *s, const void *data, size_t len) {
    const unsigned char *p = data;
    s->total += len;
    if (s->used) {
        size_t take = 64 - s->used < len ? 64 - s->used : len;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        len -= take;
        if (s->used < 64) return;
        hash_sha256_block(s->state, s->block);
        s->used = 0;
    }
    for (; len >= 64; len -= 64, p += 64) hash_sha256_block(s->state, p);
    if (len) memcpy(s->block, p, len);
    s->used = len;
}

void ck__sha256_final(ck__sha256 *s, unsigned char digest[32]) {
    uint64_t bits = s->total * 8;
    unsigned char pad[72] = {0x80};
    size_t pad_len = s->used < 56 ? 56 - s->used : 120 - s->used;
    for (int i = 0; i < 8; i++) pad[pad_len + i] = (unsigned char)(bits >> (56 - 8 * i));
    uint64_t total = s->total;
    ck__sha256_update(s, pad, pad_len + 8);
    s->total = total;
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (unsigned char)(s->state[i] >> 24);
        digest[4 * i + 1] = (unsigned char)(s->state[i] >> 16);
        digest[4 * i + 2] = (unsigned char)(s->state[i] >> 8);
        digest[4 * i + 3] = (unsigned char)s->state[i];
    }
}

uint64_t ck__sha256_prefix64(const char *data, size_t len) {
    ck__sha256 s;
    unsigned char d[32];
    ck__sha256_init(&s);
    ck__sha256_update(&s, data, len);
    ck__sha256_final(&s, d);
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x = x << 8 | d[i];
    return x;
}

void ck__hmac_sha256(const unsigned char *key, size_t key_len, const char *data, size_t len,
                     unsigned char mac[32]) {
    unsigned char k[64] = {0}, pad[64], inner[32];
    ck__sha256 s;
    if (key_len > 64) {
        ck__sha256_init(&s);
        ck__sha256_update(&s, key, key_len);
        ck__sha256_final(&s, k);
    } else if (key_len) {
        memcpy(k, key, key_len);
    }
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
    ck__sha256_init(&s);
    ck__sha256_update(&s, pad, 64);
    ck__sha256_update(&s, data, len);
    ck__sha256_final(&s, inner);
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
    ck__sha256_init(&s);
    ck__sha256_update(&s, pad, 64);
    ck__sha256_update(&s, inner, 32);
    ck__sha256_final(&s, mac);
}

void ck__hex(const unsigned char *bytes, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = "0123456789abcdef"[bytes[i] >> 4];
        out[2 * i + 1] = "0123456789abcdef"[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}
