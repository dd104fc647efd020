/* The HTTP summarizer against a scripted HTTP server on 127.0.0.1 (a forked child). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#include "../../csrc/src/json.h"

/* One scripted reply per connection: status line + headers + body, or a stall. */
typedef struct reply {
    const char *head; /* e.g. "HTTP/1.1 200 OK\r\nRetry-After: 1\r\n" */
    const char *body;
    int stall_ms; /* wait this long before answering (0: answer at once) */
} reply;

static char last_request[65536];

/* Serves `n` connections with the scripted replies and writes every request it received to
 * the pipe `out`, then exits. */
static void serve(int fd, const reply *script, int n, int out) {
    for (int i = 0; i < n; i++) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) _exit(1);
        char buf[65536];
        size_t got = 0;
        /* Read headers and the body announced by Content-Length. */
        size_t need = 0;
        for (;;) {
            ssize_t r = read(c, buf + got, sizeof buf - 1 - got);
            if (r <= 0) break;
            got += (size_t)r;
            buf[got] = '\0';
            char *end = strstr(buf, "\r\n\r\n");
            if (end && !need) {
                char *cl = strstr(buf, "Content-Length: ");
                if (!cl) cl = strstr(buf, "content-length: ");
                need = (size_t)(end - buf) + 4 + (cl ? (size_t)atol(cl + 16) : 0);
            }
            if (need && got >= need) break;
        }
        if (write(out, buf, got) < 0 || write(out, "\n=====\n", 7) < 0) _exit(1);
        if (script[i].stall_ms) {
            struct timespec ts = {script[i].stall_ms / 1000, (script[i].stall_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        /* "%KEY%" in a scripted body stands for the key the request carried: a provider that
         * echoes it. */
        char body[4096];
        const char *k = strstr(buf, "Authorization: Bearer ");
        size_t skip = 22, at = 0;
        if (!k) k = strstr(buf, "x-api-key: "), skip = 11;
        const char *ke = k ? strstr(k, "\r\n") : NULL;
        int kn = ke ? (int)(ke - k - (ptrdiff_t)skip) : 0;
        for (const char *b = script[i].body, *mark; at < sizeof body; b = mark + 5) {
            mark = strstr(b, "%KEY%");
            if (!mark) {
                snprintf(body + at, sizeof body - at, "%s", b);
                break;
            }
            at += (size_t)snprintf(body + at, sizeof body - at, "%.*s%.*s", (int)(mark - b), b,
                                   kn, k ? k + skip : "");
        }
        char resp[8192];
        int len = snprintf(resp, sizeof resp, "%sContent-Type: application/json\r\nContent-Length: "
                                              "%zu\r\nConnection: close\r\n\r\n%s",
                           script[i].head, strlen(body), body);
        if (write(c, resp, (size_t)len) < 0) {
            /* The client may have given up (timeout, cancel); that is part of the test. */
        }
        close(c);
    }
    _exit(0);
}

typedef struct server {
    pid_t pid;
    int port;
    int pipe_rd;
} server;

static server start(const reply *script, int n) {
    server s = {0, 0, -1};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 8) ||
        getsockname(fd, (struct sockaddr *)&a, &al))
        return s;
    int p[2];
    if (pipe(p)) return s;
    s.port = ntohs(a.sin_port);
    s.pid = fork();
    if (s.pid == 0) {
        close(p[0]);
        serve(fd, script, n, p[1]);
    }
    close(fd);
    close(p[1]);
    s.pipe_rd = p[0];
    return s;
}

/* Stops the server and returns what it received (in last_request). */
static void stop(server *s) {
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    size_t got = 0;
    ssize_t r;
    while (got < sizeof last_request - 1 &&
           (r = read(s->pipe_rd, last_request + got, sizeof last_request - 1 - got)) > 0)
        got += (size_t)r;
    last_request[got] = '\0';
    close(s->pipe_rd);
}

static ck_http_summarizer *client(int port, ck_http_api api, double timeout, int retries) {
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, api == CK_HTTP_OPENAI ? "/v1" : "");
    ck_http_options o;
    memset(&o, 0, sizeof o);
    o.base_url = url;
    o.model = "tiny";
    o.api = api;
    o.api_key_env = "CK_TEST_KEY";
    o.timeout = timeout;
    o.max_retries = retries;
    o.backoff = 0.05;
    ck_error err;
    ck_http_summarizer *h = ck_http_summarizer_new(&o, &err);
    OK(h != NULL);
    return h;
}

