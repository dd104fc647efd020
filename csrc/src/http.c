/* The built-in HTTP summarizer: one libcurl transfer per attempt, OpenAI Chat Completions or
 * Anthropic Messages, with bounded retries. The summarizer object is read-only once made, so
 * several threads may summarize through it at the same time. */
#include <cJSON.h>
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

#define REPLY_LIMIT ((size_t)16 << 20) /* a summary reply larger than this is not a summary */
#define WHY_LIMIT 300

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
    ck__free(self);
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
        if (strchr(h, '\n') || strchr(h, '\r') || !strchr(h, ':')) {
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

/* A NUL-terminated copy of text for cJSON, which ends strings at NUL: an embedded NUL (tool
 * output can hold one) becomes U+FFFD instead of silently cutting the rest of the prompt. */
static char *json_safe_copy(const char *text, size_t len) {
    ck__buf b;
    ck__buf_init(&b);
    const char *s = text ? text : "", *end = s + (text ? len : 0);
    while (s < end) {
        const char *nul = memchr(s, '\0', (size_t)(end - s));
        ck__buf_add(&b, s, nul ? (size_t)(nul - s) : (size_t)(end - s));
        if (!nul) break;
        ck__buf_adds(&b, "\xef\xbf\xbd");
        s = nul + 1;
    }
    return ck__buf_take(&b, NULL);
}

static char *request_body(const ck_http_summarizer *self, const ck_summary_request *req) {
    cJSON *root = cJSON_CreateObject();
    cJSON *messages = cJSON_CreateArray();
    char *system = json_safe_copy(req->system, req->system_len);
    char *prompt = json_safe_copy(req->prompt, req->prompt_len);
    int ok = root && messages && system && prompt &&
             cJSON_AddStringToObject(root, "model", self->model) &&
             cJSON_AddNumberToObject(root, "max_tokens", (double)req->max_tokens) &&
             cJSON_AddNumberToObject(root, "temperature", 0);
    if (ok && self->api == CK_HTTP_ANTHROPIC) {
        ok = cJSON_AddStringToObject(root, "system", system) != NULL;
    } else if (ok) {
        cJSON *sys = cJSON_CreateObject();
        ok = sys && cJSON_AddStringToObject(sys, "role", "system") &&
             cJSON_AddStringToObject(sys, "content", system);
        if (sys) cJSON_AddItemToArray(messages, sys);
    }
    cJSON *user = ok ? cJSON_CreateObject() : NULL;
    ok = ok && user && cJSON_AddStringToObject(user, "role", "user") &&
         cJSON_AddStringToObject(user, "content", prompt);
    if (user) cJSON_AddItemToArray(messages, user);
    if (ok && messages) {
        cJSON_AddItemToObject(root, "messages", messages);
        messages = NULL;
    }
    char *printed = ok ? cJSON_PrintUnformatted(root) : NULL;
    char *out = printed ? ck__strndup(printed, strlen(printed)) : NULL;
    cJSON_free(printed);
    cJSON_Delete(messages);
    cJSON_Delete(root);
    ck__free(system);
    ck__free(prompt);
    return out;
}

/* The reply text of a successful response, or NULL (then *why says what was wrong). */
static char *reply_text(const ck_http_summarizer *self, const char *body, size_t len,
                        size_t *out_len, uint64_t *in_tok, uint64_t *out_tok, ck__buf *why) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        ck__buf_adds(why, "the reply is not JSON");
        return NULL;
    }
    ck__buf text;
    ck__buf_init(&text);
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
    const char *in_key = self->api == CK_HTTP_ANTHROPIC ? "input_tokens" : "prompt_tokens";
    const char *out_key = self->api == CK_HTTP_ANTHROPIC ? "output_tokens" : "completion_tokens";
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(usage, in_key);
    const cJSON *outn = cJSON_GetObjectItemCaseSensitive(usage, out_key);
    if (in_tok && cJSON_IsNumber(in) && in->valuedouble >= 0)
        *in_tok = (uint64_t)in->valuedouble;
    if (out_tok && cJSON_IsNumber(outn) && outn->valuedouble >= 0)
        *out_tok = (uint64_t)outn->valuedouble;
    if (self->api == CK_HTTP_ANTHROPIC) {
        const cJSON *block;
        cJSON_ArrayForEach(block, cJSON_GetObjectItemCaseSensitive(root, "content")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(block, "text");
            if (cJSON_IsString(t)) ck__buf_adds(&text, t->valuestring);
        }
    } else {
        const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
        const cJSON *choice = cJSON_GetArrayItem(choices, 0);
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(choice, "message");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (cJSON_IsString(t)) ck__buf_adds(&text, t->valuestring);
    }
    cJSON_Delete(root);
    if (!text.len) {
        ck__buf_dispose(&text);
        ck__buf_adds(why, "the reply has no text");
        return NULL;
    }
    return ck__buf_take(&text, out_len);
}

