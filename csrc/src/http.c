/* The built-in HTTP summarizer: one libcurl transfer per attempt, OpenAI Chat Completions or
 * Anthropic Messages, with bounded retries inside one deadline. The summarizer object is
 * read-only once made, so several threads may summarize through it at the same time.
 *
 * What a provider sends back is untrusted: its numbers are range-checked before they become
 * integers, and every text it returns (the reply, an error message) has the API key blanked
 * out, since some servers quote the key back and replies end up in checkpoints and records. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "./alloc.h"
#include "./buf.h"
#include "./extract.h"
#include "./internal.h"
#include "./json.h"
#include "./usage.h"

#define REPLY_LIMIT ((size_t)16 << 20) /* a summary reply larger than this is not a summary */
#define WHY_LIMIT 300
#define PROVIDER_MSG_LIMIT 200 /* bytes of a provider's error message kept in a reason */
#define REDACTED "[redacted]"
/* Keys shorter than this are not blanked: a 1-byte "key" would blank every such byte. */
#define REDACT_MIN 4

struct ck_http_summarizer {
    char *url; /* the full endpoint */
    char *model;
    char *key_env; /* NULL: no key */
    ck_http_api api;
    long timeout_ms, connect_ms;
    int retries;
    double backoff;
    char **headers;
    size_t n_headers;
    int reasoning;   /* OpenAI: max_completion_tokens and no temperature */
    ck__jdoc *extra; /* extra_body, an object; NULL for none */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe in every libcurl build, so it runs exactly once. */
static void init_curl(void) { curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

static char *copy_str(const char *s) { return s ? ck__strndup(s, strlen(s)) : NULL; }

void ck_http_summarizer_free(ck_http_summarizer *self) {
    if (!self) return;
    ck__free(self->url);
    ck__free(self->model);
    ck__free(self->key_env);
    for (size_t i = 0; i < self->n_headers; i++) ck__free(self->headers[i]);
    ck__free(self->headers);
    ck__jdoc_free(self->extra);
    ck__free(self);
}

static int http_lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

int ck_http_reasoning_model(const char *model) {
    if (!model) return 0;
    const char *slash = strrchr(model, '/');
    const char *m = slash ? slash + 1 : model;
    size_t i = 1;
    if (http_lower((unsigned char)m[0]) == 'o' && m[1] >= '0' && m[1] <= '9') {
        while (m[i] >= '0' && m[i] <= '9') i++;
        return m[i] == '\0' || m[i] == '-' || m[i] == '_' || m[i] == '.';
    }
    static const char gpt5[] = "gpt-5";
    for (i = 0; i < sizeof gpt5 - 1; i++)
        if (http_lower((unsigned char)m[i]) != gpt5[i]) return 0;
    return m[i] == '\0' || m[i] == '-' || m[i] == '.';
}

/* A header line may hold tabs but no other control byte: a CR or LF would start a header
 * (or a body) of its own. */
static int header_line_ok(const char *h) {
    if (!strchr(h, ':')) return 0;
    for (const unsigned char *p = (const unsigned char *)h; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7F) return 0;
    return 1;
}

/* Parses extra_body into self->extra: one JSON object without repeated keys. */
static int read_extra_body(ck_http_summarizer *self, const char *text, ck_error *err) {
    ck_error jerr;
    ck__jread_options o = {CK__JREAD_NO_DUPLICATES, 0};
    self->extra = ck__jread(text, strlen(text), o, &jerr);
    if (!self->extra) {
        if (jerr.code == CK_ENOMEM) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        ck__fail(err, CK_EINVAL, jerr.msg, CK_NONE, "extra_body");
        if (err) err->offset = jerr.offset;
        return CK_EINVAL;
    }
    if (!ck__jis(ck__jdoc_root(self->extra), CK__JOBJECT))
        return ck__fail(err, CK_EINVAL, "extra_body must be a JSON object", CK_NONE,
                        "extra_body");
    return CK_OK;
}

ck_http_summarizer *ck_http_summarizer_new(const ck_http_options *o, ck_error *err) {
    ck__error_clear(err);
    if (!o) {
        ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
        return NULL;
    }
    if (!o->base_url || strncmp(o->base_url, "http", 4) != 0) {
        ck__fail(err, CK_EINVAL, "base_url must be an http:// or https:// URL", CK_NONE,
                 "base_url");
        return NULL;
    }
    if (!o->model || !o->model[0]) {
        ck__fail(err, CK_EINVAL, "model is required", CK_NONE, "model");
        return NULL;
    }
    if ((unsigned)o->api > CK_HTTP_ANTHROPIC) {
        ck__fail(err, CK_EINVAL, "unknown api", CK_NONE, "api");
        return NULL;
    }
    if (!(o->timeout >= 0) || !(o->connect_timeout >= 0) || !(o->backoff >= 0) ||
        o->timeout > 86400 || o->connect_timeout > 86400 || o->backoff > 3600) {
        ck__fail(err, CK_EINVAL, "timeouts and backoff must be non-negative seconds", CK_NONE,
                 !(o->timeout >= 0) || o->timeout > 86400 ? "timeout"
                 : !(o->connect_timeout >= 0) || o->connect_timeout > 86400 ? "connect_timeout"
                                                                            : "backoff");
        return NULL;
    }
    pthread_once(&curl_once, init_curl);
    if (curl_init_result != CURLE_OK) {
        ck__fail(err, CK_EIO, "libcurl could not be initialized", CK_NONE, NULL);
        return NULL;
    }
    ck_http_summarizer *self = ck__calloc(1, sizeof *self);
    if (!self) {
        ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        return NULL;
    }
    size_t base = strlen(o->base_url);
    while (base && o->base_url[base - 1] == '/') base--;
    const char *path = o->api == CK_HTTP_ANTHROPIC ? "/v1/messages" : "/chat/completions";
    /* An Anthropic base URL that already ends in /v1 gets only /messages. */
    if (o->api == CK_HTTP_ANTHROPIC && base >= 3 && memcmp(o->base_url + base - 3, "/v1", 3) == 0)
        path = "/messages";
    ck__buf url;
    ck__buf_init(&url);
    ck__buf_add(&url, o->base_url, base);
    ck__buf_adds(&url, path);
    self->url = ck__buf_take(&url, NULL);
    self->model = copy_str(o->model);
    const char *env = o->api_key_env ? o->api_key_env
                                     : (o->api == CK_HTTP_ANTHROPIC ? "ANTHROPIC_API_KEY"
                                                                    : "OPENAI_API_KEY");
    self->key_env = env[0] ? copy_str(env) : NULL;
    self->api = o->api;
    self->timeout_ms = (long)((o->timeout > 0 ? o->timeout : 60.0) * 1000);
    self->connect_ms = (long)((o->connect_timeout > 0 ? o->connect_timeout : 10.0) * 1000);
    if (self->connect_ms > self->timeout_ms) self->connect_ms = self->timeout_ms;
    self->retries = o->max_retries == 0 ? 3 : (o->max_retries < 0 ? 0 : o->max_retries);
    if (self->retries > 20) self->retries = 20;
    self->backoff = o->backoff > 0 ? o->backoff : 0.5;
    int ok = self->url && self->model && (!env[0] || self->key_env);
    size_t count = 0;
    for (const char *const *h = o->headers; h && *h; h++) count++;
    if (ok && count && !(self->headers = ck__calloc(count, sizeof *self->headers))) ok = 0;
    for (size_t i = 0; ok && i < count; i++) {
        const char *h = o->headers[i];
        if (!header_line_ok(h)) {
            ck_http_summarizer_free(self);
            ck__fail(err, CK_EINVAL, "a header is \"Name: value\" on one line", CK_NONE,
                     "headers[%zu]", i);
            return NULL;
        }
        if (!(self->headers[i] = copy_str(h))) ok = 0;
        else self->n_headers = i + 1;
    }
    if (!ok) {
        ck_http_summarizer_free(self);
        ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        return NULL;
    }
    self->reasoning = o->api == CK_HTTP_OPENAI &&
                      (o->reasoning_model > 0 ||
                       (o->reasoning_model == 0 && ck_http_reasoning_model(o->model)));
    if (o->extra_body && read_extra_body(self, o->extra_body, err) != CK_OK) {
        ck_http_summarizer_free(self);
        return NULL;
    }
    return self;
}

/* ---- one attempt ---- */

typedef struct transfer {
    ck__buf body;
    int too_big;
    const volatile int *cancel;
} transfer;

static size_t on_data(char *data, size_t size, size_t n, void *ctx) {
    transfer *t = ctx;
    size_t len = size * n;
    if (t->body.len + len > REPLY_LIMIT) {
        t->too_big = 1;
        return 0;
    }
    ck__buf_add(&t->body, data, len);
    return t->body.failed ? 0 : len;
}

static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    const transfer *t = ctx;
    return t->cancel && *t->cancel ? 1 : 0;
}

/* Writes request text as a JSON string. A NUL byte becomes U+FFFD: the body could carry it
 * as \u0000, but some servers refuse that escape (PostgreSQL's jsonb does), and a model reads
 * nothing into a NUL; what follows it must reach the model all the same. */
static void body_text(ck__jwriter *w, const char *text, size_t len) {
    const char *s = text ? text : "", *end = s + (text ? len : 0);
    if (!memchr(s, '\0', (size_t)(end - s))) {
        ck__jw_string(w, s, (size_t)(end - s));
        return;
    }
    ck__buf b;
    ck__buf_init(&b);
    while (s < end) {
        const char *nul = memchr(s, '\0', (size_t)(end - s));
        ck__buf_add(&b, s, nul ? (size_t)(nul - s) : (size_t)(end - s));
        if (!nul) break;
        ck__buf_add(&b, "\xef\xbf\xbd", 3);
        s = nul + 1;
    }
    if (b.failed) w->out->failed = 1;
    else ck__jw_string(w, b.data, b.len);
    ck__buf_dispose(&b);
}

/* True when extra_body sets `key`: its member then replaces ours. */
static int extra_sets(const ck_http_summarizer *self, const char *key) {
    return ck__jgets(ck__jdoc_root(self->extra), key) != NULL;
}

static char *request_body(const ck_http_summarizer *self, const ck_summary_request *req) {
    ck__buf b;
    ck__buf_init(&b);
    ck__jwriter w;
    ck__jw_init(&w, &b, 0);
    ck__jw_begin_object(&w);
    if (!extra_sets(self, "model")) {
        ck__jw_keys(&w, "model");
        ck__jw_strings(&w, self->model);
    }
    const char *budget = self->reasoning ? "max_completion_tokens" : "max_tokens";
    if (!extra_sets(self, budget)) {
        ck__jw_keys(&w, budget);
        ck__jw_u64(&w, req->max_tokens);
    }
    if (!self->reasoning && !extra_sets(self, "temperature")) {
        ck__jw_keys(&w, "temperature");
        ck__jw_u64(&w, 0);
    }
    if (self->api == CK_HTTP_ANTHROPIC && !extra_sets(self, "system")) {
        ck__jw_keys(&w, "system");
        body_text(&w, req->system, req->system_len);
    }
    if (!extra_sets(self, "messages")) {
        ck__jw_keys(&w, "messages");
        ck__jw_begin_array(&w);
        if (self->api != CK_HTTP_ANTHROPIC) {
            ck__jw_begin_object(&w);
            ck__jw_keys(&w, "role");
            ck__jw_strings(&w, "system");
            ck__jw_keys(&w, "content");
            body_text(&w, req->system, req->system_len);
            ck__jw_end_object(&w);
        }
        ck__jw_begin_object(&w);
        ck__jw_keys(&w, "role");
        ck__jw_strings(&w, "user");
        ck__jw_keys(&w, "content");
        body_text(&w, req->prompt, req->prompt_len);
        ck__jw_end_object(&w);
        ck__jw_end_array(&w);
    }
    const ck__jval *extra = ck__jdoc_root(self->extra);
    for (size_t i = 0; i < ck__jcount(extra); i++) {
        const ck__jmember *m = ck__jmember_at(extra, i);
        ck__jw_key(&w, m->key, m->key_len);
        ck__jw_value(&w, &m->value);
    }
    ck__jw_end_object(&w);
    return ck__buf_take(&b, NULL);
}

/* Blanks every occurrence of the key in `b`. Length-aware, since texts may hold NUL bytes. */
static void redact(ck__buf *b, const char *key, size_t key_len) {
    if (!key || key_len < REDACT_MIN || b->failed || b->len < key_len) return;
    ck__buf out;
    ck__buf_init(&out);
    size_t from = 0, i = 0;
    int hits = 0;
    while (i + key_len <= b->len) {
        const char *first = memchr(b->data + i, key[0], b->len - key_len + 1 - i);
        if (!first) break;
        i = (size_t)(first - b->data);
        if (memcmp(first, key, key_len) != 0) {
            i++;
            continue;
        }
        ck__buf_add(&out, b->data + from, i - from);
        ck__buf_add(&out, REDACTED, sizeof REDACTED - 1);
        i += key_len;
        from = i;
        hits = 1;
    }
    if (!hits) return;
    ck__buf_add(&out, b->data + from, b->len - from);
    if (out.failed) {
        /* Nothing with the key may leave: the text is dropped, which fails the call. */
        ck__buf_dispose(&out);
        b->failed = 1;
        return;
    }
    ck__buf_dispose(b);
    *b = out;
}

/* Reading a reply: invalid UTF-8 in the text stays as the provider sent it. */
static ck__jdoc *read_json(const char *body, size_t len, ck_error *err) {
    ck__jread_options o = {CK__JREAD_ANY_BYTES, 0};
    return ck__jread(body, len, o, err);
}

/* The text of a successful response into *text (NULL and a reason in *why when it has none).
 * Usage counts are read only when they are non-negative integers. */
static int reply_text(const ck_http_summarizer *self, const char *body, size_t len,
                      const char *key, size_t key_len, char **text, size_t *text_len,
                      uint64_t *in_tok, uint64_t *out_tok, ck__buf *why) {
    ck_error err;
    *text = NULL;
    ck__jdoc *doc = read_json(body, len, &err);
    if (!doc) {
        if (err.code == CK_ENOMEM) return CK_ENOMEM;
        ck__buf_adds(why, "the reply is not JSON");
        return CK_ESUMMARY;
    }
    const ck__jval *root = ck__jdoc_root(doc), *usage = ck__jgets(root, "usage");
    uint64_t count;
    if (in_tok && ck__usage_prompt(usage, "usage", &count, NULL) == CK_OK) *in_tok = count;
    const char *out_key = self->api == CK_HTTP_ANTHROPIC ? "output_tokens" : "completion_tokens";
    if (out_tok && ck__ju64(ck__jgets(usage, out_key), &count)) *out_tok = count;
    ck__buf b;
    ck__buf_init(&b);
    size_t n = 0;
    const char *t;
    if (self->api == CK_HTTP_ANTHROPIC) {
        const ck__jval *content = ck__jgets(root, "content");
        for (size_t i = 0; i < ck__jcount(content); i++)
            if ((t = ck__jstr(ck__jgets(ck__jat(content, i), "text"), &n)) != NULL)
                ck__buf_add(&b, t, n);
    } else {
        const ck__jval *choice = ck__jat(ck__jgets(root, "choices"), 0);
        if ((t = ck__jstr(ck__jgets(ck__jgets(choice, "message"), "content"), &n)) != NULL)
            ck__buf_add(&b, t, n);
    }
    ck__jdoc_free(doc);
    redact(&b, key, key_len);
    if (b.failed) {
        ck__buf_dispose(&b);
        return CK_ENOMEM;
    }
    if (!b.len) {
        ck__buf_dispose(&b);
        ck__buf_adds(why, "the reply has no text");
        return CK_ESUMMARY;
    }
    *text = ck__buf_take(&b, text_len);
    return *text ? CK_OK : CK_ENOMEM;
}

/* Appends ": " and the provider's error message ({"error": {"message": ...}} in both APIs, or
 * the start of the body), cut and on one line. */
static void provider_error(const char *body, size_t len, ck__buf *why) {
    ck__jdoc *doc = read_json(body, len, NULL);
    const ck__jval *e = ck__jgets(ck__jdoc_root(doc), "error");
    size_t n = 0;
    const char *text = ck__jstr(ck__jis(e, CK__JOBJECT) ? ck__jgets(e, "message") : e, &n);
    int from_json = text != NULL;
    if (!text) {
        text = body;
        n = len;
    }
    size_t keep = n > PROVIDER_MSG_LIMIT ? ck__clip(text, n, PROVIDER_MSG_LIMIT) : n;
    ck__buf_adds(why, ": ");
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)text[i];
        ck__buf_addc(why, c < 0x20 || c == 0x7F ? ' ' : (char)c);
    }
    if (from_json && keep < n) ck__buf_adds(why, "...");
    ck__jdoc_free(doc);
}

