/* The S3 evidence backend. Three parts:
 *   - offline: URL, credential and key checks, and the constructor under failing allocations;
 *   - a scripted HTTP server (a forked child on 127.0.0.1) for what a real server cannot be
 *     made to do on demand: 503 and 429 with Retry-After, malformed or out-of-order listings,
 *     and a conditional put whose first attempt got lost;
 *   - a real SeaweedFS server started for this run by tools/seaweedfs.sh on loopback ports:
 *     round trips, conflicts between threads, paged listings, a wrong secret, hostile keys,
 *     the server killed, stopped and restarted; and sessions whose records live there: resumed
 *     in another process, two processes on one session, a session across a dead server.
 * Without the SeaweedFS binary the last part is skipped with one line, unless CK_REQUIRE_S3=1
 * (as in CI), which makes that a failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../../csrc/src/store.h"
#include "harness.h"
#include "records.h"
#include "s3_server.h"

static const char ACCESS[] = "ckTestAccessKey";
static const char SECRET[] = "ckTestSecretKey0123456789abcdefghijklmno";
static const char TOKEN[] = "ckTestSessionToken4f1e9c2b7a";
static const char WRONG_SECRET[] = "wrongSecretKey9876543210zyxwvutsrqponmlk";
static const char BUCKET[] = "ctxkeel-test";

/* Every error text any test saw, checked at the end for credentials. */
static char *seen_text;
static size_t seen_len;

static void seen(const ck_error *e) {
    const char *parts[2] = {e->msg ? e->msg : "", e->where};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(parts[i]);
        char *grown = realloc(seen_text, seen_len + n + 2);
        if (!grown) return;
        seen_text = grown;
        memcpy(seen_text + seen_len, parts[i], n);
        seen_len += n;
        seen_text[seen_len++] = '\n';
        seen_text[seen_len] = '\0';
    }
}

