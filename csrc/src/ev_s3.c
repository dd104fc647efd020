/* The built-in S3 evidence backend: put, get, put_new (If-None-Match: *) and list
 * (ListObjectsV2) over libcurl, signed with libcurl's AWS SigV4. The backend is read-only once
 * made apart from a small pool of idle curl handles behind a mutex (kept so that connections
 * are reused), so any number of threads may call it at once. Credentials live only in this
 * struct and in the curl handle during a transfer; no reason text is built from them. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "./alloc.h"
#include "./buf.h"
#include "./ev_s3.h"
#include "./internal.h"

#define S3_KEY_MAX 1024
#define S3_POOL 8                              /* idle handles kept for connection reuse */
#define S3_GET_LIMIT ((size_t)1 << 30)         /* an object larger than this is refused */
#define S3_META_LIMIT ((size_t)16 << 20)       /* a list page or an error body */
#define S3_TIMEOUT_MS 10000L                   /* a whole call, retries included */
#define S3_RETRIES 3
#define S3_BACKOFF_MS 100L                     /* first retry delay, doubled each time */
#define S3_BACKOFF_MAX_MS 2000L

struct ck_s3_backend {
    ck_evidence_backend vt; /* ctx is this struct */
    char *url;              /* the normalized s3:// URL, for messages and records */
    char *object_base;      /* everything of an object's URL before the key */
    char *list_url;         /* the bucket's URL, without a query */
    char *prefix;           /* "" or ending in '/' */
    size_t prefix_len;
    char *sigv4;            /* "aws:amz:<region>:s3" */
    char *access_key, *secret_key;
    char *token_header;     /* "x-amz-security-token: ..." or NULL */
    long timeout_ms;
    int retries;
    unsigned max_keys;
    pthread_mutex_t lock;
    int lock_made;
    CURL *idle[S3_POOL];
    size_t n_idle;
};

static pthread_once_t s3_curl_once = PTHREAD_ONCE_INIT;
static CURLcode s3_curl_init_result = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe in every libcurl build, so it runs exactly once. */
static void s3_init_curl(void) { s3_curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- keys, prefixes, URI encoding ---- */

static int s3_key_byte(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '~' || c == '-' || c == '/';
}

int ck__s3_prefix_ok(const char *prefix, size_t len) {
    if (len > S3_KEY_MAX || (len && !prefix)) return 0;
    for (size_t i = 0; i < len; i++)
        if (!s3_key_byte((unsigned char)prefix[i])) return 0;
    return 1;
}

int ck__s3_key_ok(const char *key, size_t len) {
    if (!len || !ck__s3_prefix_ok(key, len)) return 0;
    for (size_t start = 0; start <= len;) {
        const char *slash = memchr(key + start, '/', len - start);
        size_t end = slash ? (size_t)(slash - key) : len, n = end - start;
        if (n == 0 || (n == 1 && key[start] == '.') ||
            (n == 2 && key[start] == '.' && key[start + 1] == '.'))
            return 0;
        start = end + 1;
    }
    return 1;
}

void ck__s3_uri_encode(ck__buf *out, const char *text, size_t len, int keep_slash) {
    static const char HEX[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((s3_key_byte(c) && c != '/') || (c == '/' && keep_slash)) {
            ck__buf_addc(out, (char)c);
        } else {
            char esc[3] = {'%', HEX[c >> 4], HEX[c & 15]};
            ck__buf_add(out, esc, 3);
        }
    }
}

/* ---- the list reply (XML) ---- */

/* The first `needle` in [from, end), or NULL. */
static const char *s3_find(const char *from, const char *end, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = from; p && (size_t)(end - p) >= n; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p || (size_t)(end - p) < n) return NULL;
        if (memcmp(p, needle, n) == 0) return p;
    }
    return NULL;
}

/* The text of the element <tag>...</tag> that starts in [from, end): *text and *len, or 0
 * when there is none; -1 when it opens but does not close. *next is past its end tag. */
static int s3_element(const char *from, const char *end, const char *tag, const char **text,
                      size_t *len, const char **next) {
    char open[40], close[40];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *at = s3_find(from, end, open);
    if (!at) return 0;
    at += strlen(open);
    const char *stop = s3_find(at, end, close);
    if (!stop) return -1;
    *text = at;
    *len = (size_t)(stop - at);
    if (next) *next = stop + strlen(close);
    return 1;
}

/* Appends code point `cp` as UTF-8; 0 for one XML cannot name (NUL, a surrogate, too big). */
static int s3_add_utf8(ck__buf *out, unsigned long cp) {
    char u[4];
    size_t n;
    if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    ck__buf_add(out, u, n);
    return 1;
}

/* Replaces out's text with the unescaped `len` bytes of `text`. Returns 0, or -1 for an
 * entity XML does not define or a stray '<'. */