/* Appends the provider's error message ({"error": {"message": ...}} in both APIs), cut. */
static void provider_error(const char *body, size_t len, ck__buf *why) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *m = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : e;
    const char *text = cJSON_IsString(m) ? m->valuestring : NULL;
    size_t n = text ? strlen(text) : (len < 200 ? len : 200);
    if (!text) text = body;
    if (n > 200) n = ck__clip(text, n, 200);
    ck__buf_adds(why, ": ");
    for (size_t i = 0; i < n; i++)
        ck__buf_addc(why, (text[i] == '\n' || text[i] == '\r') ? ' ' : text[i]);
    if (text != body && strlen(text) > n) ck__buf_adds(why, "...");
    cJSON_Delete(root);
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

/* Blanks every occurrence of the API key in a reason: a provider may quote it back
 * ("Incorrect API key provided: sk-..."), and reasons end up in records and logs. */
static void redact(ck__buf *why, const char *key) {
    size_t n = key ? strlen(key) : 0;
    if (n < 4 || !why->data) return;
    for (char *hit = strstr(why->data, key); hit; hit = strstr(hit, key)) {
        static const char MASK[] = "[redacted]";
        size_t at = (size_t)(hit - why->data), tail = why->len - at - n;
        ck__buf rest;
        ck__buf_init(&rest);
        ck__buf_add(&rest, hit + n, tail);
        why->len = at;
        ck__buf_add(why, MASK, sizeof MASK - 1);
        ck__buf_add(why, rest.data ? rest.data : "", rest.len);
        ck__buf_dispose(&rest);
        if (why->failed) return;
        hit = why->data + at + sizeof MASK - 1;
    }
}

static attempt_result attempt(const ck_http_summarizer *self, const char *body,
                              const volatile int *cancel, transfer *t, long *status,
                              double *retry_after, int *code, ck__buf *why) {
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
    const char *key = self->key_env ? getenv(self->key_env) : NULL;
    if (key && key[0]) {
        /* The key lives only in this header list, which is freed before we return. */
        ck__buf kb;
        ck__buf_init(&kb);
        ck__buf_adds(&kb, self->api == CK_HTTP_ANTHROPIC ? "x-api-key: "
                                                          : "Authorization: Bearer ");
        ck__buf_adds(&kb, key);
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
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, self->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, self->connect_ms);
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
    redact(why, key);
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

int ck_http_summarize(ck_http_summarizer *self, const ck_summary_request *req,
                      const volatile int *cancel, char **reply, size_t *reply_len,
                      uint64_t *prompt_tokens, uint64_t *completion_tokens, char **why) {
    if (reply) *reply = NULL;
    if (why) *why = NULL;
    if (!self || !req || !reply) return CK_EINVAL;
    char *body = request_body(self, req);
    if (!body) return CK_ENOMEM;
    transfer t;
    ck__buf_init(&t.body);
    ck__buf reason;
    ck__buf_init(&reason);
    int code = CK_ESUMMARY;
    int n = 0;
    for (;; n++) {
        long status = 0;
        double retry_after = -1;
        reason.len = 0;
        attempt_result r = attempt(self, body, cancel, &t, &status, &retry_after, &code, &reason);
        if (r == A_OK) {
            size_t len = 0;
            char *text = reply_text(self, t.body.data ? t.body.data : "", t.body.len, &len,
                                    prompt_tokens, completion_tokens, &reason);
            if (text) {
                *reply = text;
                if (reply_len) *reply_len = len;
                code = CK_OK;
            } else {
                code = reason.failed ? CK_ENOMEM : CK_ESUMMARY;
            }
            break;
        }
        if (r == A_FAIL || n >= self->retries) break;
        double delay = self->backoff * (double)(1u << (n < 10 ? n : 10)) * jitter((unsigned)n);
        if (retry_after >= 0) delay = retry_after;
        if (delay > 60) delay = 60;
        if (wait_for(delay, cancel)) {
            code = CK_ECANCELED;
            reason.len = 0;
            ck__buf_adds(&reason, "canceled");
            break;
        }
    }
    if (code != CK_OK && code != CK_ENOMEM && code != CK_ECANCELED && n > 0)
        ck__buf_printf(&reason, " (%d attempts)", n + 1);
    if (code != CK_OK && why) {
        char *w = ck__buf_take(&reason, NULL);
        if (w && strlen(w) > WHY_LIMIT) w[ck__clip(w, strlen(w), WHY_LIMIT)] = '\0';
        *why = w;
    }
    ck__buf_dispose(&reason);
    ck__buf_dispose(&t.body);
    ck__free(body);
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