static void set_credentials(const char *secret, const char *token) {
    setenv("AWS_ACCESS_KEY_ID", ACCESS, 1);
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
    if (token) setenv("AWS_SESSION_TOKEN", token, 1);
    else unsetenv("AWS_SESSION_TOKEN");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A backend from a URL; NULL (and the error recorded) when it cannot be made. */
static ck_s3_backend *backend(const char *url, ck_error *err) {
    ck_s3_backend *b = ck_s3_backend_new(url, strlen(url), err);
    if (!b) seen(err);
    return b;
}

static int be_put(ck_s3_backend *b, const char *key, const char *data, size_t len, ck_error *e) {
    const ck_evidence_backend *vt = ck_s3_backend_evidence(b);
    int rc = vt->put(vt->ctx, key, data, len, e);
    if (rc) seen(e);
    return rc;
}

static int be_put_new(ck_s3_backend *b, const char *key, const char *data, size_t len,
                      ck_error *e) {
    const ck_evidence_backend *vt = ck_s3_backend_evidence(b);
    int rc = vt->put_new(vt->ctx, key, data, len, e);
    if (rc) seen(e);
    return rc;
}

static int be_get(ck_s3_backend *b, const char *key, char **out, size_t *len, ck_error *e) {
    const ck_evidence_backend *vt = ck_s3_backend_evidence(b);
    int rc = vt->get(vt->ctx, key, out, len, e);
    if (rc) seen(e);
    return rc;
}

/* What a listing saw: the keys joined by '\n', and a stop after `stop_after` keys (0: none). */
typedef struct listed {
    char text[65536];
    size_t len;
    int count, stop_after;
} listed;

static int on_key(void *ctx, const char *key, size_t len) {
    listed *l = ctx;
    if (key[len] != '\0') return 1; /* the promise: NUL-terminated at key[len] */
    if (l->len + len + 1 < sizeof l->text) {
        memcpy(l->text + l->len, key, len);
        l->len += len;
        l->text[l->len++] = '\n';
        l->text[l->len] = '\0';
    }
    l->count++;
    return l->stop_after && l->count >= l->stop_after;
}

static int be_list(ck_s3_backend *b, const char *prefix, const char *after, listed *l,
                   ck_error *e) {
    const ck_evidence_backend *vt = ck_s3_backend_evidence(b);
    l->len = 0;
    l->text[0] = '\0';
    l->count = 0;
    int rc = vt->list(vt->ctx, prefix, after, on_key, l, e);
    if (rc) seen(e);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* Offline                                                                                  */
/* ---------------------------------------------------------------------------------------- */

TEST(test_url_errors) {
    static const struct {
        const char *url, *where;
    } BAD[] = {
        {"", "url.scheme"},
        {"http://bucket/x?region=us-east-1", "url.scheme"},
        {"S3://bucket?region=us-east-1", "url.scheme"},
        {"s3://", "url.bucket"},
        {"s3:///prefix?region=us-east-1", "url.bucket"},
        {"s3://?region=us-east-1", "url.bucket"},
        {"s3://UPPER/x?region=us-east-1", "url.bucket"},
        {"s3://ab?region=us-east-1", "url.bucket"},
        {"s3://-bucket?region=us-east-1", "url.bucket"},
        {"s3://bu..cket?region=us-east-1", "url.bucket"},
        {"s3://bucket_x?region=us-east-1", "url.bucket"},
        {"s3://bucket/a//b?region=us-east-1", "url.prefix"},
        {"s3://bucket//a?region=us-east-1", "url.prefix"},
        {"s3://bucket/../up?region=us-east-1", "url.prefix"},
        {"s3://bucket/a/./b?region=us-east-1", "url.prefix"},
        {"s3://bucket/a/..?region=us-east-1", "url.prefix"},
        {"s3://bucket/a%2e%2e?region=us-east-1", "url.prefix"},
        {"s3://bucket/a b?region=us-east-1", "url.prefix"},
        {"s3://bucket/a\\b?region=us-east-1", "url.prefix"},
        {"s3://bucket/caf\xc3\xa9?region=us-east-1", "url.prefix"},
        {"s3://bucket/x#frag?region=us-east-1", "url"},
        {"s3://bucket/x?region=US-EAST-1", "url.region"},
        {"s3://bucket/x?region=us east", "url.region"},
        {"s3://bucket/x?region=us-east-1&region=eu-west-1", "url.region"},
        {"s3://bucket/x?region=us-east-1&endpoint=ftp://127.0.0.1:21", "url.endpoint"},
        {"s3://bucket/x?region=us-east-1&endpoint=http://user:pw@127.0.0.1:1", "url.endpoint"},
        {"s3://bucket/x?region=us-east-1&endpoint=http://127.0.0.1:1/path", "url.endpoint"},
        {"s3://bucket/x?region=us-east-1&endpoint=http://127.0.0.1:99999", "url.endpoint"},
        {"s3://bucket/x?region=us-east-1&endpoint=http://", "url.endpoint"},
        {"s3://bucket/x?region=us-east-1&endpoint=http%3A%2F%2Fh%0D%0AX:1", "url.endpoint"},
        {"s3://bucket/x?region=us-east-1&timeout=0", "url.timeout"},
        {"s3://bucket/x?region=us-east-1&timeout=-1", "url.timeout"},
        {"s3://bucket/x?region=us-east-1&timeout=ten", "url.timeout"},
        {"s3://bucket/x?region=us-east-1&timeout=1e9", "url.timeout"},
        {"s3://bucket/x?region=us-east-1&retries=11", "url.retries"},
        {"s3://bucket/x?region=us-east-1&retries=1.5", "url.retries"},
        {"s3://bucket/x?region=us-east-1&max_keys=0", "url.max_keys"},
        {"s3://bucket/x?region=us-east-1&max_keys=1001", "url.max_keys"},
        {"s3://bucket/x?region=us-east-1&bogus=1", "url.bogus"},
        {"s3://bucket/x?region", "url.query"},
        {"s3://bucket/x?region=", "url.query"},
        {"s3://bucket/x?region=us-east-1&&timeout=1", "url.query"},
        {"s3://bucket/x?region=us-east-1&timeout=%zz", "url.timeout"},
    };
    set_credentials(SECRET, NULL);
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        ck_error err;
        ck_s3_backend *b = backend(BAD[i].url, &err);
        OK(b == NULL);
        INT_EQ(err.code, CK_EINVAL);
        STR_EQ(err.where, BAD[i].where);
        OK(err.msg && strlen(err.msg) > 10);
        ck_s3_backend_free(b);
    }
    /* A NUL inside the given length, and a NULL URL. */
    ck_error err;
    OK(ck_s3_backend_new("s3://bucket\0/x?region=us-east-1", 30, &err) == NULL);
    STR_EQ(err.where, "url");
    OK(ck_s3_backend_new(NULL, 0, &err) == NULL);
    INT_EQ(err.code, CK_EINVAL);
    /* The length is honoured: the bytes after it are not read. */
    const char *longer = "s3://bucket/p?region=us-east-1&bogus=1";
    ck_s3_backend *b = ck_s3_backend_new(longer, strlen("s3://bucket/p?region=us-east-1"), &err);
    OK(b != NULL);
    ck_s3_backend_free(b);
    /* No region in the URL: AWS_REGION, then AWS_DEFAULT_REGION, then an error. */
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    OK(backend("s3://bucket/p", &err) == NULL);
    STR_EQ(err.where, "url.region");
    setenv("AWS_DEFAULT_REGION", "eu-central-1", 1);
    b = backend("s3://bucket/p", &err);
    OK(b != NULL);
    STR_EQ(ck_s3_backend_url(b), "s3://bucket/p/?region=eu-central-1");
    ck_s3_backend_free(b);
    setenv("AWS_REGION", "Bad Region", 1);
    OK(backend("s3://bucket/p", &err) == NULL);
    STR_EQ(err.where, "AWS_REGION");
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
}

TEST(test_url_normalized) {
    static const struct {
        const char *url, *normal;
    } GOOD[] = {
        {"s3://bucket?region=us-east-1", "s3://bucket/?region=us-east-1"},
        {"s3://bucket/?region=us-east-1", "s3://bucket/?region=us-east-1"},
        {"s3://bucket/a/b?region=eu-west-1", "s3://bucket/a/b/?region=eu-west-1"},
        {"s3://my.bucket-1/a/b/?region=eu-west-1&timeout=2.5&retries=0&max_keys=7",
         "s3://my.bucket-1/a/b/?region=eu-west-1"},
        {"s3://bucket/x?endpoint=http%3A%2F%2F127.0.0.1%3A8333%2F&region=us-east-1",
         "s3://bucket/x/?region=us-east-1&endpoint=http://127.0.0.1:8333"},
        {"s3://bucket/x~y.z_w-v?region=us-east-1&endpoint=https://[::1]:9000",
         "s3://bucket/x~y.z_w-v/?region=us-east-1&endpoint=https://[::1]:9000"},
    };
    set_credentials(SECRET, TOKEN);
    for (size_t i = 0; i < sizeof GOOD / sizeof GOOD[0]; i++) {
        ck_error err;
        ck_s3_backend *b = backend(GOOD[i].url, &err);
        OK(b != NULL);
        STR_EQ(ck_s3_backend_url(b), GOOD[i].normal);
        const ck_evidence_backend *vt = ck_s3_backend_evidence(b);
        OK(vt && vt->ctx == b && vt->put && vt->get && vt->put_new && vt->list);
        ck_s3_backend_free(b);
    }
    OK(ck_s3_backend_evidence(NULL) == NULL);
    OK(ck_s3_backend_url(NULL) == NULL);
    ck_s3_backend_free(NULL);
}

TEST(test_credentials_required) {
    ck_error err;
    const char *url = "s3://bucket/p?region=us-east-1";
    set_credentials(SECRET, NULL);
    unsetenv("AWS_ACCESS_KEY_ID");
    OK(backend(url, &err) == NULL);
    INT_EQ(err.code, CK_EINVAL);
    STR_EQ(err.where, "AWS_ACCESS_KEY_ID");
    set_credentials(SECRET, NULL);
    setenv("AWS_SECRET_ACCESS_KEY", "", 1);
    OK(backend(url, &err) == NULL);
    STR_EQ(err.where, "AWS_SECRET_ACCESS_KEY");
    /* A credential that would split a header line is refused, and not quoted. */
    setenv("AWS_SECRET_ACCESS_KEY", "secret-with\r\nInjected: header", 1);
    OK(backend(url, &err) == NULL);
    STR_EQ(err.where, "AWS_SECRET_ACCESS_KEY");
    OK(strstr(err.msg, "secret-with") == NULL);
    set_credentials(SECRET, "token\nX-Evil: 1");
    OK(backend(url, &err) == NULL);
    STR_EQ(err.where, "AWS_SESSION_TOKEN");
    set_credentials(SECRET, NULL);
}

TEST(test_new_fails_cleanly) {
    set_credentials(SECRET, TOKEN);
    const char *url = "s3://bucket/a/b?region=us-east-1&endpoint=http://127.0.0.1:9&timeout=1";
    FAIL_EACH_ALLOC({
        ck_error err;
        ck_s3_backend *b = ck_s3_backend_new(url, strlen(url), &err);
        if (!b) OK(err.code == CK_ENOMEM);
        ck_s3_backend_free(b);
    });
    set_credentials(SECRET, NULL);
}

/* Keys that could name something else after URL normalization, or that are not keys at all,
 * are refused before any request (the endpoint here has no server: a request would give
 * CK_EIO, not CK_EINVAL). */
TEST(test_hostile_keys_refused) {
    set_credentials(SECRET, NULL);
    ck_error err;
    ck_s3_backend *b = backend("s3://bucket/p?region=us-east-1&endpoint=http://127.0.0.1:9", &err);
    OK(b != NULL);
    if (!b) return;
    char long_key[1100];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    const char *keys[] = {"",        "/abs",       "../x",      "a/../../etc/passwd",
                          "a/./b",   "a//b",       "a/",        ".",
                          "..",      "%2e%2e/x",   "a?b=c",     "a#b",
                          "a b",     "a\nb",       "a\\b",      "caf\xc3\xa9",
                          "a&b",     "a+b",        "a:b",       long_key};
    const ck_evidence_backend *vt = ck_s3_backend_evidence(b);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char *out = (char *)1;
        size_t n = 7;
        INT_EQ(vt->put(vt->ctx, keys[i], "x", 1, &err), CK_EINVAL);
        OK(strncmp(err.where, "key", 3) == 0);
        INT_EQ(vt->put_new(vt->ctx, keys[i], "x", 1, &err), CK_EINVAL);
        INT_EQ(vt->get(vt->ctx, keys[i], &out, &n, &err), CK_EINVAL);
        OK(out == NULL && n == 0);
    }
    listed l = {.stop_after = 0};
    const char *prefixes[] = {"a b", "a?", "a&b", "caf\xc3\xa9", long_key};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        INT_EQ(vt->list(vt->ctx, prefixes[i], NULL, on_key, &l, &err), CK_EINVAL);
        OK(strncmp(err.where, "prefix", 6) == 0);
        INT_EQ(vt->list(vt->ctx, "", prefixes[i], on_key, &l, &err), CK_EINVAL);
        OK(strncmp(err.where, "start_after", 11) == 0);
    }
    INT_EQ(l.count, 0);
    INT_EQ(vt->list(vt->ctx, "", NULL, NULL, &l, &err), CK_EINVAL);
    /* Allowed keys do reach the network, and fail there, clearly and quickly. */
    INT_EQ(vt->put(vt->ctx, "tool_results/s/..hidden~1.txt", "x", 1, &err), CK_EIO);
    OK(strstr(err.where, "S3 PUT: ") == err.where);
    seen(&err);
    ck_s3_backend_free(b);
}

/* ---------------------------------------------------------------------------------------- */
/* A scripted server                                                                        */
/* ---------------------------------------------------------------------------------------- */

typedef struct scripted {
    const char *head; /* "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n" */
    const char *body;
} scripted;

typedef struct script_server {
    pid_t pid;
    int port;
    int requests_fd; /* read end: every request received, each followed by "\n=====\n" */
} script_server;

/* Answers `n` connections with the scripted replies, one each, each after `stall_ms`, then
 * exits. */
static void script_serve(int fd, const scripted *replies, int n, int stall_ms, int out) {
    for (int i = 0; i < n; i++) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) _exit(1);
        static char req[1 << 20];
        size_t got = 0, want = 0;
        for (;;) {
            ssize_t r = read(c, req + got, sizeof req - 1 - got);
            if (r <= 0) break;
            got += (size_t)r;
            req[got] = '\0';
            char *end = strstr(req, "\r\n\r\n");
            if (end && !want) {
                const char *cl = strstr(req, "\r\nContent-Length: ");
                want = (size_t)(end - req) + 4 + (cl ? (size_t)atol(cl + 18) : 0);
            }
            if (want && got >= want) break;
        }
        if (write(out, req, got) < 0 || write(out, "\n=====\n", 7) < 0) _exit(1);
        if (stall_ms) usleep((useconds_t)stall_ms * 1000);
        char resp[1 << 16];
        int len = snprintf(resp, sizeof resp,
                           "%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                           replies[i].head, strlen(replies[i].body), replies[i].body);
        if (write(c, resp, (size_t)len) < 0) {
            /* the client gave up; that is what some tests look for */
        }
        close(c);
    }
    _exit(0);
}