static int s3_unescape(ck__buf *out, const char *text, size_t len) {
    static const struct {
        const char *name;
        char c;
    } NAMED[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    out->len = 0;
    ck__buf_add(out, "", 0); /* so that data is never NULL, even for an empty text */
    for (size_t i = 0; i < len;) {
        const char *amp = memchr(text + i, '&', len - i);
        size_t run = amp ? (size_t)(amp - (text + i)) : len - i;
        if (memchr(text + i, '<', run)) return -1;
        ck__buf_add(out, text + i, run);
        i += run;
        if (!amp) break;
        i++; /* past '&' */
        size_t k, matched = 0;
        for (k = 0; k < sizeof NAMED / sizeof NAMED[0] && !matched; k++) {
            size_t n = strlen(NAMED[k].name);
            if (len - i >= n && memcmp(text + i, NAMED[k].name, n) == 0) {
                ck__buf_addc(out, NAMED[k].c);
                i += n;
                matched = 1;
            }
        }
        if (matched) continue;
        if (i >= len || text[i] != '#') return -1;
        i++;
        int hex = i < len && text[i] == 'x';
        if (hex) i++;
        unsigned long cp = 0;
        size_t digits = 0;
        for (; i < len && text[i] != ';' && digits < 8; i++, digits++) {
            char c = text[i];
            int v = c >= '0' && c <= '9'   ? c - '0'
                    : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                  : -1;
            if (v < 0) return -1;
            cp = cp * (hex ? 16 : 10) + (unsigned long)v;
        }
        if (!digits || i >= len || text[i] != ';' || !s3_add_utf8(out, cp)) return -1;
        i++;
    }
    return 0;
}

int ck__s3_parse_list(const char *xml, size_t len, ck__s3_page *page,
                      int (*key)(void *ctx, const char *k, size_t len), void *ctx) {
    page->truncated = 0;
    ck__buf_init(&page->token);
    if (!xml) return -1;
    const char *end = xml + len, *text, *next;
    size_t n;
    if (!s3_find(xml, end, "<ListBucketResult")) return -1;
    int rc = s3_element(xml, end, "IsTruncated", &text, &n, NULL);
    if (rc < 0) return -1;
    page->truncated = rc == 1 && n == 4 && memcmp(text, "true", 4) == 0;
    rc = s3_element(xml, end, "NextContinuationToken", &text, &n, NULL);
    if (rc < 0 || (rc == 1 && s3_unescape(&page->token, text, n))) return -1;
    if (page->token.failed) return -2;
    ck__buf k;
    ck__buf_init(&k);
    int out = 0;
    for (const char *at = xml; !out;) {
        const char *body;
        size_t body_len;
        rc = s3_element(at, end, "Contents", &body, &body_len, &next);
        if (rc <= 0) {
            out = rc < 0 ? -1 : 0;
            break;
        }
        at = next;
        rc = s3_element(body, body + body_len, "Key", &text, &n, NULL);
        if (rc <= 0 || s3_unescape(&k, text, n)) out = -1;
        else if (k.failed) out = -2;
        else out = key(ctx, k.data, k.len);
    }
    ck__buf_dispose(&k);
    return out;
}

/* ---- the URL ---- */

/* A bucket name as S3 allows it: 3-63 of [a-z0-9.-], starting and ending with a letter or a
 * digit, with no "..". */
static int s3_bucket_ok(const char *b, size_t n) {
    if (n < 3 || n > 63) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '.' && c != '-') return 0;
        if ((i == 0 || i == n - 1) && !alnum) return 0;
        if (c == '.' && b[i + 1] == '.') return 0;
    }
    return 1;
}

static int s3_region_ok(const char *r) {
    size_t n = strlen(r);
    if (!n || n > 32) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') || r[i] == '-'))
            return 0;
    return 1;
}

/* "http[s]://host[:port][/]": a host name, an IPv4 address or a bracketed IPv6 address, no
 * user, path, query or fragment. On success *clean_len is the length without a final '/'. */
static int s3_endpoint_ok(const char *e, size_t *clean_len) {
    size_t n = strlen(e);
    const char *host;
    if (strncmp(e, "http://", 7) == 0) host = e + 7;
    else if (strncmp(e, "https://", 8) == 0) host = e + 8;
    else return 0;
    if (n && e[n - 1] == '/') n--;
    const char *end = e + n, *p = host;
    if (p < end && *p == '[') {
        for (p++; p < end && *p != ']'; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F') ||
                  *p == ':' || *p == '.'))
                return 0;
        if (p >= end || p == host + 1) return 0;
        p++;
    } else {
        for (; p < end && *p != ':'; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  *p == '.' || *p == '-'))
                return 0;
        if (p == host) return 0;
    }
    if (p < end) {
        if (*p != ':' || end - p < 2 || end - p > 6) return 0;
        long port = 0;
        for (p++; p < end; p++) {
            if (*p < '0' || *p > '9') return 0;
            port = port * 10 + (*p - '0');
        }
        if (port < 1 || port > 65535) return 0;
    }
    *clean_len = n;
    return 1;
}

static int s3_hex(char c) {
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A query value, percent-decoded and NUL-terminated; NULL when out of memory, and *bad set
 * for a broken escape or an escaped NUL. Caller owns the result (ck__free). */
static char *s3_decode(const char *s, size_t n, int *bad) {
    char *out = ck__malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[o++] = s[i];
            continue;
        }
        int hi = i + 1 < n ? s3_hex(s[i + 1]) : -1;
        int lo = i + 2 < n ? s3_hex(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            *bad = 1;
            break;
        }
        out[o++] = (char)(hi * 16 + lo);
        i += 2;
    }
    out[o] = '\0';
    return out;
}

/* What a URL says, before the backend is built from it. */
typedef struct s3_url {
    const char *bucket, *prefix;
    size_t bucket_len, prefix_len;
    char *region, *endpoint;
    long timeout_ms;
    int retries;
    unsigned max_keys;
} s3_url;

static void s3_url_dispose(s3_url *u) {
    ck__free(u->region);
    ck__free(u->endpoint);
}