typedef enum attempt_result { A_OK, A_RETRY, A_FAIL } attempt_result;

/* Runs one transfer. The multi interface lets us wake every 100 ms to look at the cancel flag:
 * libcurl's progress callback alone fires only about once a second while a server stalls. */
static CURLcode perform(CURL *curl, const volatile int *cancel) {
    CURLM *multi = curl_multi_init();
    if (!multi) return CURLE_OUT_OF_MEMORY;
    if (curl_multi_add_handle(multi, curl) != CURLM_OK) {
        curl_multi_cleanup(multi);
        return CURLE_OUT_OF_MEMORY;
    }
    CURLcode result = CURLE_OK;
    int running = 1;
    while (running) {
        if (cancel && *cancel) {
            result = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc == CURLM_OK && running) mc = curl_multi_poll(multi, NULL, 0, 100, NULL);
        if (mc != CURLM_OK) {
            result = CURLE_FAILED_INIT;
            break;
        }
    }
    if (!running) {
        int left;
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(multi, &left)))
            if (msg->msg == CURLMSG_DONE) result = msg->data.result;
    }
    curl_multi_remove_handle(multi, curl);
    curl_multi_cleanup(multi);
    return result;
}

/* The key for one call: read from the environment once, so that every attempt sends the same
 * one and the texts of the call are blanked of exactly it. */