static int script_start_slow(script_server *s, const scripted *replies, int n, int stall_ms) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), pipes[2];
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) || listen(fd, 16) ||
        getsockname(fd, (struct sockaddr *)&addr, &alen) || pipe(pipes))
        return -1;
    s->port = ntohs(addr.sin_port);
    fflush(NULL);
    s->pid = fork();
    if (s->pid == 0) {
        close(pipes[0]);
        script_serve(fd, replies, n, stall_ms, pipes[1]);
    }
    close(fd);
    close(pipes[1]);
    s->requests_fd = pipes[0];
    return s->pid > 0 ? 0 : -1;
}

static int script_start(script_server *s, const scripted *replies, int n) {
    return script_start_slow(s, replies, n, 0);
}

/* Waits for the server (killing it if it still waits for connections) and returns every
 * request it received; free() it. */
static char *script_finish(script_server *s) {
    size_t cap = 1 << 16, n = 0;
    char *all = malloc(cap);
    kill(s->pid, SIGTERM);
    for (ssize_t r; all && (r = read(s->requests_fd, all + n, cap - n - 1)) > 0;) {
        n += (size_t)r;
        if (cap - n < 2) {
            char *grown = realloc(all, cap *= 2);
            if (!grown) free(all);
            all = grown;
        }
    }
    if (all) all[n] = '\0';
    close(s->requests_fd);
    waitpid(s->pid, NULL, 0);
    return all;
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static ck_s3_backend *script_backend(const script_server *s, const char *params) {
    char url[512];
    snprintf(url, sizeof url, "s3://%s/pre?region=us-east-1&endpoint=http://127.0.0.1:%d%s%s",
             BUCKET, s->port, params[0] ? "&" : "", params);
    ck_error err;
    return backend(url, &err);
}

#define OK_XML "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"

TEST(test_retries_5xx_and_429) {
    set_credentials(SECRET, TOKEN);
    static const scripted replies[] = {
        {"HTTP/1.1 503 Service Unavailable\r\n", "<Error><Code>SlowDown</Code></Error>"},
        {"HTTP/1.1 429 Too Many Requests\r\n", ""},
        {"HTTP/1.1 500 Internal Server Error\r\n", ""},
        {"HTTP/1.1 200 OK\r\n", "stored text"},
    };
    script_server s;
    OK(script_start(&s, replies, 4) == 0);
    ck_s3_backend *b = script_backend(&s, "retries=3&timeout=20");
    char *out = NULL;
    size_t n = 0;
    ck_error err;
    INT_EQ(be_get(b, "tool_results/s/a.txt", &out, &n, &err), CK_OK);
    MEM_EQ(out, n, "stored text");
    ck_free(out);
    ck_s3_backend_free(b);
    char *reqs = script_finish(&s);
    OK(reqs != NULL);
    INT_EQ(count_of(reqs, "GET /ctxkeel-test/pre/tool_results/s/a.txt HTTP/1.1"), 4);
    /* Signed with SigV4 for the region, carrying the session token, never the secret. */
    OK(strstr(reqs, "AWS4-HMAC-SHA256 Credential=ckTestAccessKey/") != NULL);
    OK(strstr(reqs, "/us-east-1/s3/aws4_request") != NULL);
    OK(strstr(reqs, "x-amz-security-token: ckTestSessionToken4f1e9c2b7a") != NULL);
    OK(strstr(reqs, SECRET) == NULL);
    free(reqs);
    set_credentials(SECRET, NULL);
}

TEST(test_retries_exhausted_and_retry_after) {
    set_credentials(SECRET, NULL);
    static const scripted always[] = {
        {"HTTP/1.1 503 Service Unavailable\r\n", "<Error><Code>SlowDown</Code></Error>"},
        {"HTTP/1.1 503 Service Unavailable\r\n", "<Error><Code>SlowDown</Code></Error>"},
        {"HTTP/1.1 503 Service Unavailable\r\n", "<Error><Code>SlowDown</Code></Error>"},
    };
    script_server s;
    OK(script_start(&s, always, 3) == 0);
    ck_s3_backend *b = script_backend(&s, "retries=2");
    ck_error err;
    INT_EQ(be_put(b, "k", "data", 4, &err), CK_EIO);
    STR_EQ(err.where, "S3 PUT: HTTP 503 server error (SlowDown) (3 attempts)");
    ck_s3_backend_free(b);
    char *reqs = script_finish(&s);
    INT_EQ(count_of(reqs, "PUT /ctxkeel-test/pre/k HTTP/1.1"), 3);
    OK(strstr(reqs, "x-amz-security-token") == NULL);
    free(reqs);

    /* Retry-After within the budget is waited for... */
    static const scripted after[] = {
        {"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n", ""},
        {"HTTP/1.1 200 OK\r\n", ""},
    };
    OK(script_start(&s, after, 2) == 0);
    b = script_backend(&s, "retries=1&timeout=10");
    double t0 = now_s();
    INT_EQ(be_put(b, "k", "data", 4, &err), CK_OK);
    OK(now_s() - t0 >= 0.9);
    ck_s3_backend_free(b);
    free(script_finish(&s));

    /* ...and one past it fails now instead of sleeping through the caller's deadline. */
    static const scripted later[] = {
        {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\n", ""},
        {"HTTP/1.1 200 OK\r\n", ""},
    };
    OK(script_start(&s, later, 2) == 0);
    b = script_backend(&s, "retries=3&timeout=3");
    t0 = now_s();
    INT_EQ(be_put(b, "k", "data", 4, &err), CK_EIO);
    OK(now_s() - t0 < 3);
    STR_EQ(err.where, "S3 PUT: HTTP 429 too many requests");
    ck_s3_backend_free(b);
    reqs = script_finish(&s);
    INT_EQ(count_of(reqs, "PUT /ctxkeel-test/pre/k"), 1);
    free(reqs);

    /* A 4xx other than 429 is final: one request. */
    static const scripted bad[] = {
        {"HTTP/1.1 400 Bad Request\r\n", "<Error><Code>InvalidRequest</Code></Error>"},
    };
    OK(script_start(&s, bad, 1) == 0);
    b = script_backend(&s, "retries=3");
    INT_EQ(be_put(b, "k", "data", 4, &err), CK_EIO);
    STR_EQ(err.where, "S3 PUT: HTTP 400 (InvalidRequest)");
    ck_s3_backend_free(b);
    free(script_finish(&s));
}

TEST(test_not_found_and_no_bucket) {
    set_credentials(SECRET, NULL);
    static const scripted replies[] = {
        {"HTTP/1.1 404 Not Found\r\n", "<Error><Code>NoSuchKey</Code></Error>"},
        {"HTTP/1.1 404 Not Found\r\n", ""},
        {"HTTP/1.1 404 Not Found\r\n", "<Error><Code>NoSuchBucket</Code></Error>"},
        {"HTTP/1.1 200 OK\r\n", ""},
    };
    script_server s;
    OK(script_start(&s, replies, 4) == 0);
    ck_s3_backend *b = script_backend(&s, "");
    char *out = (char *)1;
    size_t n = 9;
    ck_error err;
    INT_EQ(be_get(b, "a", &out, &n, &err), CK_OK);
    OK(out == NULL && n == 0);
    INT_EQ(be_get(b, "a", &out, &n, &err), CK_OK);
    OK(out == NULL);
    INT_EQ(be_get(b, "a", &out, &n, &err), CK_EIO);
    STR_EQ(err.where, "S3 GET: HTTP 404 no such bucket (NoSuchBucket)");
    /* An empty object is a text of length 0, not "not stored". */
    INT_EQ(be_get(b, "a", &out, &n, &err), CK_OK);
    OK(out != NULL && n == 0);
    ck_free(out);
    ck_s3_backend_free(b);
    free(script_finish(&s));
}

/* A put_new whose first attempt failed after it may have reached the server: a 412 then
 * means "ours" exactly when the object holds our bytes. */
TEST(test_put_new_after_lost_attempt) {
    set_credentials(SECRET, NULL);
    static const scripted ours[] = {
        {"HTTP/1.1 502 Bad Gateway\r\n", ""},
        {"HTTP/1.1 412 Precondition Failed\r\n", "<Error><Code>PreconditionFailed</Code></Error>"},
        {"HTTP/1.1 200 OK\r\n", "record 7"},
    };
    script_server s;
    OK(script_start(&s, ours, 3) == 0);
    ck_s3_backend *b = script_backend(&s, "retries=2");
    ck_error err;
    INT_EQ(be_put_new(b, "compactions/s/7", "record 7", 8, &err), CK_OK);
    ck_s3_backend_free(b);
    char *reqs = script_finish(&s);
    INT_EQ(count_of(reqs, "If-None-Match: *"), 2);
    INT_EQ(count_of(reqs, "GET /ctxkeel-test/pre/compactions/s/7"), 1);
    free(reqs);

    static const scripted theirs[] = {
        {"HTTP/1.1 503 Service Unavailable\r\n", ""},
        {"HTTP/1.1 412 Precondition Failed\r\n", ""},
        {"HTTP/1.1 200 OK\r\n", "another writer's record 7"},
    };
    OK(script_start(&s, theirs, 3) == 0);
    b = script_backend(&s, "retries=2");
    INT_EQ(be_put_new(b, "compactions/s/7", "record 7", 8, &err), CK_ECONFLICT);
    STR_EQ(err.where, "S3 PUT: an object exists under the key");
    ck_s3_backend_free(b);
    free(script_finish(&s));

    /* Without an earlier attempt, a 412 is a conflict at once: no read-back. */
    static const scripted plain[] = {{"HTTP/1.1 412 Precondition Failed\r\n", ""}};
    OK(script_start(&s, plain, 1) == 0);
    b = script_backend(&s, "");
    INT_EQ(be_put_new(b, "compactions/s/7", "record 7", 8, &err), CK_ECONFLICT);
    INT_EQ(err.code, CK_ECONFLICT);
    ck_s3_backend_free(b);
    reqs = script_finish(&s);
    INT_EQ(count_of(reqs, "GET "), 0);
    free(reqs);
}

TEST(test_list_replies) {
    set_credentials(SECRET, NULL);
    static const scripted pages[] = {
        {OK_XML, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
                 "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>ctxkeel-test</Name>"
                 "<Prefix>pre/r/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
                 "<IsTruncated>true</IsTruncated><Contents><Key>pre/r/a&amp;b&lt;c&gt;&quot;"
                 "&apos;</Key><Size>1</Size></Contents><Contents><Key>pre/r/caf&#233;&#x2603;"
                 "</Key></Contents><NextContinuationToken>tok/+=&amp;1</NextContinuationToken>"
                 "</ListBucketResult>"},
        {OK_XML, "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/r/z"
                 "</Key></Contents></ListBucketResult>"},
    };
    script_server s;
    OK(script_start(&s, pages, 2) == 0);
    ck_s3_backend *b = script_backend(&s, "max_keys=2");
    listed l = {.stop_after = 0};
    ck_error err;
    INT_EQ(be_list(b, "r/", "r/0", &l, &err), CK_OK);
    INT_EQ(l.count, 3);
    STR_EQ(l.text, "r/a&b<c>\"'\nr/caf\xc3\xa9\xe2\x98\x83\nr/z\n");
    ck_s3_backend_free(b);
    char *reqs = script_finish(&s);
    /* Parameters sorted and encoded as signed; start-after only on the first page. */
    OK(strstr(reqs, "GET /ctxkeel-test?list-type=2&max-keys=2&prefix=pre%2Fr%2F&start-after="
                    "pre%2Fr%2F0 HTTP/1.1") != NULL);
    OK(strstr(reqs, "GET /ctxkeel-test?continuation-token=tok%2F%2B%3D%261&list-type=2&max-keys"
                    "=2&prefix=pre%2Fr%2F HTTP/1.1") != NULL);
    free(reqs);

    /* Replies that are not listings, or not trustworthy ones, are errors. */
    static const struct {
        const char *body, *where;
    } BAD[] = {
        {"<html>hello</html>", "S3 LIST: not a ListObjectsV2 reply"},
        {"<ListBucketResult><Contents><Key>pre/a</Key>", "S3 LIST: not a ListObjectsV2 reply"},
        {"<ListBucketResult><Contents><Key>pre/a&bogus;</Key></Contents></ListBucketResult>",
         "S3 LIST: not a ListObjectsV2 reply"},
        {"<ListBucketResult><Contents><Key>pre/a&#0;</Key></Contents></ListBucketResult>",
         "S3 LIST: not a ListObjectsV2 reply"},
        {"<ListBucketResult><Contents><Key>pre/a&#xD800;</Key></Contents></ListBucketResult>",
         "S3 LIST: not a ListObjectsV2 reply"},
        {"<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
         "S3 LIST: not a ListObjectsV2 reply"},
        {"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
         "S3 LIST: truncated page without a new continuation token"},
        {"<ListBucketResult><Contents><Key>pre/b</Key></Contents><Contents><Key>pre/a</Key>"
         "</Contents></ListBucketResult>",
         "S3 LIST: keys out of order"},
        {"<ListBucketResult><Contents><Key>pre/a</Key></Contents><Contents><Key>pre/a</Key>"
         "</Contents></ListBucketResult>",
         "S3 LIST: keys out of order"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        scripted one[] = {{OK_XML, BAD[i].body}};
        OK(script_start(&s, one, 1) == 0);
        b = script_backend(&s, "");
        INT_EQ(be_list(b, "", NULL, &l, &err), CK_EIO);
        STR_EQ(err.where, BAD[i].where);
        ck_s3_backend_free(b);
        free(script_finish(&s));
    }
    /* Keys outside the backend's prefix (a server that ignored it) are not reported. */
    static const scripted foreign[] = {
        {OK_XML, "<ListBucketResult><Contents><Key>other/x</Key></Contents><Contents><Key>"
                 "pre/y</Key></Contents></ListBucketResult>"},
    };
    OK(script_start(&s, foreign, 1) == 0);
    b = script_backend(&s, "");
    INT_EQ(be_list(b, "", NULL, &l, &err), CK_OK);
    STR_EQ(l.text, "y\n");
    ck_s3_backend_free(b);
    free(script_finish(&s));
}

/* One timeout covers the whole call: every page of a listing, and the read-back of a put_new,
 * although each request alone would fit in it. */
TEST(test_one_deadline_per_call) {
    set_credentials(SECRET, NULL);
    static const scripted pages[] = {
        {OK_XML, "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>pre/a</Key>"
                 "</Contents><NextContinuationToken>t1</NextContinuationToken></ListBucketResult>"},
        {OK_XML, "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>pre/b</Key>"
                 "</Contents><NextContinuationToken>t2</NextContinuationToken></ListBucketResult>"},
        {OK_XML, "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>pre/c</Key>"
                 "</Contents><NextContinuationToken>t3</NextContinuationToken></ListBucketResult>"},
        {OK_XML, "<ListBucketResult><Contents><Key>pre/d</Key></Contents></ListBucketResult>"},
    };
    script_server s;
    OK(script_start_slow(&s, pages, 4, 700) == 0);
    ck_s3_backend *b = script_backend(&s, "timeout=2&retries=0");
    listed l = {.stop_after = 0};
    ck_error err;
    double t0 = now_s();
    INT_EQ(be_list(b, "", NULL, &l, &err), CK_ETIMEDOUT);
    OK(now_s() - t0 < 2.0 + 1.0);
    INT_EQ(l.count, 2); /* the keys of the pages that came in time stay reported */
    ck_s3_backend_free(b);
    free(script_finish(&s));

    static const scripted lost[] = {
        {"HTTP/1.1 503 Service Unavailable\r\n", ""},
        {"HTTP/1.1 412 Precondition Failed\r\n", ""},
        {"HTTP/1.1 200 OK\r\n", "record 7"},
    };
    OK(script_start_slow(&s, lost, 3, 800) == 0);
    b = script_backend(&s, "timeout=2&retries=2");
    t0 = now_s();
    INT_EQ(be_put_new(b, "compactions/s/7", "record 7", 8, &err), CK_EIO);
    OK(now_s() - t0 < 2.0 + 1.0);
    STR_EQ(err.where, "S3 PUT: exists, and reading it back failed");
    ck_s3_backend_free(b);
    free(script_finish(&s));
}

/* ---------------------------------------------------------------------------------------- */
/* A real SeaweedFS server                                                                  */
/* ---------------------------------------------------------------------------------------- */

static s3_server srv;

static int srv_start(void) {
    double t0 = now_s();
    int rc = s3_server_start(&srv, ACCESS, SECRET, BUCKET);
    if (rc == 0) printf("test_s3: SeaweedFS answers at %s (%.1f s to start)\n", srv.endpoint,
                        now_s() - t0);
    return rc;
}

/* The state letter of process `pid` in /proc ('R', 'S', 'T' stopped, 'Z' zombie), or 0 when
 * it is gone. */
static char proc_state(pid_t pid) {
    char path[64], state = 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%*d %*s %c", &state) != 1) state = 0;
    fclose(f);
    return state;
}

/* Waits up to 5 s for `pid` to reach a state for which done() holds. */
static int wait_state(pid_t pid, int (*done)(char state)) {
    for (int i = 0; i < 100; i++) {
        if (done(proc_state(pid))) return 1;
        usleep(50000);
    }
    return 0;
}

static int is_dead(char state) { return state == 0 || state == 'Z'; }
static int is_stopped(char state) { return state == 'T'; }

/* A backend on the test server with `prefix` and extra parameters. */
static ck_s3_backend *srv_backend(const char *prefix, const char *params) {
    char url[512];
    snprintf(url, sizeof url, "s3://%s/%s?region=us-east-1&endpoint=%s%s%s", BUCKET, prefix,
             srv.endpoint, params[0] ? "&" : "", params);
    ck_error err;
    ck_s3_backend *b = backend(url, &err);
    if (!b) fprintf(stderr, "    backend %s: %s (%s)\n", url, err.msg, err.where);
    return b;
}

/* A run-unique prefix, so that a server reused across runs starts each test clean. */
static char run_id[32];
static const char *pfx(const char *name) {
    static char buf[8][128];
    static int next;
    char *out = buf[next++ % 8];
    snprintf(out, 128, "%s-%s", run_id, name);
    return out;
}

TEST(test_round_trips) {
    set_credentials(SECRET, NULL);
    ck_s3_backend *b = srv_backend(pfx("rt"), "");
    OK(b != NULL);
    if (!b) return;
    ck_error err;
    /* Every byte value, NUL included, and an 8 MiB text of pseudo-random bytes. */
    char all[512];
    for (int i = 0; i < 512; i++) all[i] = (char)(i & 255);
    size_t big_len = (size_t)8 << 20;
    char *big = malloc(big_len);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; big && i < big_len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        big[i] = (char)(x >> 56);
    }
    const struct {
        const char *key;
        const char *data;
        size_t len;
    } cases[] = {
        {"tool_results/sess/call_1.txt", "hello\nworld\n", 12},
        {"tool_results/sess/empty.txt", "", 0},
        {"tool_results/sess/binary~0123456789abcdef.txt", all, sizeof all},
        {"tool_results/sess/big.txt", big, big_len},
        {"compactions/sess/00000001", "{\"seq\":1}", 9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!cases[i].data) continue;
        INT_EQ(be_put(b, cases[i].key, cases[i].data, cases[i].len, &err), CK_OK);
        char *out = NULL;
        size_t n = 0;
        INT_EQ(be_get(b, cases[i].key, &out, &n, &err), CK_OK);
        OK(out != NULL);
        INT_EQ(n, cases[i].len);
        OK(out && n == cases[i].len && memcmp(out, cases[i].data, n) == 0);
        ck_free(out);
    }
    /* put replaces (the core never relies on that, but a host may). */
    INT_EQ(be_put(b, "tool_results/sess/call_1.txt", "second", 6, &err), CK_OK);
    char *out = NULL;
    size_t n = 0;
    INT_EQ(be_get(b, "tool_results/sess/call_1.txt", &out, &n, &err), CK_OK);
    MEM_EQ(out, n, "second");
    ck_free(out);
    /* A missing key is "not stored", not an error; so is one under another prefix. */
    out = (char *)1;
    INT_EQ(be_get(b, "tool_results/sess/never-written.txt", &out, &n, &err), CK_OK);
    OK(out == NULL && n == 0);
    ck_s3_backend *other = srv_backend(pfx("rt-other"), "");
    INT_EQ(be_get(other, "tool_results/sess/call_1.txt", &out, &n, &err), CK_OK);
    OK(out == NULL);
    ck_s3_backend_free(other);
    free(big);
    ck_s3_backend_free(b);
}

TEST(test_put_new_conflict) {
    set_credentials(SECRET, NULL);
    ck_s3_backend *b = srv_backend(pfx("pn"), "");
    OK(b != NULL);
    if (!b) return;
    ck_error err;
    INT_EQ(be_put_new(b, "compactions/s/00000001", "first", 5, &err), CK_OK);
    INT_EQ(be_put_new(b, "compactions/s/00000001", "second", 6, &err), CK_ECONFLICT);
    INT_EQ(err.code, CK_ECONFLICT);
    STR_EQ(err.where, "S3 PUT: an object exists under the key");
    char *out = NULL;
    size_t n = 0;
    INT_EQ(be_get(b, "compactions/s/00000001", &out, &n, &err), CK_OK);
    MEM_EQ(out, n, "first");
    ck_free(out);
    /* Even the same bytes again are a conflict: put_new creates, it does not compare. */
    INT_EQ(be_put_new(b, "compactions/s/00000001", "first", 5, &err), CK_ECONFLICT);
    INT_EQ(be_put_new(b, "compactions/s/00000002", "", 0, &err), CK_OK);
    ck_s3_backend_free(b);
}

typedef struct racer {
    ck_s3_backend *b;
    pthread_barrier_t *go;
    int id, rounds;
    int rc[32];
} racer;

static void *race(void *arg) {
    racer *r = arg;
    for (int i = 0; i < r->rounds; i++) {
        char key[64], data[64];
        snprintf(key, sizeof key, "compactions/race/%08d", i);
        snprintf(data, sizeof data, "written by racer %d in round %d", r->id, i);
        pthread_barrier_wait(r->go);
        ck_error err;
        const ck_evidence_backend *vt = ck_s3_backend_evidence(r->b);
        r->rc[i] = vt->put_new(vt->ctx, key, data, strlen(data), &err);
    }
    return NULL;
}

/* Two threads, one backend, one key per round, released together: exactly one wins each
 * round, and the object holds the winner's text. */
TEST(test_put_new_race) {
    set_credentials(SECRET, NULL);
    ck_s3_backend *b = srv_backend(pfx("race"), "");
    OK(b != NULL);
    if (!b) return;
    enum { ROUNDS = 24 };
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    racer r[2] = {{b, &go, 0, ROUNDS, {0}}, {b, &go, 1, ROUNDS, {0}}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, race, &r[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    int wins[2] = {0, 0}, exact = 0;
    for (int i = 0; i < ROUNDS; i++) {
        int a = r[0].rc[i], c = r[1].rc[i];
        int one_wins = (a == CK_OK && c == CK_ECONFLICT) || (a == CK_ECONFLICT && c == CK_OK);
        if (!one_wins) fprintf(stderr, "    round %d: %s and %s\n", i, ck_err_name(a),
                               ck_err_name(c));
        exact += one_wins;
        if (!one_wins) continue;
        int winner = a == CK_OK ? 0 : 1;
        wins[winner]++;
        char key[64], want[64], *out = NULL;
        size_t n = 0;
        ck_error err;
        snprintf(key, sizeof key, "compactions/race/%08d", i);
        snprintf(want, sizeof want, "written by racer %d in round %d", winner, i);
        INT_EQ(be_get(b, key, &out, &n, &err), CK_OK);
        MEM_EQ(out, n, want);
        ck_free(out);
    }
    INT_EQ(exact, ROUNDS);
    printf("test_s3: put_new race: racer 0 won %d rounds, racer 1 won %d\n", wins[0], wins[1]);
    ck_s3_backend_free(b);
}

TEST(test_list_pages) {
    set_credentials(SECRET, NULL);
    /* Pages of 4 keys, so that 30 keys take 8 pages with continuation tokens. */
    ck_s3_backend *b = srv_backend(pfx("ls"), "max_keys=4");
    OK(b != NULL);
    if (!b) return;
    ck_error err;
    char want[4096] = "";
    size_t wl = 0;
    for (int i = 0; i < 30; i++) {
        char key[64];
        snprintf(key, sizeof key, "compactions/s1/%08d", i);
        INT_EQ(be_put_new(b, key, key, strlen(key), &err), CK_OK);
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s\n", key);
    }
    INT_EQ(be_put(b, "compactions/s10/00000000", "x", 1, &err), CK_OK);
    INT_EQ(be_put(b, "compactions/s2/00000000", "x", 1, &err), CK_OK);
    INT_EQ(be_put(b, "tool_results/s1/a.txt", "x", 1, &err), CK_OK);
    listed l = {.stop_after = 0};
    INT_EQ(be_list(b, "compactions/s1/", NULL, &l, &err), CK_OK);
    INT_EQ(l.count, 30);
    STR_EQ(l.text, want);
    /* After a key: the rest, in order. */
    INT_EQ(be_list(b, "compactions/s1/", "compactions/s1/00000019", &l, &err), CK_OK);
    INT_EQ(l.count, 10);
    OK(strncmp(l.text, "compactions/s1/00000020\n", 24) == 0);
    /* After a key that sorts between two stored ones. */
    INT_EQ(be_list(b, "compactions/s1/", "compactions/s1/00000025-", &l, &err), CK_OK);
    INT_EQ(l.count, 4);
    /* A stop from the callback ends the listing early, without error. */
    l.stop_after = 6;
    INT_EQ(be_list(b, "compactions/s1/", NULL, &l, &err), CK_OK);
    INT_EQ(l.count, 6);
    l.stop_after = 0;
    /* A prefix that is not a folder: s1/ and s10/ both start with "compactions/s1". */
    INT_EQ(be_list(b, "compactions/s1", NULL, &l, &err), CK_OK);
    INT_EQ(l.count, 31);
    INT_EQ(be_list(b, "", NULL, &l, &err), CK_OK);
    INT_EQ(l.count, 33);
    OK(strstr(l.text, "tool_results/s1/a.txt\n") != NULL);
    INT_EQ(be_list(b, "nothing/here/", NULL, &l, &err), CK_OK);
    INT_EQ(l.count, 0);
    ck_s3_backend_free(b);
}

/* Byte order where it differs from a folder walk: '-' (0x2D) and '.' (0x2E) sort before '/'
 * (0x2F), '~' after every letter. */
TEST(test_list_byte_order) {
    set_credentials(SECRET, NULL);
    ck_s3_backend *b = srv_backend(pfx("order"), "max_keys=2");
    OK(b != NULL);
    if (!b) return;
    const char *keys[] = {"a/b", "a-c", "a.d", "a~", "a/a/z", "a0", "aZ", "A", "a_b"};
    ck_error err;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        INT_EQ(be_put(b, keys[i], "x", 1, &err), CK_OK);
    listed l = {.stop_after = 0};
    int rc = be_list(b, "", NULL, &l, &err);
    INT_EQ(rc, CK_OK);
    if (rc) fprintf(stderr, "    %s (got so far: %s)\n", err.where, l.text);
    STR_EQ(l.text, "A\na-c\na.d\na/a/z\na/b\na0\naZ\na_b\na~\n");
    ck_s3_backend_free(b);
}

/* Keys another writer stored with characters the core never uses come back exactly,
 * XML escapes undone. */
TEST(test_list_foreign_keys) {
    set_credentials(SECRET, NULL);
    const char *prefix = pfx("foreign");
    const char *raw[] = {"a%26b%3Cc%3E%22d%27e", "caf%C3%A9%20%E2%98%83", "x%2By%3Dz%25"};
    const char *decoded = "a&b<c>\"d'e\ncaf\xc3\xa9 \xe2\x98\x83\nx+y=z%\n";
    CURL *h = curl_easy_init();
    struct curl_slist *sha_header = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    for (size_t i = 0; h && i < sizeof raw / sizeof raw[0]; i++) {
        char url[512], userpwd[128];
        snprintf(url, sizeof url, "%s/%s/%s/%s", srv.endpoint, BUCKET, prefix, raw[i]);
        snprintf(userpwd, sizeof userpwd, "%s:%s", ACCESS, SECRET);
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
        curl_easy_setopt(h, CURLOPT_USERPWD, userpwd);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, sha_header);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "x");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 1L);
        long status = 0;
        INT_EQ(curl_easy_perform(h), CURLE_OK);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        INT_EQ(status, 200);
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(sha_header);
    ck_s3_backend *b = srv_backend(prefix, "");
    listed l = {.stop_after = 0};
    ck_error err;
    INT_EQ(be_list(b, "", NULL, &l, &err), CK_OK);
    STR_EQ(l.text, decoded);
    ck_s3_backend_free(b);
}

TEST(test_wrong_secret) {
    set_credentials(WRONG_SECRET, NULL);
    ck_s3_backend *b = srv_backend(pfx("denied"), "");
    set_credentials(SECRET, NULL);
    OK(b != NULL);
    if (!b) return;
    ck_error err;
    INT_EQ(be_put(b, "tool_results/s/x.txt", "x", 1, &err), CK_EIO);
    OK(strstr(err.where, "S3 PUT: HTTP 403 access denied") == err.where);
    OK(strstr(err.where, "attempts") == NULL); /* a refusal is not retried */
    printf("test_s3: wrong secret: %s\n", err.where);
    char *out = NULL;
    size_t n = 0;
    INT_EQ(be_get(b, "tool_results/s/x.txt", &out, &n, &err), CK_EIO);
    OK(strstr(err.where, "S3 GET: HTTP 403 access denied") == err.where);
    INT_EQ(be_put_new(b, "compactions/s/1", "x", 1, &err), CK_EIO);
    OK(strstr(err.where, "403 access denied") != NULL);
    listed l = {.stop_after = 0};
    INT_EQ(be_list(b, "", NULL, &l, &err), CK_EIO);
    OK(strstr(err.where, "S3 LIST: HTTP 403 access denied") == err.where);
    ck_s3_backend_free(b);
    /* An access key the server does not know is refused the same way. */
    setenv("AWS_ACCESS_KEY_ID", "unknownAccessKey", 1);
    b = srv_backend(pfx("denied"), "");
    set_credentials(SECRET, NULL);
    INT_EQ(be_get(b, "tool_results/s/x.txt", &out, &n, &err), CK_EIO);
    OK(strstr(err.where, "403 access denied") != NULL);
    ck_s3_backend_free(b);
}

/* The server killed, then started again on the same folder and ports: calls fail within the
 * timeout while it is gone, and the next call after the restart succeeds, data intact. */
TEST(test_server_killed_and_restarted) {
    set_credentials(SECRET, NULL);
    ck_s3_backend *b = srv_backend(pfx("kill"), "timeout=3&retries=2");
    OK(b != NULL);
    if (!b) return;
    ck_error err;
    INT_EQ(be_put(b, "tool_results/s/before.txt", "kept", 4, &err), CK_OK);
    pid_t pid = s3_server_pid(&srv);
    OK(pid > 0);
    if (pid <= 0) {
        ck_s3_backend_free(b);
        return;
    }
    kill(pid, SIGKILL);
    /* Gone, or a zombie nobody reaped yet: either way its sockets are closed. */
    OK(wait_state(pid, is_dead));
    double t0 = now_s();
    int rc = be_put(b, "tool_results/s/during.txt", "lost", 4, &err);
    double took = now_s() - t0;
    OK(rc == CK_EIO || rc == CK_ETIMEDOUT);
    OK(took < 3.0 + 2.0);
    printf("test_s3: server killed: put failed in %.2f s: %s\n", took, err.where);
    char *out = NULL;
    size_t n = 0;
    rc = be_get(b, "tool_results/s/before.txt", &out, &n, &err);
    OK(rc == CK_EIO || rc == CK_ETIMEDOUT);
    OK(out == NULL);
    rc = be_put_new(b, "compactions/s/1", "x", 1, &err);
    OK(rc == CK_EIO || rc == CK_ETIMEDOUT);
    listed l = {.stop_after = 0};
    rc = be_list(b, "", NULL, &l, &err);
    OK(rc == CK_EIO || rc == CK_ETIMEDOUT);
    INT_EQ(srv_start(), 0);
    /* The same backend object: its pooled connections died with the server. */
    INT_EQ(be_get(b, "tool_results/s/before.txt", &out, &n, &err), CK_OK);
    MEM_EQ(out, n, "kept");
    ck_free(out);
    INT_EQ(be_put(b, "tool_results/s/after.txt", "back", 4, &err), CK_OK);
    ck_s3_backend_free(b);
}

/* A server that accepts connections but never answers (stopped with SIGSTOP): the call ends
 * with CK_ETIMEDOUT at its timeout, and succeeds once the server runs again. */
TEST(test_server_stalled) {
    set_credentials(SECRET, NULL);
    ck_s3_backend *b = srv_backend(pfx("stall"), "timeout=2&retries=3");
    OK(b != NULL);
    if (!b) return;
    ck_error err;
    INT_EQ(be_put(b, "k", "v", 1, &err), CK_OK);
    pid_t pid = s3_server_pid(&srv);
    OK(pid > 0 && kill(pid, SIGSTOP) == 0);
    /* kill() returns before the process stops: until then it may still answer. */
    OK(wait_state(pid, is_stopped));
    double t0 = now_s();
    char *out = NULL;
    size_t n = 0;
    int rc = be_get(b, "k", &out, &n, &err);
    double took = now_s() - t0;
    kill(pid, SIGCONT);
    ck_free(out);
    out = NULL;
    INT_EQ(rc, CK_ETIMEDOUT);
    OK(strstr(err.where, "S3 GET: no answer within 2.0 s") == err.where);
    OK(took >= 1.9 && took < 2.0 + 3.0);
    printf("test_s3: server stalled: get gave up after %.2f s: %s\n", took, err.where);
    INT_EQ(be_get(b, "k", &out, &n, &err), CK_OK);
    MEM_EQ(out, n, "v");
    ck_free(out);
    ck_s3_backend_free(b);
}

/* A session token is sent (x-amz-security-token); whatever the server makes of it, it shows
 * in no error text. */
TEST(test_session_token) {
    set_credentials(SECRET, TOKEN);
    ck_s3_backend *b = srv_backend(pfx("token"), "");
    set_credentials(SECRET, NULL);
    OK(b != NULL);
    if (!b) return;
    ck_error err;
    int rc = be_put(b, "k", "v", 1, &err);
    OK(rc == CK_OK || rc == CK_EIO);
    printf("test_s3: with a session token the server answered: %s\n",
           rc ? err.where : "stored");
    ck_s3_backend_free(b);
}

/* ---------------------------------------------------------------------------------------- */
/* Sessions on the server: records and state through the backend (store.h)                 */
/* ---------------------------------------------------------------------------------------- */

static void seen_text_add(const char *text) {
    ck_error e;
    memset(&e, 0, sizeof e);
    e.msg = text ? text : "";
    seen(&e);
}

/* A fresh, empty local folder (nothing of a session on S3 may land in it). */
static char *sess_dir(void) {
    static char dirs[8][64];
    static int next;
    char *d = dirs[next++ % 8];
    snprintf(d, 64, "/tmp/ck_test_s3_sess_XXXXXX");
    return mkdtemp(d);
}

static int sess_dir_empty(const char *dir) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\" && rmdir '%s'", dir, dir);
    return system(cmd) == 0;
}

