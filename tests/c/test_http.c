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
        char resp[8192];
        int len = snprintf(resp, sizeof resp, "%sContent-Type: application/json\r\nContent-Length: "
                                              "%zu\r\nConnection: close\r\n\r\n%s",
                           script[i].head, strlen(script[i].body), script[i].body);
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

/* A whole compaction through the HTTP summarizer: a failing server becomes the fallback. */
TEST(compaction_falls_back_on_http_failure) {
    reply script[] = {{"HTTP/1.1 400 Bad Request\r\n", "{\"error\":{\"message\":\"nope\"}}", 0}};
    server s = start(script, 1);
    ck_http_summarizer *h = client(s.port, CK_HTTP_OPENAI, 5, -1);
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
    OK(rec && strstr(rec, "\"fallback\":\"HTTP 400: nope\""));
    OK(rec && !strstr(rec, "sekrit"));
    stop(&s);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(hist);
    ck_http_summarizer_free(h);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    OK(system(cmd) == 0);
}

HARNESS_MAIN(setenv("CK_TEST_KEY", "sekrit-key", 1); RUN(openai_success) RUN(nul_in_prompt_is_kept) RUN(anthropic_success)
                 RUN(retry_after_then_success) RUN(server_errors_until_retries_run_out)
                     RUN(client_errors_do_not_retry) RUN(malformed_and_empty_replies)
                         RUN(stall_times_out) RUN(connection_refused) RUN(cancel_mid_transfer)
                             RUN(options_are_checked) RUN(compaction_falls_back_on_http_failure))