/* Reads a number from a query value: the whole value must be one (strtod), within [lo, hi]. */
static int s3_number(const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    double x = strtod(v, &end);
    if (!v[0] || !end || *end || !(x >= lo && x <= hi)) return 0;
    *out = x;
    return 1;
}

static int s3_parse_param(s3_url *u, const char *name, size_t name_len, const char *value,
                          size_t value_len, unsigned *seen, ck_error *err) {
    static const char *const NAMES[] = {"region", "endpoint", "timeout", "retries", "max_keys"};
    size_t which = 0;
    while (which < 5 && !(strlen(NAMES[which]) == name_len &&
                          memcmp(NAMES[which], name, name_len) == 0))
        which++;
    if (which == 5)
        return ck__fail(err, CK_EINVAL,
                        "unknown S3 URL parameter (known: region, endpoint, timeout, retries, "
                        "max_keys)",
                        CK_NONE, "url.%.*s", (int)(name_len < 60 ? name_len : 60), name);
    if (*seen & (1u << which))
        return ck__fail(err, CK_EINVAL, "an S3 URL parameter is given twice", CK_NONE, "url.%s",
                        NAMES[which]);
    *seen |= 1u << which;
    int bad = 0;
    char *v = s3_decode(value, value_len, &bad);
    if (!v) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    double x = 0;
    int ok = !bad;
    const char *msg = NULL;
    switch (which) {
        case 0:
            ok = ok && s3_region_ok(v);
            msg = "region must be 1-32 of a-z, 0-9 and - (us-east-1)";
            if (ok) {
                u->region = v;
                v = NULL;
            }
            break;
        case 1: {
            size_t clean = 0;
            ok = ok && s3_endpoint_ok(v, &clean);
            msg = "endpoint must be http:// or https:// and host[:port], with no user, path or "
                  "query";
            if (ok) {
                v[clean] = '\0';
                u->endpoint = v;
                v = NULL;
            }
            break;
        }
        case 2:
            ok = ok && s3_number(v, 0.001, 3600, &x);
            msg = "timeout must be seconds in (0, 3600]";
            if (ok) u->timeout_ms = (long)(x * 1000 + 0.5) ? (long)(x * 1000 + 0.5) : 1;
            break;
        case 3:
            ok = ok && s3_number(v, 0, 10, &x) && x == (double)(int)x;
            msg = "retries must be a whole number from 0 to 10";
            if (ok) u->retries = (int)x;
            break;
        default:
            ok = ok && s3_number(v, 1, 1000, &x) && x == (double)(int)x;
            msg = "max_keys must be a whole number from 1 to 1000";
            if (ok) u->max_keys = (unsigned)x;
            break;
    }
    ck__free(v);
    return ok ? CK_OK : ck__fail(err, CK_EINVAL, msg, CK_NONE, "url.%s", NAMES[which]);
}

static int s3_parse_url(const char *url, size_t len, s3_url *u, ck_error *err) {
    memset(u, 0, sizeof *u);
    u->timeout_ms = S3_TIMEOUT_MS;
    u->retries = S3_RETRIES;
    u->max_keys = 1000;
    if (!url) return ck__fail(err, CK_EINVAL, "no S3 URL", CK_NONE, "url");
    if (memchr(url, '\0', len))
        return ck__fail(err, CK_EINVAL, "the S3 URL holds a NUL byte", CK_NONE, "url");
    if (len < 5 || memcmp(url, "s3://", 5) != 0)
        return ck__fail(err, CK_EINVAL, "an S3 store URL starts with s3://", CK_NONE,
                        "url.scheme");
    if (memchr(url, '#', len))
        return ck__fail(err, CK_EINVAL, "an S3 URL has no #fragment", CK_NONE, "url");
    const char *p = url + 5, *end = url + len;
    const char *q = memchr(p, '?', (size_t)(end - p));
    const char *path_end = q ? q : end;
    const char *slash = memchr(p, '/', (size_t)(path_end - p));
    u->bucket = p;
    u->bucket_len = (size_t)((slash ? slash : path_end) - p);
    if (!u->bucket_len)
        return ck__fail(err, CK_EINVAL, "the S3 URL names no bucket (s3://bucket/prefix)",
                        CK_NONE, "url.bucket");
    if (!s3_bucket_ok(u->bucket, u->bucket_len))
        return ck__fail(err, CK_EINVAL,
                        "a bucket name is 3-63 of a-z, 0-9, . and -, starting and ending with a "
                        "letter or digit",
                        CK_NONE, "url.bucket");
    if (slash) {
        u->prefix = slash + 1;
        u->prefix_len = (size_t)(path_end - u->prefix);
    }
    /* A prefix must be the start of a valid key: its segments obey the key rules. */
    int prefix_ok = u->prefix_len < S3_KEY_MAX && ck__s3_prefix_ok(u->prefix, u->prefix_len);
    if (prefix_ok && u->prefix_len) {
        size_t n = u->prefix_len - (u->prefix[u->prefix_len - 1] == '/');
        prefix_ok = n > 0 && ck__s3_key_ok(u->prefix, n);
    }
    if (!prefix_ok)
        return ck__fail(err, CK_EINVAL,
                        "the S3 prefix may hold only A-Z a-z 0-9 . _ ~ - and /, with no empty, "
                        ". or .. segment",
                        CK_NONE, "url.prefix");
    unsigned seen = 0;
    for (const char *at = q ? q + 1 : end; at < end;) {
        const char *amp = memchr(at, '&', (size_t)(end - at));
        const char *stop = amp ? amp : end;
        const char *eq = memchr(at, '=', (size_t)(stop - at));
        if (!eq || eq == at || eq + 1 == stop) {
            s3_url_dispose(u);
            return ck__fail(err, CK_EINVAL, "an S3 URL parameter is name=value", CK_NONE,
                            "url.query");
        }
        int rc = s3_parse_param(u, at, (size_t)(eq - at), eq + 1, (size_t)(stop - eq - 1), &seen,
                                err);
        if (rc) {
            s3_url_dispose(u);
            return rc;
        }
        at = amp ? amp + 1 : end;
    }
    if (!u->region) {
        const char *env = "AWS_REGION", *r = getenv(env);
        if (!r || !r[0]) r = getenv(env = "AWS_DEFAULT_REGION");
        if (!r || !r[0]) {
            s3_url_dispose(u);
            return ck__fail(err, CK_EINVAL,
                            "the S3 URL gives no region (?region=..., or AWS_REGION)", CK_NONE,
                            "url.region");
        }
        if (!s3_region_ok(r)) {
            s3_url_dispose(u);
            return ck__fail(err, CK_EINVAL, "region must be 1-32 of a-z, 0-9 and -", CK_NONE,
                            "%s", env);
        }
        if (!(u->region = ck__strndup(r, strlen(r)))) {
            s3_url_dispose(u);
            return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        }
    }
    return CK_OK;
}