/* The prefix of a session's records. */
static void sess_prefix(const char *session, char *out, size_t cap) {
    char *enc = ck__store_encode_id(session, strlen(session));
    snprintf(out, cap, "compactions/%s/", enc ? enc : "");
    ck_free(enc);
}

/* In a child process: a backend of its own on `prefix`, a compactor on `session` with an
 * empty local folder, `calls` compactions of rec_session(turns + i, 300, salt + i); the last
 * view goes to `view_path` (when not NULL). Exits with the summary calls (bits 0-3), the
 * records made (bits 4-6, at most 7), and 128 for any failure or a local file. */
static void sess_child(const char *prefix, const char *session, int turns, int salt,
                       int calls, const char *view_path, int start_fd) {
    char c;
    if (start_fd >= 0 && read(start_fd, &c, 1) < 0) _exit(128);
    ck_s3_backend *b = srv_backend(prefix, "timeout=10");
    char *dir = sess_dir();
    if (!b || !dir) _exit(128);
    ck_compactor_options o = rec_options(ck_s3_backend_evidence(b), session, dir);
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    if (!k) _exit(128);
    rec_summarizer s = {0};
    int records = 0, bad = 0;
    char *v = NULL;
    for (int i = 0; i < calls; i++) {
        char *j = rec_session(turns + i, 300, salt + i), *rec = NULL;
        int code = 0;
        ck_free(v);
        v = rec_compact(k, j, &s, &rec, &code);
        if (code != CK_OK) {
            fprintf(stderr, "    child: compact: %s (%s)\n", ck_strerror(code), rec);
            bad = 1;
        } else if (rec) {
            records++;
        }
        free(rec);
        free(j);
    }
    if (view_path && v) {
        FILE *f = fopen(view_path, "w");
        if (!f || fputs(v, f) < 0) bad = 1;
        if (f) fclose(f);
    }
    ck_free(v);
    ck_compactor_free(k);
    ck_s3_backend_free(b);
    if (!sess_dir_empty(dir)) bad = 1;
    _exit((s.calls > 15 ? 15 : s.calls) | (records > 7 ? 7 : records) << 4 | (bad ? 128 : 0));
}