static ck_summary_request request(void) {
    ck_summary_request r;
    memset(&r, 0, sizeof r);
    r.system = "sys";
    r.system_len = 3;
    r.prompt = "fold these";
    r.prompt_len = 10;
    r.max_tokens = 77;
    return r;
}

static const char OPENAI_OK[] =
    "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"## Next Steps\\nship\"}}],"
    "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":5}}";
static const char ANTHROPIC_OK[] =
    "{\"content\":[{\"type\":\"text\",\"text\":\"## Next Steps\\n\"},{\"type\":\"text\","
    "\"text\":\"ship\"}],\"usage\":{\"input_tokens\":9,\"output_tokens\":4}}";

TEST(openai_success) {
    reply script[] = {{"HTTP/1.1 200 OK\r\n", OPENAI_OK, 0}};
    server s = start(script, 1);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, 0);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    size_t len = 0;
    uint64_t in = 0, out = 0;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, &len, &in, &out, &why), CK_OK);
    MEM_EQ(text, len, "## Next Steps\nship");
    INT_EQ(in, 12);
    INT_EQ(out, 5);
    OK(why == NULL);
    stop(&s);
    OK(strstr(last_request, "POST /v1/chat/completions") != NULL);
    OK(strstr(last_request, "Authorization: Bearer sekrit-key") != NULL);
    OK(strstr(last_request, "\"max_tokens\":77") != NULL);
    OK(strstr(last_request, "\"role\":\"system\",\"content\":\"sys\"") != NULL);
    OK(strstr(last_request, "\"model\":\"tiny\"") != NULL);
    ck_free(text);
    ck_http_summarizer_free(h);
}

/* A NUL inside the prompt (tool output can hold one) must not cut the request short. */
TEST(nul_in_prompt_is_kept) {
    reply script[] = {{"HTTP/1.1 200 OK\r\n", OPENAI_OK, 0}};
    server s = start(script, 1);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, 0);
    ck_summary_request r = request();
    r.prompt = "before\0after-the-nul";
    r.prompt_len = 20;
    char *text = NULL, *why = NULL;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_OK);
    stop(&s);
    OK(strstr(last_request, "before\xef\xbf\xbd" "after-the-nul") != NULL);
    ck_free(text);
    ck_free(why);
    ck_http_summarizer_free(h);
}

TEST(anthropic_success) {
    reply script[] = {{"HTTP/1.1 200 OK\r\n", ANTHROPIC_OK, 0}};
    server s = start(script, 1);
    ck_http_summarizer *h = client(s.port, CK_HTTP_ANTHROPIC, 5, 0);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    size_t len = 0;
    uint64_t in = 0;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, &len, &in, NULL, &why), CK_OK);
    MEM_EQ(text, len, "## Next Steps\nship");
    INT_EQ(in, 9);
    stop(&s);
    OK(strstr(last_request, "POST /v1/messages") != NULL);
    OK(strstr(last_request, "x-api-key: sekrit-key") != NULL);
    OK(strstr(last_request, "anthropic-version: 2023-06-01") != NULL);
    OK(strstr(last_request, "\"system\":\"sys\"") != NULL);
    ck_free(text);
    ck_http_summarizer_free(h);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

TEST(retry_after_then_success) {
    reply script[] = {{"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\n",
                       "{\"error\":{\"message\":\"slow down\"}}", 0},
                      {"HTTP/1.1 200 OK\r\n", OPENAI_OK, 0}};
    server s = start(script, 2);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, 3);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    double t0 = now_s();
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_OK);
    double waited = now_s() - t0;
    OK(waited >= 0.9); /* Retry-After: 1 beats the 0.05 s backoff */
    OK(text != NULL);
    stop(&s);
    ck_free(text);
    ck_http_summarizer_free(h);
}

TEST(server_errors_until_retries_run_out) {
    reply err500 = {"HTTP/1.1 500 Internal Server Error\r\n",
                    "{\"error\":{\"message\":\"model exploded\\nbadly\"}}", 0};
    reply script[] = {err500, err500, err500};
    server s = start(script, 3);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, 2);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_ESUMMARY);
    OK(text == NULL);
    OK(why && strstr(why, "HTTP 500: model exploded badly") && strstr(why, "3 attempts"));
    OK(why && !strstr(why, "sekrit"));
    stop(&s);
    ck_free(why);
    ck_http_summarizer_free(h);
}