/* ---- making and freeing ---- */

/* Overwrites a secret before its memory goes back to the allocator; the volatile pointer keeps
 * the compiler from dropping the stores as dead. */
static void s3_wipe_free(char *s) {
    if (!s) return;
    for (volatile char *p = s; *p; p++) *p = 0;
    ck__free(s);
}

/* A credential from the environment: set, not empty, one line of printable text. */
static int s3_credential(const char *name, int required, char **out, ck_error *err) {
    const char *v = getenv(name);
    *out = NULL;
    if (!v || !v[0]) {
        if (!required) return CK_OK;
        return ck__fail(err, CK_EINVAL, "S3 credentials are missing from the environment",
                        CK_NONE, "%s", name);
    }
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7F)
            return ck__fail(err, CK_EINVAL, "an S3 credential holds a control character",
                            CK_NONE, "%s", name);
    if (!(*out = ck__strndup(v, strlen(v)))) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    return CK_OK;
}

static int s3_put(void *ctx, const char *key, const char *data, size_t len, ck_error *err);
static int s3_get(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err);
static int s3_get_until(ck_s3_backend *self, const char *key, char **out, size_t *out_len,
                        long long deadline, ck_error *err);
static int s3_put_new(void *ctx, const char *key, const char *data, size_t len, ck_error *err);
static int s3_list(void *ctx, const char *prefix, const char *start_after,
                   int (*each)(void *each_ctx, const char *key, size_t len), void *each_ctx,
                   ck_error *err);

void ck_s3_backend_free(ck_s3_backend *self) {
    if (!self) return;
    for (size_t i = 0; i < self->n_idle; i++) curl_easy_cleanup(self->idle[i]);
    if (self->lock_made) pthread_mutex_destroy(&self->lock);
    ck__free(self->url);
    ck__free(self->object_base);
    ck__free(self->list_url);
    ck__free(self->prefix);
    ck__free(self->sigv4);
    s3_wipe_free(self->access_key);
    s3_wipe_free(self->secret_key);
    s3_wipe_free(self->token_header);
    ck__free(self);
}