static int sess_wait(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 255;
    return WEXITSTATUS(st);
}

static char *sess_read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *text = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = (cap + 4096) * 2;
            text = realloc(text, cap);
        }
        size_t n = fread(text + len, 1, 4096, f);
        len += n;
        if (n < 4096) break;
    }
    fclose(f);
    text[len] = '\0';
    return text;
}

/* A session compacted here resumes in another process, through the server, with no summary
 * call and the view this process would give; the session id is hostile, and its keys stay in
 * their prefix. */
TEST(test_session_moves_to_another_process) {
    set_credentials(SECRET, NULL);
    const char *prefix = pfx("moves");
    static const char session[] = "../Moving session/1\n\"x\"";
    ck_s3_backend *b = srv_backend(prefix, "");
    char *dir = sess_dir();
    OK(b != NULL && dir != NULL);
    if (!b || !dir) return;
    ck_compactor_options o = rec_options(ck_s3_backend_evidence(b), session, dir);
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    char *j = rec_session(30, 300, 0), *rec = NULL;
    rec_summarizer s = {0};
    char *v1 = rec_compact(k, j, &s, &rec, NULL);
    INT_EQ(s.calls, 1);
    OK(rec && strstr(rec, "\"kind\":\"snapshot\""));
    seen_text_add(rec);
    free(rec);
    char *v2 = rec_compact(k, j, &s, NULL, NULL);
    INT_EQ(s.calls, 1);
    OK(v1 && v2);
    ck_compactor_free(k);
    OK(sess_dir_empty(dir));
    char view_path[] = "/tmp/ck_test_s3_view_XXXXXX";
    int fd = mkstemp(view_path);
    OK(fd >= 0);
    close(fd);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) sess_child(prefix, session, 30, 0, 1, view_path, -1);
    int code = sess_wait(pid);
    INT_EQ(code & 128, 0);
    INT_EQ(code & 15, 0);        /* no summary call in the other process */
    INT_EQ((code >> 4) & 7, 0);  /* and nothing to record: the view is the resumed one */
    char *v3 = sess_read_file(view_path);
    OK(v2 && v3 && strcmp(v2, v3) == 0);
    unlink(view_path);
    char rp[300];
    sess_prefix(session, rp, sizeof rp);
    INT_EQ(rec_check_records(ck_s3_backend_evidence(b), rp), 1);
    listed l = {.stop_after = 0};
    INT_EQ(be_list(b, "", NULL, &l, &err), CK_OK);
    OK(strstr(l.text, "compactions/.key\n") != NULL);
    for (const char *line = l.text; *line;) {
        const char *nl = strchr(line, '\n');
        OK(strncmp(line, "compactions/", 12) == 0 || strncmp(line, "tool_results/", 13) == 0);
        line = nl ? nl + 1 : line + strlen(line);
    }
    ck_free(v1);
    ck_free(v2);
    free(v3);
    free(j);
    ck_s3_backend_free(b);
}