TEST(client_errors_do_not_retry) {
    reply script[] = {{"HTTP/1.1 401 Unauthorized\r\n",
                       "{\"error\":{\"message\":\"bad key sekrit-key\"}}", 0},
                      {"HTTP/1.1 200 OK\r\n", OPENAI_OK, 0}};
    server s = start(script, 2);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, 3);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_ESUMMARY);
    OK(why && strstr(why, "HTTP 401"));
    /* The provider quoted the key back: the reason must not carry it. */
    OK(why && !strstr(why, "sekrit-key") && strstr(why, "[redacted]"));
    stop(&s);
    /* Only one request reached the server. */
    OK(strstr(last_request, "=====") == strrchr(last_request, '=') - 4);
    ck_free(why);
    ck_http_summarizer_free(h);
}

TEST(malformed_and_empty_replies) {
    reply script[] = {{"HTTP/1.1 200 OK\r\n", "{not json", 0},
                      {"HTTP/1.1 200 OK\r\n", "{\"choices\":[]}", 0}};
    server s = start(script, 2);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, -1);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_ESUMMARY);
    OK(why && strstr(why, "not JSON"));
    ck_free(why);
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_ESUMMARY);
    OK(why && strstr(why, "no text"));
    ck_free(why);
    stop(&s);
    ck_http_summarizer_free(h);
}

TEST(stall_times_out) {
    reply script[] = {{"HTTP/1.1 200 OK\r\n", OPENAI_OK, 3000}};
    server s = start(script, 1);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 0.3, -1);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    double t0 = now_s();
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_ETIMEDOUT);
    OK(now_s() - t0 < 2.0);
    OK(why && strstr(why, "0.3 s"));
    ck_free(why);
    stop(&s);
    ck_http_summarizer_free(h);
}

TEST(connection_refused) {
    /* A port that was just free: bind, read the port, close. */
    server s = start(NULL, 0);
    int port = s.port;
    stop(&s);
    ck_http_summarizer *h = client(port, CK_HTTP_OPENAI, 2, 1);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_EIO);
    OK(why && strstr(why, "connection failed"));
    ck_free(why);
    ck_http_summarizer_free(h);
}

static volatile int cancel_flag;

static void on_alarm(int sig) {
    (void)sig;
    cancel_flag = 1;
}

TEST(cancel_mid_transfer) {
    reply script[] = {{"HTTP/1.1 200 OK\r\n", OPENAI_OK, 5000}};
    server s = start(script, 1);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 10, 3);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    cancel_flag = 0;
    signal(SIGALRM, on_alarm);
    /* Cancel 300 ms in, while the server stalls: the transfer must stop within ~100 ms. */
    struct itimerval it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_usec = 300000;
    setitimer(ITIMER_REAL, &it, NULL);
    double t0 = now_s();
    INT_EQ(ck_http_summarize(h, &r, &cancel_flag, &text, NULL, NULL, NULL, &why), CK_ECANCELED);
    double took = now_s() - t0;
    OK(took >= 0.25 && took < 0.6);
    ck_free(why);
    stop(&s);
    ck_http_summarizer_free(h);
}

TEST(options_are_checked) {
    ck_http_options o;
    memset(&o, 0, sizeof o);
    ck_error err;
    OK(ck_http_summarizer_new(&o, &err) == NULL);
    STR_EQ(err.where, "base_url");
    o.base_url = "ftp://x";
    OK(ck_http_summarizer_new(&o, &err) == NULL);
    o.base_url = "http://127.0.0.1:1";
    OK(ck_http_summarizer_new(&o, &err) == NULL);
    STR_EQ(err.where, "model");
    o.model = "m";
    o.timeout = -1;
    OK(ck_http_summarizer_new(&o, &err) == NULL);
    STR_EQ(err.where, "timeout");
    o.timeout = 0;
    const char *bad[] = {"X-Evil: a\r\nInjected: b", NULL};
    o.headers = bad;
    OK(ck_http_summarizer_new(&o, &err) == NULL);
    STR_EQ(err.where, "headers[0]");
    const char *good[] = {"X-Trace: 1", NULL};
    o.headers = good;
    ck_http_summarizer *h = ck_http_summarizer_new(&o, &err);
    OK(h != NULL);
    ck_http_summarizer_free(h);
    ck_http_summarizer_free(NULL);
}

