/* Private: the pieces of the S3 evidence backend (ev_s3.c) that are pure functions of their
 * input, so that a test or a fuzz target can drive them without a server. */
#ifndef CK_EV_S3_H_
#define CK_EV_S3_H_

#include <stddef.h>

#include "./buf.h"

/* Whether `key` (len bytes) may name an object: 1 to 1024 bytes of [A-Za-z0-9._~-] and '/',
 * not starting with '/', with no empty, "." or ".." segment, so that no URL normalization
 * (ours, libcurl's or a server's) can turn it into another key. Returns 1 or 0. */
int ck__s3_key_ok(const char *key, size_t len);

/* Whether `prefix` may start a listing: at most 1024 bytes of the key alphabet (any
 * segments, "" allowed). Returns 1 or 0. */
int ck__s3_prefix_ok(const char *prefix, size_t len);

/* One page of a ListObjectsV2 reply, as ck__s3_parse_list found it. */
typedef struct ck__s3_page {
    int truncated;  /* <IsTruncated>true</IsTruncated> */
    ck__buf token;  /* the unescaped <NextContinuationToken>, empty when none */
} ck__s3_page;

/* Parses the XML body of one ListObjectsV2 page: calls key(ctx, k, len) for each
 * <Contents><Key> in order, unescaped (the five named entities and numeric character
 * references; NUL-terminated at k[len], borrowed until key returns), and fills `page`. A
 * non-zero return from `key` stops the parse and is returned. Returns 0, that value, or -1 for
 * a body that is not such a reply (bad entity, unclosed element), or -2 when out of memory.
 * `page` is initialized by the call; release its token with ck__buf_dispose(). */
int ck__s3_parse_list(const char *xml, size_t len, ck__s3_page *page,
                      int (*key)(void *ctx, const char *k, size_t len), void *ctx);

/* Appends `len` bytes of `text` to `out` with every byte outside [A-Za-z0-9_.~-] written as
 * %XX (uppercase hex), and '/' too unless keep_slash: the URI encoding SigV4 expects. */
void ck__s3_uri_encode(ck__buf *out, const char *text, size_t len, int keep_slash);

#endif
