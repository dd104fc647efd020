/* Private: the core's hashes. A fast 64-bit hash for content keys and fingerprints, which runs
 * at memory speed over every message on every call, and SHA-256 (with HMAC) where a hash must
 * resist deliberate collisions: file names of hostile ids, the audit log's integrity tags. */
#ifndef CK_HASH_H_
#define CK_HASH_H_

#include <stddef.h>
#include <stdint.h>

/* A 64-bit non-cryptographic hash of `len` bytes, keyed by `seed`. */
uint64_t ck__hash_fast(const char *data, size_t len, uint64_t seed);

/* ck__hash_fast() with the seed the core uses for texts (tool outputs, message content). */
uint64_t ck__hash_text(const char *data, size_t len);

/* Folds `x` into `acc`: an order-dependent combination for hashes of hashes. */
static inline uint64_t ck__hash_combine(uint64_t acc, uint64_t x) {
    acc ^= x;
    acc = (acc << 23) | (acc >> 41);
    return acc * 0x9E3779B185EBCA87ull;
}

/* SHA-256 in steps. */
typedef struct ck__sha256 {
    uint32_t state[8];
    uint64_t total;
    unsigned char block[64];
    size_t used;
} ck__sha256;

void ck__sha256_init(ck__sha256 *s);
void ck__sha256_update(ck__sha256 *s, const void *data, size_t len);
void ck__sha256_final(ck__sha256 *s, unsigned char digest[32]);

/* The first 64 bits of SHA-256 of `data`, big-endian as the hex digest spells them. */
uint64_t ck__sha256_prefix64(const char *data, size_t len);

/* HMAC-SHA-256 of `data` under `key` (RFC 2104). */
void ck__hmac_sha256(const unsigned char *key, size_t key_len, const char *data, size_t len,
                     unsigned char mac[32]);

/* Writes `n` bytes as 2n lowercase hex digits and a NUL into `out` (room for 2n + 1). */
void ck__hex(const unsigned char *bytes, size_t n, char *out);

#endif