/* One soft compaction of a 60-turn history through `h`, in a fresh store: the record (release
 * with free()), and whether any file of the store holds "sekrit". */
static char *compact_through(ck_http_summarizer *h, int *store_has_key) {
    char json[8192];
    size_t at = (size_t)snprintf(json, sizeof json,
                                 "[{\"role\":\"system\",\"content\":\"be brief\"},"
                                 "{\"role\":\"user\",\"content\":\"the task\"}");
    for (int i = 0; i < 30; i++)
        at += (size_t)snprintf(json + at, sizeof json - at,
                               ",{\"role\":\"assistant\",\"content\":\"step %d of the work at "
                               "hand\"},{\"role\":\"user\",\"content\":\"go on with %d\"}",
                               i, i);
    snprintf(json + at, sizeof json - at, "]");
    ck_error err;
    ck_history *hist = ck_json_read(json, strlen(json), &err);
    char dir[] = "/tmp/ck_test_http_XXXXXX";
    OK(mkdtemp(dir) != NULL);
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = ck_estimate_history(hist, CK_EST_DEFAULT) * 100 / 85;
    o.store_dir = dir;
    o.session_id = "http";
    o.summary_max_tokens = 256;
    ck_compactor *k = ck_compactor_new(&o, &err);
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, hist, 0, ck_http_summarize_fn, h, &c, &err), CK_OK);
    const char *rec = ck_compaction_record(c, NULL);
    char *copy = rec ? strdup(rec) : NULL;
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(hist);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "grep -rq sekrit %s", dir);
    *store_has_key = system(cmd) == 0;
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    OK(system(cmd) == 0);
    return copy;
}

/* A whole compaction through the HTTP summarizer: a failing server becomes the fallback. */
TEST(compaction_falls_back_on_http_failure) {
    reply script[] = {{"HTTP/1.1 400 Bad Request\r\n", "{\"error\":{\"message\":\"nope\"}}", 0}};
    server s = start(script, 1);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, -1);
    int store_has_key = 1;
    char *rec = compact_through(h, &store_has_key);
    OK(rec && strstr(rec, "\"fallback\":\"HTTP 400: nope\""));
    OK(rec && !strstr(rec, "sekrit"));
    OK(!store_has_key);
    stop(&s);
    free(rec);
    ck_http_summarizer_free(h);
}

/* ---- issue 21: what a provider returns, the key, the deadline ---------------------------- */

static ck_http_summarizer *client_with(int port, ck_http_api api, const char *model,
                                       int reasoning, const char *extra, const char *key_env) {
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, api == CK_HTTP_OPENAI ? "/v1" : "");
    ck_http_options o;
    memset(&o, 0, sizeof o);
    o.base_url = url;
    o.model = model;
    o.api = api;
    o.api_key_env = key_env ? key_env : "CK_TEST_KEY";
    o.timeout = 5;
    o.max_retries = -1;
    o.reasoning_model = reasoning;
    o.extra_body = extra;
    ck_error err;
    ck_http_summarizer *h = ck_http_summarizer_new(&o, &err);
    OK(h != NULL);
    if (!h) fprintf(stderr, "    %s (%s)\n", err.msg, err.where);
    return h;
}

/* A provider that echoes the key in a 200 reply: the reply, and so the checkpoint and the
 * record, get "[redacted]" instead. */