/* Two processes compacting one session at once: every seq is stored once, every record
 * parses, and each process's records are all there. */
TEST(test_two_processes_one_session) {
    set_credentials(SECRET, NULL);
    const char *prefix = pfx("two");
    int gate[2];
    OK(pipe(gate) == 0);
    fflush(NULL);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(gate[1]);
            sess_child(prefix, "shared", 30, (i + 1) * 100, 6, NULL, gate[0]);
        }
    }
    close(gate[0]);
    close(gate[1]); /* both start now */
    int records = 0;
    for (int i = 0; i < 2; i++) {
        int code = sess_wait(pids[i]);
        INT_EQ(code & 128, 0);
        records += (code >> 4) & 7;
        OK(((code >> 4) & 7) == 6);
    }
    ck_s3_backend *b = srv_backend(prefix, "");
    OK(b != NULL);
    if (!b) return;
    INT_EQ(rec_check_records(ck_s3_backend_evidence(b), "compactions/shared/"), records);
    printf("test_s3: two processes on one session: %d records, seqs 1..%d each once\n", records,
           records);
    ck_s3_backend_free(b);
}

/* The server killed mid-session: the compaction still succeeds, its outputs stay in the view
 * and its record says why; after the restart the next call stores everything. */
TEST(test_session_survives_a_dead_server) {
    set_credentials(SECRET, NULL);
    ck_s3_backend *b = srv_backend(pfx("dead"), "timeout=2&retries=1");
    char *dir = sess_dir();
    OK(b != NULL && dir != NULL);
    if (!b || !dir) return;
    ck_compactor_options o = rec_options(ck_s3_backend_evidence(b), "dead", dir);
    o.context_window = 20000;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    char *j = rec_session(10, 5000, 7), *rec = NULL;
    rec_summarizer s = {0};
    pid_t pid = s3_server_pid(&srv);
    OK(pid > 0 && kill(pid, SIGKILL) == 0);
    OK(wait_state(pid, is_dead));
    int code = 0;
    char *down = rec_compact(k, j, &s, &rec, &code);
    INT_EQ(code, CK_OK);
    OK(rec && strstr(rec, "audit log not written") && strstr(rec, "S3 "));
    OK(rec && strstr(rec, "could not"));
    seen_text_add(rec);
    free(rec);
    INT_EQ(srv_start(), 0);
    char *up = rec_compact(k, j, &s, &rec, &code);
    INT_EQ(code, CK_OK);
    OK(rec && !strstr(rec, "audit log not written") && !strstr(rec, "could not"));
    seen_text_add(rec);
    free(rec);
    /* Down, the outputs stayed; up, they left the view for the bucket. */
    OK(down && up && strlen(down) > strlen(up) + 20000);
    INT_EQ(rec_check_records(ck_s3_backend_evidence(b), "compactions/dead/"), 1);
    ck_compactor_free(k);
    OK(sess_dir_empty(dir));
    ck_free(down);
    ck_free(up);
    free(j);
    ck_s3_backend_free(b);
}