ck_s3_backend *ck_s3_backend_new(const char *url, size_t len, ck_error *err) {
    ck__error_clear(err);
    s3_url u;
    if (s3_parse_url(url, len, &u, err)) return NULL;
    pthread_once(&s3_curl_once, s3_init_curl);
    if (s3_curl_init_result != CURLE_OK) {
        s3_url_dispose(&u);
        ck__fail(err, CK_EIO, "libcurl could not be initialized", CK_NONE, NULL);
        return NULL;
    }
    ck_s3_backend *self = ck__calloc(1, sizeof *self);
    if (!self) {
        s3_url_dispose(&u);
        ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        return NULL;
    }
    char *token = NULL;
    int rc = s3_credential("AWS_ACCESS_KEY_ID", 1, &self->access_key, err);
    if (!rc) rc = s3_credential("AWS_SECRET_ACCESS_KEY", 1, &self->secret_key, err);
    if (!rc) rc = s3_credential("AWS_SESSION_TOKEN", 0, &token, err);
    if (rc) goto fail;
    rc = CK_ENOMEM;
    if (pthread_mutex_init(&self->lock, NULL) != 0) goto fail;
    self->lock_made = 1;
    self->timeout_ms = u.timeout_ms;
    self->retries = u.retries;
    self->max_keys = u.max_keys;
    int path_style = u.endpoint || memchr(u.bucket, '.', u.bucket_len) != NULL;
    ck__buf b;
    /* The bucket's URL: path style on a given endpoint (as S3-compatible servers expect) and
     * for dotted bucket names (which break the wildcard certificate of virtual hosts). */
    ck__buf_init(&b);
    if (u.endpoint) ck__buf_adds(&b, u.endpoint);
    else if (path_style) ck__buf_printf(&b, "https://s3.%s.amazonaws.com", u.region);
    else ck__buf_printf(&b, "https://%.*s.s3.%s.amazonaws.com", (int)u.bucket_len, u.bucket,
                        u.region);
    if (path_style) ck__buf_printf(&b, "/%.*s", (int)u.bucket_len, u.bucket);
    else ck__buf_addc(&b, '/');
    if (!(self->list_url = ck__buf_take(&b, NULL))) goto fail;
    ck__buf_adds(&b, self->list_url);
    if (path_style) ck__buf_addc(&b, '/');
    ck__buf_add(&b, u.prefix ? u.prefix : "", u.prefix_len);
    if (u.prefix_len && u.prefix[u.prefix_len - 1] != '/') ck__buf_addc(&b, '/');
    if (!(self->object_base = ck__buf_take(&b, NULL))) goto fail;
    ck__buf_add(&b, u.prefix ? u.prefix : "", u.prefix_len);
    if (u.prefix_len && u.prefix[u.prefix_len - 1] != '/') ck__buf_addc(&b, '/');
    if (!(self->prefix = ck__buf_take(&b, &self->prefix_len))) goto fail;
    ck__buf_printf(&b, "s3://%.*s/%s?region=%s", (int)u.bucket_len, u.bucket, self->prefix,
                   u.region);
    if (u.endpoint) ck__buf_printf(&b, "&endpoint=%s", u.endpoint);
    if (!(self->url = ck__buf_take(&b, NULL))) goto fail;
    ck__buf_printf(&b, "aws:amz:%s:s3", u.region);
    if (!(self->sigv4 = ck__buf_take(&b, NULL))) goto fail;
    if (token) {
        ck__buf_adds(&b, "x-amz-security-token: ");
        ck__buf_adds(&b, token);
        if (!(self->token_header = ck__buf_take(&b, NULL))) goto fail;
    }
    s3_wipe_free(token);
    s3_url_dispose(&u);
    self->vt.ctx = self;
    self->vt.put = s3_put;
    self->vt.get = s3_get;
    self->vt.put_new = s3_put_new;
    self->vt.list = s3_list;
    return self;
fail:
    if (rc == CK_ENOMEM) ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    s3_wipe_free(token);
    s3_url_dispose(&u);
    ck_s3_backend_free(self);
    return NULL;
}

const ck_evidence_backend *ck_s3_backend_evidence(const ck_s3_backend *self) {
    return self ? &self->vt : NULL;
}

const char *ck_s3_backend_url(const ck_s3_backend *self) { return self ? self->url : NULL; }

/* ---- one request, with retries ---- */

static long long s3_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void s3_sleep_ms(long long ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The n-th retry delay: S3_BACKOFF_MS doubled n times, capped, times a factor in [0.5, 1.5)
 * drawn from the clock and the backend's address, so that workers started together spread
 * their retries instead of hammering the server in step. */
static long long s3_backoff_ms(const ck_s3_backend *self, int n) {
    long long base = S3_BACKOFF_MS << (n < 5 ? n : 5);
    if (base > S3_BACKOFF_MAX_MS) base = S3_BACKOFF_MAX_MS;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = ((uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)self) + (uint64_t)n;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return base / 2 + (long long)(x % (uint64_t)base);
}

static CURL *s3_take(ck_s3_backend *self) {
    CURL *h = NULL;
    pthread_mutex_lock(&self->lock);
    if (self->n_idle) h = self->idle[--self->n_idle];
    pthread_mutex_unlock(&self->lock);
    if (h) curl_easy_reset(h);
    return h ? h : curl_easy_init();
}

static void s3_give(ck_s3_backend *self, CURL *h) {
    pthread_mutex_lock(&self->lock);
    if (self->n_idle < S3_POOL) {
        self->idle[self->n_idle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&self->lock);
    if (h) curl_easy_cleanup(h);
}

typedef struct s3_req {
    const char *op;   /* "GET", "PUT", "LIST": what reasons name */
    const char *url;
    const char *data; /* the body of a PUT; NULL for a GET */
    size_t len;
    int if_none_match;
    size_t limit;     /* the largest reply body accepted */
} s3_req;

typedef struct s3_reply {
    ck__buf body;
    size_t limit;
    int too_big;
    long status;
    long retry_after_s; /* -1: none */
} s3_reply;

static size_t s3_on_data(char *data, size_t size, size_t n, void *ctx) {
    s3_reply *r = ctx;
    size_t len = size * n;
    if (len > r->limit - r->body.len) {
        r->too_big = 1;
        return 0;
    }
    ck__buf_add(&r->body, data, len);
    return r->body.failed ? 0 : len;
}

/* One transfer within `left_ms`. Returns libcurl's code; the reply holds status and body. */
static CURLcode s3_attempt(ck_s3_backend *self, const s3_req *req, s3_reply *rep,
                           long long left_ms) {
    rep->body.len = 0;
    rep->too_big = 0;
    rep->status = 0;
    rep->retry_after_s = -1;
    rep->limit = req->limit;
    CURL *h = s3_take(self);
    if (!h) return CURLE_OUT_OF_MEMORY;
    struct curl_slist *hdrs = NULL;
    const char *lines[4];
    size_t n = 0;
    /* S3 wants the payload's SHA-256 in every SigV4 request, and libcurl (before 8.x) signs
     * the value given here instead of hashing the body itself. A body goes as
     * UNSIGNED-PAYLOAD, as the AWS SDKs send uploads (the core has no SHA-256 in a shared
     * layer yet); a GET carries the hash of the empty body. */
    if (req->data) {
        lines[n++] = "x-amz-content-sha256: UNSIGNED-PAYLOAD";
        /* No "Expect:" line to skip 100-continue: libcurl 7.88 signs the empty header that
         * it then does not send, and the server refuses the signature. */
        lines[n++] = "Content-Type: application/octet-stream";
    } else {
        lines[n++] = "x-amz-content-sha256: "
                     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    }
    if (req->if_none_match) lines[n++] = "If-None-Match: *";
    if (self->token_header) lines[n++] = self->token_header;
    for (size_t i = 0; i < n; i++) {
        struct curl_slist *grown = curl_slist_append(hdrs, lines[i]);
        if (!grown) {
            curl_slist_free_all(hdrs);
            s3_give(self, h);
            return CURLE_OUT_OF_MEMORY;
        }
        hdrs = grown;
    }
    curl_easy_setopt(h, CURLOPT_URL, req->url);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, self->sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, self->access_key);
    curl_easy_setopt(h, CURLOPT_PASSWORD, self->secret_key);
    if (req->data) {
        /* A body given as POSTFIELDS is what libcurl hashes into the signature. */
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->len ? req->data : "");
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, s3_on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, rep);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)left_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)left_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_USERAGENT, "ctxkeel/" CK_VERSION_STRING);
    CURLcode rc = curl_easy_perform(h);
    curl_off_t after = -1;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rep->status);
    curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &after);
    rep->retry_after_s = after >= 0 ? (long)after : -1;
    curl_slist_free_all(hdrs);
    s3_give(self, h);
    return rc;
}