TEST(key_echoed_in_a_reply_is_redacted) {
    reply script[] = {
        {"HTTP/1.1 200 OK\r\n",
         "{\"choices\":[{\"message\":{\"content\":\"## Next Steps\\nship with key %KEY% now; "
         "%KEY%\"}}]}",
         0},
        {"HTTP/1.1 200 OK\r\n",
         "{\"content\":[{\"type\":\"text\",\"text\":\"## Next Steps\\nuse sekrit-\"},"
         "{\"type\":\"text\",\"text\":\"key here\"}]}",
         0},
        {"HTTP/1.1 503 Service Unavailable\r\n", "upstream refused key %KEY%", 0},
    };
    server s = start(script, 3);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, -1);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    size_t len = 0;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, &len, NULL, NULL, &why), CK_OK);
    MEM_EQ(text, len, "## Next Steps\nship with key [redacted] now; [redacted]");
    ck_free(text);
    ck_http_summarizer_free(h);
    /* Anthropic: the key split across two text blocks is still one text, blanked whole. */
    h = client(s.port, CK_HTTP_ANTHROPIC, 5, -1);
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, &len, NULL, NULL, &why), CK_OK);
    MEM_EQ(text, len, "## Next Steps\nuse [redacted] here");
    ck_free(text);
    /* A body that is not JSON is quoted raw in the reason: blanked too. */
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, &len, NULL, NULL, &why), CK_ESUMMARY);
    OK(why && strstr(why, "HTTP 503: upstream refused key [redacted]") && !strstr(why, "sekrit"));
    ck_free(why);
    ck_http_summarizer_free(h);
    stop(&s);
}

/* The same through a compaction: neither the checkpoint nor the record holds the key. */
TEST(key_echoed_in_a_reply_reaches_no_record) {
    reply script[] = {{"HTTP/1.1 200 OK\r\n",
                       "{\"choices\":[{\"message\":{\"content\":\"## User Intent\\nthe task "
                       "(key %KEY%)\\n## Next Steps\\ngo on\"}}]}",
                       0}};
    server s = start(script, 1);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, -1);
    int store_has_key = 1;
    char *rec = compact_through(h, &store_has_key);
    OK(rec && strstr(rec, "[redacted]") && strstr(rec, "\"fallback\":null"));
    OK(rec && !strstr(rec, "sekrit"));
    OK(!store_has_key); /* nothing in the store either */
    stop(&s);
    free(rec);
    ck_http_summarizer_free(h);
}

/* A key with CR/LF would inject headers: it is refused, and nothing is sent. */
TEST(key_with_control_bytes_is_never_sent) {
    const char *bad[] = {"sekrit\r\nX-Injected: 1", "sekrit\n", "sek\trit", "sek\x7frit",
                         "\x01sekrit"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("CK_TEST_BAD_KEY", bad[i], 1);
        reply script[] = {{"HTTP/1.1 200 OK\r\n", OPENAI_OK, 0}};
        server s = start(script, 1);
        ck_http_summarizer *h = client_with(s.port, CK_HTTP_OPENAI, "tiny", 0, NULL,
                                            "CK_TEST_BAD_KEY");
        ck_summary_request r = request();
        char *text = NULL, *why = NULL;
        INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_EINVAL);
        OK(text == NULL);
        OK(why && strstr(why, "CK_TEST_BAD_KEY") && strstr(why, "control character") &&
           !strstr(why, "sekrit") && !strstr(why, "sek"));
        stop(&s);
        OK(last_request[0] == '\0'); /* no request reached the server */
        ck_free(why);
        ck_http_summarizer_free(h);
    }
    unsetenv("CK_TEST_BAD_KEY");
    /* Extra headers are held to the same rule; a tab inside a value is fine. */
    ck_http_options o;
    memset(&o, 0, sizeof o);
    o.base_url = "http://127.0.0.1:1";
    o.model = "m";
    ck_error err;
    const char *ctl[] = {"X-A: b\x01", NULL};
    o.headers = ctl;
    OK(ck_http_summarizer_new(&o, &err) == NULL);
    STR_EQ(err.where, "headers[0]");
    const char *tab[] = {"X-A: b\tc", NULL};
    o.headers = tab;
    ck_http_summarizer *h = ck_http_summarizer_new(&o, &err);
    OK(h != NULL);
    ck_http_summarizer_free(h);
}

/* timeout bounds the whole call: a Retry-After longer than what is left ends the call at
 * once with the provider's answer, instead of sleeping through it (182 s observed). */
TEST(timeout_bounds_retry_after) {
    reply slow = {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 60\r\n",
                  "{\"error\":{\"message\":\"slow down\"}}", 0};
    reply script[] = {slow, slow, slow};
    server s = start(script, 3);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 1.0, 3);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    double t0 = now_s();
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_ESUMMARY);
    double took = now_s() - t0;
    OK(took < 10.0); /* the old code slept 60 s before its second try */
    OK(why && strstr(why, "HTTP 429: slow down") && strstr(why, "would pass the 1.0 s timeout"));
    ck_free(why);
    stop(&s);
    OK(strstr(last_request, "=====") == strrchr(last_request, '=') - 4); /* one request */
    ck_http_summarizer_free(h);
}