/* The `store` option: the compactor makes the S3 backend from a URL, owns it, and reports the
 * URL without credentials; a bad URL or a backend given too is named. */
TEST(test_store_option_offline) {
    set_credentials(SECRET, NULL);
    ck_compactor_options o = rec_options(NULL, NULL, "/nonexistent");
    o.store = "s3://Bad_bucket/p?region=us-east-1";
    ck_error err;
    OK(ck_compactor_new(&o, &err) == NULL);
    INT_EQ(err.code, CK_EINVAL);
    STR_EQ(err.where, "store.bucket");
    seen(&err);
    ck_s3_backend *other = backend("s3://bucket?region=us-east-1", &err);
    o.store = "s3://bucket/p?region=us-east-1";
    o.backend = ck_s3_backend_evidence(other);
    OK(ck_compactor_new(&o, &err) == NULL);
    STR_EQ(err.where, "store");
    ck_s3_backend_free(other);
    o.backend = NULL;
    unsetenv("AWS_SECRET_ACCESS_KEY");
    OK(ck_compactor_new(&o, &err) == NULL);
    STR_EQ(err.where, "AWS_SECRET_ACCESS_KEY");
    seen(&err);
    set_credentials(SECRET, NULL);
    ck_compactor *k = ck_compactor_new(&o, &err);
    OK(k != NULL);
    ck_compactor_options got;
    ck_compactor_get_options(k, &got);
    STR_EQ(got.store, "s3://bucket/p/?region=us-east-1");
    OK(got.backend != NULL && got.backend->put_new != NULL);
    ck_compactor_free(k);
}