/* The <Code> of an S3 error body when it is a plain word, else "". */
static void s3_error_code(const s3_reply *rep, char code[48]) {
    const char *text;
    size_t n, i;
    code[0] = '\0';
    if (!rep->body.data ||
        s3_element(rep->body.data, rep->body.data + rep->body.len, "Code", &text, &n, NULL) != 1 ||
        n == 0 || n >= 48)
        return;
    for (i = 0; i < n; i++)
        if (!((text[i] >= 'A' && text[i] <= 'Z') || (text[i] >= 'a' && text[i] <= 'z') ||
              (text[i] >= '0' && text[i] <= '9')))
            return;
    memcpy(code, text, n);
    code[n] = '\0';
}

/* A failed HTTP status as CK_EIO with a reason: 403 says "access denied". */
static int s3_http_fail(const char *op, const s3_reply *rep, int attempts, ck_error *err) {
    char code[48];
    s3_error_code(rep, code);
    const char *what = rep->status == 403   ? " access denied"
                       : rep->status == 404 && strcmp(code, "NoSuchBucket") == 0 ? " no such bucket"
                       : rep->status == 429 ? " too many requests"
                       : rep->status >= 500 ? " server error"
                                            : "";
    char tail[32] = "";
    if (attempts > 1) snprintf(tail, sizeof tail, " (%d attempts)", attempts);
    return ck__fail(err, CK_EIO, "the S3 server refused the request", CK_NONE,
                    "S3 %s: HTTP %ld%s%s%s%s%s", op, rep->status, what, code[0] ? " (" : "", code,
                    code[0] ? ")" : "", tail);
}

/* Runs `req` until it gets an answer that is not worth retrying, before `deadline` (ms of
 * s3_now_ms(): one per backend call, shared by the requests it makes). Returns CK_OK with the final status in rep (any status but 429, 5xx, and 409 for a
 * conditional put), or CK_EIO / CK_ETIMEDOUT / CK_ENOMEM with the reason in err->where.
 * *maybe_applied says whether an earlier attempt may have reached the server and acted. */
static int s3_call(ck_s3_backend *self, const s3_req *req, s3_reply *rep, long long deadline,
                   int *maybe_applied, ck_error *err) {
    *maybe_applied = 0;
    CURLcode last = CURLE_OK;
    int attempts = 0, waited_out = 0;
    for (;;) {
        long long left = deadline - s3_now_ms();
        if (left <= 0) {
            waited_out = 1;
            break;
        }
        last = s3_attempt(self, req, rep, left);
        attempts++;
        if (last == CURLE_OUT_OF_MEMORY || rep->body.failed)
            return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        if (last == CURLE_WRITE_ERROR && rep->too_big)
            return ck__fail(err, CK_EIO, "the S3 reply is too large", CK_NONE,
                            "S3 %s: reply larger than %zu bytes", req->op, req->limit);
        int retry = last != CURLE_OK || rep->status == 429 || rep->status >= 500 ||
                    (rep->status == 409 && req->if_none_match);
        if (!retry) return CK_OK;
        if (last != CURLE_COULDNT_CONNECT && last != CURLE_COULDNT_RESOLVE_HOST &&
            (last != CURLE_OK || rep->status >= 500))
            *maybe_applied = 1;
        if (attempts > self->retries) break;
        long long delay = s3_backoff_ms(self, attempts - 1);
        if (last == CURLE_OK && rep->retry_after_s >= 0) {
            if (rep->retry_after_s * 1000LL >= deadline - s3_now_ms()) break;
            delay = rep->retry_after_s * 1000LL;
        }
        if (delay >= deadline - s3_now_ms()) {
            waited_out = last == CURLE_OPERATION_TIMEDOUT;
            break;
        }
        s3_sleep_ms(delay);
    }
    char tail[32] = "";
    if (attempts > 1) snprintf(tail, sizeof tail, " (%d attempts)", attempts);
    if (last == CURLE_OPERATION_TIMEDOUT || (waited_out && last != CURLE_OK))
        return ck__fail(err, CK_ETIMEDOUT, "the S3 server did not answer in time", CK_NONE,
                        "S3 %s: no answer within %.1f s%s", req->op,
                        (double)self->timeout_ms / 1000, tail);
    if (last != CURLE_OK)
        return ck__fail(err, CK_EIO, "the S3 server could not be reached", CK_NONE,
                        "S3 %s: %s%s", req->op, curl_easy_strerror(last), tail);
    return s3_http_fail(req->op, rep, attempts, err);
}