/* Attempts that each take most of the timeout: the call still ends at the deadline. */
TEST(timeout_bounds_the_attempts) {
    reply stall = {"HTTP/1.1 500 Internal Server Error\r\n", "{\"error\":{\"message\":\"x\"}}",
                   1000};
    reply script[] = {stall, stall, stall, stall};
    server s = start(script, 4);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 1.5, 3);
    ck_summary_request r = request();
    char *text = NULL, *why = NULL;
    double t0 = now_s();
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, &why), CK_ETIMEDOUT);
    double took = now_s() - t0;
    OK(took < 3.5); /* four attempts of 1 s each took 4 s and more before */
    OK(why && strstr(why, "within 1.5 s") && strstr(why, "(2 attempts)"));
    ck_free(why);
    stop(&s);
    ck_http_summarizer_free(h);
}

/* Usage numbers are range-checked before they become integers: a count that is no
 * non-negative integer is not reported (the old code cast 1e300 to uint64_t). */
TEST(usage_counts_are_range_checked) {
    static const struct {
        const char *usage;
        uint64_t in, out;
    } cases[] = {
        {"{\"prompt_tokens\":1e300,\"completion_tokens\":-5}", 7, 7},
        {"{\"prompt_tokens\":12.5,\"completion_tokens\":\"5\"}", 7, 7},
        {"{\"prompt_tokens\":-1e300,\"completion_tokens\":1e19}", 7, 10000000000000000000ull},
        {"{\"prompt_tokens\":18446744073709551615,\"completion_tokens\":18446744073709551616}",
         UINT64_MAX, 7},
        {"{\"prompt_tokens\":12,\"completion_tokens\":5,\"prompt_tokens\":13}", 13, 5},
        {"null", 7, 7},
    };
    size_t n = sizeof cases / sizeof cases[0];
    char bodies[sizeof cases / sizeof cases[0]][512];
    reply script[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < n; i++) {
        snprintf(bodies[i], sizeof bodies[i],
                 "{\"choices\":[{\"message\":{\"content\":\"ok\"}}],\"usage\":%s}", cases[i].usage);
        script[i].head = "HTTP/1.1 200 OK\r\n";
        script[i].body = bodies[i];
        script[i].stall_ms = 0;
    }
    server s = start(script, (int)n);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, -1);
    ck_summary_request r = request();
    for (size_t i = 0; i < n; i++) {
        char *text = NULL, *why = NULL;
        uint64_t in = 7, out = 7;
        INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, &in, &out, &why), CK_OK);
        OK(in == cases[i].in && out == cases[i].out);
        if (in != cases[i].in || out != cases[i].out)
            fprintf(stderr, "    usage %s: got %" PRIu64 " %" PRIu64 "\n", cases[i].usage, in, out);
        ck_free(text);
    }
    stop(&s);
    ck_http_summarizer_free(h);
    /* Anthropic's prompt is the cached part too (ck_usage_prompt_tokens()). */
    reply cached[] = {{"HTTP/1.1 200 OK\r\n",
                       "{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"usage\":{"
                       "\"input_tokens\":9,\"cache_read_input_tokens\":100,"
                       "\"cache_creation_input_tokens\":5,\"output_tokens\":4}}",
                       0}};
    s = start(cached, 1);
    h = client(s.port, CK_HTTP_ANTHROPIC, 5, -1);
    char *text = NULL;
    uint64_t in = 0, out = 0;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, NULL, &in, &out, NULL), CK_OK);
    INT_EQ(in, 114);
    INT_EQ(out, 4);
    ck_free(text);
    stop(&s);
    ck_http_summarizer_free(h);
}

/* A reply's text keeps its NUL bytes, and of repeated keys the last one counts, as the
 * provider's own clients read it (cJSON cut at the NUL and took the first). */