typedef struct call_key {
    char *text; /* NULL: none */
    size_t len;
} call_key;

/* Reads the key. A key holding a control byte would put a line break (and whatever follows
 * it, another header) into the request: it is refused and never sent. */
static int key_read(const ck_http_summarizer *self, call_key *k, ck__buf *why) {
    k->text = NULL;
    k->len = 0;
    const char *env = self->key_env ? getenv(self->key_env) : NULL;
    if (!env || !env[0]) return CK_OK;
    size_t n = strlen(env);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)env[i];
        if (c < 0x20 || c == 0x7F) {
            ck__buf_printf(why,
                           "the API key in %.64s holds a control character (a line break?); "
                           "it was not sent",
                           self->key_env);
            return CK_EINVAL;
        }
    }
    k->text = ck__strndup(env, n);
    if (!k->text) return CK_ENOMEM;
    k->len = n;
    return CK_OK;
}

static void key_dispose(call_key *k) {
    if (k->text) memset(k->text, 0, k->len);
    ck__free(k->text);
    k->text = NULL;
    k->len = 0;
}

static attempt_result attempt(const ck_http_summarizer *self, const char *body,
                              const call_key *key, long limit_ms, const volatile int *cancel,
                              transfer *t, long *status, double *retry_after, int *code,
                              ck__buf *why) {
    CURL *curl = curl_easy_init();
    struct curl_slist *hdrs = NULL, *grown;
    if (!curl) {
        *code = CK_ENOMEM;
        return A_FAIL;
    }
    int ok = 1;
#define CK__HEADER(text)                                                                       \
    do {                                                                                       \
        grown = curl_slist_append(hdrs, (text));                                               \
        if (!grown) ok = 0;                                                                    \
        else hdrs = grown;                                                                     \
    } while (0)
    CK__HEADER("Content-Type: application/json");
    if (key->text) {
        /* The key lives only in this header list, which is freed before we return. */
        ck__buf kb;
        ck__buf_init(&kb);
        ck__buf_adds(&kb, self->api == CK_HTTP_ANTHROPIC ? "x-api-key: "
                                                          : "Authorization: Bearer ");
        ck__buf_add(&kb, key->text, key->len);
        if (kb.failed) ok = 0;
        else CK__HEADER(kb.data);
        if (kb.data) memset(kb.data, 0, kb.len);
        ck__buf_dispose(&kb);
    }
    if (self->api == CK_HTTP_ANTHROPIC) CK__HEADER("anthropic-version: 2023-06-01");
    for (size_t i = 0; i < self->n_headers; i++) CK__HEADER(self->headers[i]);
#undef CK__HEADER
    if (!ok) {
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(curl);
        *code = CK_ENOMEM;
        return A_FAIL;
    }
    t->body.len = 0;
    t->too_big = 0;
    t->cancel = cancel;
    curl_easy_setopt(curl, CURLOPT_URL, self->url);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    /* What is left of the call's time, not a fresh timeout for each attempt. */
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, limit_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     self->connect_ms < limit_ms ? self->connect_ms : limit_ms);
    /* Threads must not be signalled by name-resolution timeouts. */
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "ctxkeel/" CK_VERSION_STRING);
    CURLcode rc = perform(curl, cancel);
    curl_off_t after = -1;
    *status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &after);
    *retry_after = after > 0 ? (double)after : -1;
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(curl);
    if (rc == CURLE_ABORTED_BY_CALLBACK || (cancel && *cancel)) {
        *code = CK_ECANCELED;
        ck__buf_adds(why, "canceled");
        return A_FAIL;
    }
    if (t->body.failed) {
        *code = CK_ENOMEM;
        return A_FAIL;
    }
    if (rc == CURLE_WRITE_ERROR && t->too_big) {
        *code = CK_ESUMMARY;
        ck__buf_printf(why, "the reply is larger than %zu bytes", REPLY_LIMIT);
        return A_FAIL;
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        *code = CK_ETIMEDOUT;
        ck__buf_printf(why, "no complete reply within %.1f s", (double)self->timeout_ms / 1000);
        return A_RETRY;
    }
    if (rc != CURLE_OK) {
        *code = CK_EIO;
        ck__buf_printf(why, "connection failed: %s", curl_easy_strerror(rc));
        return A_RETRY;
    }
    if (*status >= 200 && *status < 300) return A_OK;
    *code = CK_ESUMMARY;
    ck__buf_printf(why, "HTTP %ld", *status);
    provider_error(t->body.data ? t->body.data : "", t->body.len, why);
    return (*status == 429 || *status >= 500) ? A_RETRY : A_FAIL;
}