/* The URL of `key`, or NULL when out of memory. Caller owns it (ck__free). */
static char *s3_object_url(const ck_s3_backend *self, const char *key, size_t len) {
    ck__buf b;
    ck__buf_init(&b);
    ck__buf_adds(&b, self->object_base);
    ck__buf_add(&b, key, len); /* checked: only unreserved bytes and '/' */
    return ck__buf_take(&b, NULL);
}

static int s3_check_key(const ck_s3_backend *self, const char *key, size_t *len, ck_error *err) {
    *len = key ? strlen(key) : 0;
    if (!key || !ck__s3_key_ok(key, *len) || *len > S3_KEY_MAX - self->prefix_len)
        return ck__fail(err, CK_EINVAL, "not an allowed S3 key", CK_NONE,
                        "key: 1-%zu of A-Z a-z 0-9 . _ ~ - /, no empty, . or .. segment",
                        (size_t)S3_KEY_MAX - self->prefix_len);
    return CK_OK;
}

/* A PUT of `data`, plain or conditional. */
static int s3_put_object(ck_s3_backend *self, const char *key, const char *data, size_t len,
                         int if_none_match, ck_error *err) {
    size_t key_len;
    int rc = s3_check_key(self, key, &key_len, err);
    if (rc) return rc;
    if (!data && len) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, "data");
    char *url = s3_object_url(self, key, key_len);
    if (!url) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    s3_req req = {"PUT", url, data ? data : "", len, if_none_match, S3_META_LIMIT};
    s3_reply rep;
    ck__buf_init(&rep.body);
    int maybe_applied = 0;
    long long deadline = s3_now_ms() + self->timeout_ms;
    rc = s3_call(self, &req, &rep, deadline, &maybe_applied, err);
    if (!rc && rep.status == 412 && if_none_match) {
        rc = CK_ECONFLICT;
        if (maybe_applied) {
            /* An earlier attempt of this call may be the writer that got there first: the
             * object is ours exactly when it holds our bytes. */
            char *have = NULL;
            size_t have_len = 0;
            int got = s3_get_until(self, key, &have, &have_len, deadline, err);
            if (got) rc = got == CK_ENOMEM ? CK_ENOMEM : CK_EIO;
            else if (have && have_len == len && (!len || memcmp(have, data, len) == 0)) rc = CK_OK;
            ck__free(have);
            if (rc == CK_EIO)
                ck__fail(err, CK_EIO, "the S3 object exists; whose it is could not be read",
                         CK_NONE, "S3 PUT: exists, and reading it back failed");
        }
        if (rc == CK_ECONFLICT)
            ck__fail(err, CK_ECONFLICT, NULL, CK_NONE, "S3 PUT: an object exists under the key");
    } else if (!rc && !(rep.status >= 200 && rep.status < 300)) {
        rc = s3_http_fail("PUT", &rep, 1, err);
    }
    if (rc == CK_OK) ck__error_clear(err);
    ck__buf_dispose(&rep.body);
    ck__free(url);
    return rc;
}

static int s3_put(void *ctx, const char *key, const char *data, size_t len, ck_error *err) {
    return s3_put_object(ctx, key, data, len, 0, err);
}

static int s3_put_new(void *ctx, const char *key, const char *data, size_t len, ck_error *err) {
    return s3_put_object(ctx, key, data, len, 1, err);
}

static int s3_get_until(ck_s3_backend *self, const char *key, char **out, size_t *out_len,
                        long long deadline, ck_error *err) {
    size_t key_len;
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!out || !out_len) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, "out");
    int rc = s3_check_key(self, key, &key_len, err);
    if (rc) return rc;
    char *url = s3_object_url(self, key, key_len);
    if (!url) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    s3_req req = {"GET", url, NULL, 0, 0, S3_GET_LIMIT};
    s3_reply rep;
    ck__buf_init(&rep.body);
    int maybe_applied;
    rc = s3_call(self, &req, &rep, deadline, &maybe_applied, err);
    if (!rc && rep.status == 200) {
        size_t n = 0; /* an empty object still gets a buffer: take() makes one */
        char *data = ck__buf_take(&rep.body, &n);
        if (!data) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        *out = data;
        *out_len = n;
    } else if (!rc && rep.status == 404) {
        char code[48];
        s3_error_code(&rep, code);
        if (strcmp(code, "NoSuchBucket") == 0) rc = s3_http_fail("GET", &rep, 1, err);
    } else if (!rc) {
        rc = s3_http_fail("GET", &rep, 1, err);
    }
    if (rc == CK_OK) ck__error_clear(err);
    ck__buf_dispose(&rep.body);
    ck__free(url);
    return rc;
}

static int s3_get(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err) {
    ck_s3_backend *self = ctx;
    return s3_get_until(self, key, out, out_len, s3_now_ms() + self->timeout_ms, err);
}