TEST(reply_read_as_providers_mean_it) {
    reply script[] = {
        {"HTTP/1.1 200 OK\r\n",
         "{\"choices\":[{\"message\":{\"content\":\"## Next Steps\\nrun a\\u0000b\"}}]}", 0},
        {"HTTP/1.1 200 OK\r\n",
         "{\"choices\":[{\"message\":{\"content\":\"first\"}}],"
         "\"choices\":[{\"message\":{\"content\":\"last\"}}]}",
         0},
    };
    server s = start(script, 2);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, -1);
    ck_summary_request r = request();
    char *text = NULL;
    size_t len = 0;
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, &len, NULL, NULL, NULL), CK_OK);
    INT_EQ(len, 21);
    OK(text && memcmp(text, "## Next Steps\nrun a\0b", 21) == 0);
    ck_free(text);
    INT_EQ(ck_http_summarize(h, &r, NULL, &text, &len, NULL, NULL, NULL), CK_OK);
    MEM_EQ(text, len, "last");
    ck_free(text);
    stop(&s);
    ck_http_summarizer_free(h);
}

/* ---- issue 15: the fields a model needs, extra_body ---------------------------------------- */

/* The body of the one request that a summarizer made with these options, parsed (repeated
 * keys refused); NULL when anything failed. Release with ck__jdoc_free(). */
static ck__jdoc *body_sent(ck_http_api api, const char *model, int reasoning, const char *extra) {
    reply script[] = {{"HTTP/1.1 200 OK\r\n", api == CK_HTTP_OPENAI ? OPENAI_OK : ANTHROPIC_OK,
                       0}};
    server s = start(script, 1);
    ck_http_summarizer *h = client_with(s.port, api, model, reasoning, extra, NULL);
    ck_summary_request r = request();
    char *text = NULL;
    int rc = h ? ck_http_summarize(h, &r, NULL, &text, NULL, NULL, NULL, NULL) : CK_EINVAL;
    INT_EQ(rc, CK_OK);
    ck_free(text);
    ck_http_summarizer_free(h);
    stop(&s);
    const char *body = strstr(last_request, "\r\n\r\n");
    const char *end = body ? strstr(body, "\n=====") : NULL;
    if (!body || !end) return NULL;
    ck__jread_options o = {CK__JREAD_NO_DUPLICATES, 0};
    ck_error err;
    ck__jdoc *d = ck__jread(body + 4, (size_t)(end - body - 4), o, &err);
    OK(d != NULL);
    return d;
}

static int body_int(const ck__jdoc *d, const char *key, int64_t *v) {
    return ck__ji64(ck__jgets(ck__jdoc_root(d), key), v);
}

TEST(body_fields_follow_the_model) {
    static const char *const reasoning[] = {"o1",     "o3-mini",    "O4-MINI", "o1-preview",
                                            "openai/o3", "gpt-5",   "gpt-5-mini", "GPT-5.1",
                                            "o3-pro-2025-06-10"};
    static const char *const classic[] = {"gpt-4o", "gpt-4.1-mini", "llama3", "tiny",
                                          "gpt-50",  "o3x",          "omni",   "gpt-4o/o3x"};
    for (size_t i = 0; i < sizeof reasoning / sizeof reasoning[0]; i++) {
        ck__jdoc *d = body_sent(CK_HTTP_OPENAI, reasoning[i], 0, NULL);
        int64_t v = 0;
        OK(d && body_int(d, "max_completion_tokens", &v) && v == 77);
        OK(d && !ck__jgets(ck__jdoc_root(d), "max_tokens") &&
           !ck__jgets(ck__jdoc_root(d), "temperature"));
        if (!d || v != 77) fprintf(stderr, "    model %s\n", reasoning[i]);
        INT_EQ(ck_http_reasoning_model(reasoning[i]), 1);
        ck__jdoc_free(d);
    }
    for (size_t i = 0; i < sizeof classic / sizeof classic[0]; i++) {
        ck__jdoc *d = body_sent(CK_HTTP_OPENAI, classic[i], 0, NULL);
        int64_t v = 0, t = 1;
        OK(d && body_int(d, "max_tokens", &v) && v == 77);
        OK(d && body_int(d, "temperature", &t) && t == 0);
        OK(d && !ck__jgets(ck__jdoc_root(d), "max_completion_tokens"));
        INT_EQ(ck_http_reasoning_model(classic[i]), 0);
        ck__jdoc_free(d);
    }
    OK(ck_http_reasoning_model(NULL) == 0 && ck_http_reasoning_model("") == 0);
    /* The option overrides the name both ways. */
    ck__jdoc *d = body_sent(CK_HTTP_OPENAI, "o3-mini", -1, NULL);
    int64_t v = 0;
    OK(d && body_int(d, "max_tokens", &v) && ck__jgets(ck__jdoc_root(d), "temperature"));
    ck__jdoc_free(d);
    d = body_sent(CK_HTTP_OPENAI, "my-local-reasoner", 1, NULL);
    OK(d && body_int(d, "max_completion_tokens", &v) &&
       !ck__jgets(ck__jdoc_root(d), "temperature"));
    ck__jdoc_free(d);
    /* Anthropic's API always takes max_tokens. */
    d = body_sent(CK_HTTP_ANTHROPIC, "o3", 1, NULL);
    OK(d && body_int(d, "max_tokens", &v) && v == 77 && ck__jgets(ck__jdoc_root(d), "system"));
    ck__jdoc_free(d);
}