/* Sleeps `seconds`, waking every 50 ms to honour cancellation. Returns 1 when canceled. */
static int wait_for(double seconds, const volatile int *cancel) {
    while (seconds > 0) {
        if (cancel && *cancel) return 1;
        double step = seconds < 0.05 ? seconds : 0.05;
        struct timespec ts = {(time_t)step, (long)((step - (double)(time_t)step) * 1e9)};
        nanosleep(&ts, NULL);
        seconds -= step;
    }
    return cancel && *cancel;
}

/* Jitter from a per-call counter mixed with the clock: no shared random state to race on. */
static double jitter(unsigned attempt_no) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull + attempt_no;
    x ^= x >> 31;
    return 0.75 + (double)(x % 1000) / 2000.0; /* 0.75 .. 1.25 */
}

static double http_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int ck_http_summarize(ck_http_summarizer *self, const ck_summary_request *req,
                      const volatile int *cancel, char **reply, size_t *reply_len,
                      uint64_t *prompt_tokens, uint64_t *completion_tokens, char **why) {
    if (reply) *reply = NULL;
    if (why) *why = NULL;
    if (!self || !req || !reply) return CK_EINVAL;
    ck__buf reason;
    ck__buf_init(&reason);
    call_key key;
    int code = key_read(self, &key, &reason);
    char *body = code == CK_OK ? request_body(self, req) : NULL;
    if (code == CK_OK && !body) code = CK_ENOMEM;
    transfer t;
    ck__buf_init(&t.body);
    /* One deadline for the call: attempts get what is left of it, and a wait that would end
     * past it is not begun (a provider asking for Retry-After: 120 gets no second try). */
    double start = http_now(), limit = (double)self->timeout_ms / 1000;
    int n = 0;
    if (code == CK_OK) for (;; n++) {
        long status = 0, left_ms = (long)((limit - (http_now() - start)) * 1000);
        double retry_after = -1;
        reason.len = 0;
        if (left_ms < 1) left_ms = 1;
        attempt_result r = attempt(self, body, &key, left_ms, cancel, &t, &status, &retry_after,
                                   &code, &reason);
        if (r == A_OK) {
            size_t len = 0;
            char *text = NULL;
            reason.len = 0;
            code = reply_text(self, t.body.data ? t.body.data : "", t.body.len, key.text,
                              key.len, &text, &len, prompt_tokens, completion_tokens, &reason);
            if (text) {
                *reply = text;
                if (reply_len) *reply_len = len;
            }
            break;
        }
        /* An attempt that timed out had all the time left: the deadline has passed. */
        if (r == A_FAIL || n >= self->retries || code == CK_ETIMEDOUT) break;
        double delay = self->backoff * (double)(1u << (n < 10 ? n : 10)) * jitter((unsigned)n);
        if (retry_after >= 0) delay = retry_after;
        if (delay > 60) delay = 60;
        double left = limit - (http_now() - start);
        if (delay >= left) {
            ck__buf_printf(&reason, "; a retry in %.1f s would pass the %.1f s timeout", delay,
                           limit);
            break;
        }
        if (wait_for(delay, cancel)) {
            code = CK_ECANCELED;
            reason.len = 0;
            ck__buf_adds(&reason, "canceled");
            break;
        }
    }
    if (code != CK_OK && code != CK_ENOMEM && code != CK_ECANCELED && n > 0)
        ck__buf_printf(&reason, " (%d attempts)", n + 1);
    /* Whatever the provider wrote may quote the key back ("Incorrect API key: sk-..."). */
    redact(&reason, key.text, key.len);
    if (code != CK_OK && why) {
        size_t wn = 0;
        char *w = ck__buf_take(&reason, &wn);
        if (w && wn > WHY_LIMIT) w[ck__clip(w, wn, WHY_LIMIT)] = '\0';
        *why = w;
    }
    ck__buf_dispose(&reason);
    ck__buf_dispose(&t.body);
    ck__free(body);
    key_dispose(&key);
    return code;
}

int ck_http_summarize_fn(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    char *reply = NULL, *why = NULL;
    size_t len = 0;
    int rc = ck_http_summarize(ctx, req, NULL, &reply, &len, NULL, NULL, &why);
    if (rc == CK_OK) rc = ck_compaction_set_summary(c, reply, len);
    else {
        const char *text = why ? why : ck_strerror(rc);
        ck_compaction_set_failure(c, text, strlen(text));
    }
    ck__free(reply);
    ck__free(why);
    return rc;
}