/* What one listing carries from page to page. */
typedef struct s3_listing {
    const ck_s3_backend *self;
    int (*each)(void *each_ctx, const char *key, size_t len);
    void *each_ctx;
    ck__buf last; /* the last key seen (whole, backend prefix included) */
    int have_last, stopped, out_of_order;
} s3_listing;

static int s3_list_key(void *ctx, const char *k, size_t len) {
    s3_listing *l = ctx;
    /* Keys must rise strictly: resume trusts the order, and a server that repeats or reorders
     * keys across pages would otherwise make it skip or loop. */
    if (l->have_last) {
        size_t m = len < l->last.len ? len : l->last.len;
        int c = memcmp(k, l->last.data, m);
        if (c < 0 || (c == 0 && len <= l->last.len)) {
            l->out_of_order = 1;
            return 1;
        }
    }
    l->last.len = 0;
    l->have_last = 1;
    ck__buf_add(&l->last, k, len);
    if (l->last.failed) return -2;
    if (len < l->self->prefix_len || memcmp(k, l->self->prefix, l->self->prefix_len) != 0)
        return 0; /* not under our prefix: a server that ignored it; not ours to report */
    if (l->each(l->each_ctx, k + l->self->prefix_len, len - l->self->prefix_len)) {
        l->stopped = 1;
        return 1;
    }
    return 0;
}

static int s3_list(void *ctx, const char *prefix, const char *start_after,
                   int (*each)(void *each_ctx, const char *key, size_t len), void *each_ctx,
                   ck_error *err) {
    ck_s3_backend *self = ctx;
    size_t plen = prefix ? strlen(prefix) : 0, alen = start_after ? strlen(start_after) : 0;
    if (!each) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, "each");
    if (!ck__s3_prefix_ok(prefix, plen) || plen > S3_KEY_MAX - self->prefix_len)
        return ck__fail(err, CK_EINVAL, "not an allowed S3 prefix", CK_NONE,
                        "prefix: A-Z a-z 0-9 . _ ~ - / only");
    if (!ck__s3_prefix_ok(start_after, alen) || alen > S3_KEY_MAX - self->prefix_len)
        return ck__fail(err, CK_EINVAL, "not an allowed S3 key", CK_NONE,
                        "start_after: A-Z a-z 0-9 . _ ~ - / only");
    s3_listing l = {self, each, each_ctx, {NULL, 0, 0, 0}, 0, 0, 0};
    ck__buf token, url;
    ck__buf_init(&token);
    ck__buf_init(&url);
    s3_reply rep;
    ck__buf_init(&rep.body);
    int rc = CK_OK;
    long long deadline = s3_now_ms() + self->timeout_ms; /* for every page together */
    for (int page_no = 0;; page_no++) {
        /* Parameters in code-point order: the query is signed as it is sent. */
        url.len = 0;
        ck__buf_adds(&url, self->list_url);
        ck__buf_addc(&url, '?');
        if (page_no) {
            ck__buf_adds(&url, "continuation-token=");
            ck__s3_uri_encode(&url, token.data ? token.data : "", token.len, 0);
            ck__buf_addc(&url, '&');
        }
        ck__buf_printf(&url, "list-type=2&max-keys=%u&prefix=", self->max_keys);
        ck__s3_uri_encode(&url, self->prefix, self->prefix_len, 0);
        ck__s3_uri_encode(&url, prefix ? prefix : "", plen, 0);
        if (!page_no && start_after) {
            ck__buf_adds(&url, "&start-after=");
            ck__s3_uri_encode(&url, self->prefix, self->prefix_len, 0);
            ck__s3_uri_encode(&url, start_after, alen, 0);
        }
        if (url.failed) {
            rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
            break;
        }
        s3_req req = {"LIST", url.data, NULL, 0, 0, S3_META_LIMIT};
        int maybe_applied;
        rc = s3_call(self, &req, &rep, deadline, &maybe_applied, err);
        if (!rc && rep.status != 200) rc = s3_http_fail("LIST", &rep, 1, err);
        if (rc) break;
        ck__s3_page page;
        int parsed = ck__s3_parse_list(rep.body.data, rep.body.len, &page, s3_list_key, &l);
        if (parsed == -2 || l.last.failed) {
            rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        } else if (l.out_of_order) {
            rc = ck__fail(err, CK_EIO, "the S3 listing is not in key order", CK_NONE,
                          "S3 LIST: keys out of order");
        } else if (parsed < 0) {
            rc = ck__fail(err, CK_EIO, "the S3 listing could not be read", CK_NONE,
                          "S3 LIST: not a ListObjectsV2 reply");
        } else if (!l.stopped && page.truncated &&
                   (!page.token.len || (token.len == page.token.len &&
                                        memcmp(token.data, page.token.data, token.len) == 0))) {
            rc = ck__fail(err, CK_EIO, "the S3 listing could not be read", CK_NONE,
                          "S3 LIST: truncated page without a new continuation token");
        }
        int more = !rc && !l.stopped && page.truncated;
        if (more) {
            token.len = 0;
            ck__buf_add(&token, page.token.data, page.token.len);
            if (token.failed) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        }
        ck__buf_dispose(&page.token);
        if (rc || !more) break;
    }
    if (rc == CK_OK) ck__error_clear(err);
    ck__buf_dispose(&rep.body);
    ck__buf_dispose(&token);
    ck__buf_dispose(&url);
    ck__buf_dispose(&l.last);
    return rc;
}