/* A session through `store` alone resumes on a second compactor and through the CLI. */
TEST(test_store_url_resumes) {
    set_credentials(SECRET, NULL);
    char url[512];
    snprintf(url, sizeof url, "s3://%s/%s?region=us-east-1&endpoint=%s", BUCKET, pfx("url"),
             srv.endpoint);
    char *dir = sess_dir();
    ck_compactor_options o = rec_options(NULL, "by-url", dir);
    o.store = url;
    char *j = rec_session(30, 300, 11);
    rec_check_resume(&o, j);
    OK(sess_dir_empty(dir));
    /* The CLI: --store with the URL; two runs in an empty folder, the second resumed. */
    char *cli = getenv("CK_CLI") ? realpath(getenv("CK_CLI"), NULL) : NULL;
    if (cli) {
        char *run = sess_dir(), path[200], cmd[2048];
        snprintf(path, sizeof path, "%s/h.json", run);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(j, f);
            fclose(f);
        }
        for (int i = 1; i <= 2; i++) {
            snprintf(cmd, sizeof cmd,
                     "cd '%s' && '%s' compact h.json --window 3500 --keep-tail 4 --estimator "
                     "chars4 --summary-max-tokens 300 --session cli-s3 --store '%s' -o out%d.json"
                     " 2>err%d.txt",
                     run, cli, url, i, i);
            INT_EQ(system(cmd), 0);
        }
        snprintf(cmd, sizeof cmd, "cd '%s' && cmp -s out1.json out2.json && test -z \"$(ls -A |"
                                  " grep -v -e '^h.json$' -e '^out' -e '^err')\" && rm -rf '%s'",
                 run, run);
        INT_EQ(system(cmd), 0);
        ck_s3_backend *b = srv_backend(pfx("url"), "");
        OK(b && rec_check_records(ck_s3_backend_evidence(b), "compactions/cli-s3/") == 1);
        ck_s3_backend_free(b);
        free(cli);
    }
    free(j);
}

/* Run last: no error text any test saw holds a credential. */
TEST(test_no_credentials_in_errors) {
    OK(seen_text != NULL && seen_len > 0);
    const char *secrets[] = {ACCESS, SECRET, TOKEN, WRONG_SECRET, "unknownAccessKey"};
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
        if (seen_text && strstr(seen_text, secrets[i]))
            fprintf(stderr, "    found \"%s\" in an error\n", secrets[i]);
        OK(!seen_text || strstr(seen_text, secrets[i]) == NULL);
    }
    free(seen_text);
    seen_text = NULL;
}

/* Starts the server for the tests that need it, or says loudly why they are skipped. */
static int srv_setup(void) {
    int required = getenv("CK_REQUIRE_S3") && strcmp(getenv("CK_REQUIRE_S3"), "1") == 0;
    if (!s3_server_available(&srv)) {
        if (required) {
            h_fail++;
            fprintf(stderr, "FAIL test_s3: CK_REQUIRE_S3=1 but there is no SeaweedFS binary "
                            "(make s3-server)\n");
        } else {
            printf("test_s3: SKIPPED the SeaweedFS tests: no SeaweedFS binary (make s3-server "
                   "builds it; CK_REQUIRE_S3=1 makes this a failure)\n");
        }
        return -1;
    }
    snprintf(run_id, sizeof run_id, "run%ld-%ld", (long)getpid(), (long)time(NULL));
    if (srv_start() != 0) {
        h_fail++;
        fprintf(stderr, "FAIL test_s3: SeaweedFS did not start (see %s/weed.log)\n", srv.dir);
        return -1;
    }
    return 0;
}

int main(void) {
    ck_set_allocator(h_malloc, h_calloc, h_realloc, h_free);
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    RUN(test_url_errors)
    RUN(test_url_normalized)
    RUN(test_credentials_required)
    RUN(test_new_fails_cleanly)
    RUN(test_hostile_keys_refused)
    RUN(test_retries_5xx_and_429)
    RUN(test_retries_exhausted_and_retry_after)
    RUN(test_not_found_and_no_bucket)
    RUN(test_put_new_after_lost_attempt)
    RUN(test_list_replies)
    RUN(test_one_deadline_per_call)
    RUN(test_store_option_offline)
    if (srv_setup() == 0) {
        RUN(test_round_trips)
        RUN(test_put_new_conflict)
        RUN(test_put_new_race)
        RUN(test_list_pages)
        RUN(test_list_byte_order)
        RUN(test_list_foreign_keys)
        RUN(test_wrong_secret)
        RUN(test_session_token)
        RUN(test_server_stalled)
        RUN(test_server_killed_and_restarted)
        RUN(test_session_moves_to_another_process)
        RUN(test_two_processes_one_session)
        RUN(test_session_survives_a_dead_server)
        RUN(test_store_url_resumes)
        s3_server_remove(&srv);
    }
    RUN(test_no_credentials_in_errors)
    printf("%s: %d passed, %d failed\n", __FILE__, h_pass, h_fail);
    return h_fail ? 1 : (h_pass ? 0 : 1);
}