TEST(extra_body_is_merged) {
    const char *extra = "{\"reasoning_effort\":\"low\",\"temperature\":0.7,"
                        "\"metadata\":{\"note\":\"a\\u0000b\",\"n\":[1,2.50]}}";
    ck__jdoc *d = body_sent(CK_HTTP_OPENAI, "gpt-4o", 0, extra);
    const ck__jval *root = ck__jdoc_root(d);
    size_t n = 0;
    const char *s = ck__jstr(ck__jgets(root, "reasoning_effort"), &n);
    MEM_EQ(s, n, "low");
    double t = 0;
    OK(ck__jdouble(ck__jgets(root, "temperature"), &t) && t == 0.7); /* ours replaced: once */
    s = ck__jstr(ck__jgets(ck__jgets(root, "metadata"), "note"), &n);
    OK(s && n == 3 && memcmp(s, "a\0b", 3) == 0);
    const ck__jval *nums = ck__jgets(ck__jgets(root, "metadata"), "n");
    OK(nums && ck__jat(nums, 1) && memcmp(ck__jat(nums, 1)->u.str, "2.50", 4) == 0);
    OK(ck__jgets(root, "messages") && ck__jgets(root, "model"));
    ck__jdoc_free(d);
    /* Anthropic too. */
    d = body_sent(CK_HTTP_ANTHROPIC, "claude", 0, "{\"metadata\":{\"user_id\":\"u1\"}}");
    OK(d && ck__jgets(ck__jgets(ck__jdoc_root(d), "metadata"), "user_id"));
    ck__jdoc_free(d);
    /* Not one JSON object: refused when the summarizer is made. */
    static const struct {
        const char *text;
        const char *msg_part;
        size_t offset;
    } bad[] = {
        {"[1]", "JSON object", 0},          {"\"x\"", "JSON object", 0},
        {"{", "end", 1},                    {"{\"a\":1,\"a\":2}", "duplicate", 7},
        {"{} {}", "after", 3},              {"{\"a\":\"\xff\"}", "UTF-8", 6},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_http_options o;
        memset(&o, 0, sizeof o);
        o.base_url = "http://127.0.0.1:1";
        o.model = "m";
        o.extra_body = bad[i].text;
        ck_error err;
        OK(ck_http_summarizer_new(&o, &err) == NULL);
        INT_EQ(err.code, CK_EINVAL);
        STR_EQ(err.where, "extra_body");
        OK(err.msg && strstr(err.msg, bad[i].msg_part));
        INT_EQ(err.offset, bad[i].offset);
    }
}

HARNESS_MAIN(setenv("CK_TEST_KEY", "sekrit-key", 1); RUN(openai_success) RUN(nul_in_prompt_is_kept) RUN(anthropic_success)
                 RUN(retry_after_then_success) RUN(server_errors_until_retries_run_out)
                     RUN(client_errors_do_not_retry) RUN(malformed_and_empty_replies)
                         RUN(stall_times_out) RUN(connection_refused) RUN(cancel_mid_transfer)
                             RUN(options_are_checked) RUN(compaction_falls_back_on_http_failure)
                                 RUN(key_echoed_in_a_reply_is_redacted)
                                     RUN(key_echoed_in_a_reply_reaches_no_record)
                                         RUN(key_with_control_bytes_is_never_sent)
                                             RUN(timeout_bounds_retry_after)
                                                 RUN(timeout_bounds_the_attempts)
                                                     RUN(usage_counts_are_range_checked)
                                                         RUN(reply_read_as_providers_mean_it)
                                                             RUN(body_fields_follow_the_model)
                                                                 RUN(extra_body_is_merged))
