/* A fleet of workers sharing sessions: N worker processes (N = 2, 8, 32) serve M sessions
 * round-robin, so that each turn of a session lands on another worker than the last, through
 * the built-in S3 backend (a SeaweedFS server started for the run on loopback by
 * tools/seaweedfs.sh) and, for comparison, through one local store folder all workers share.
 * Every call makes a fresh compactor for the session (resuming it from the store) and compacts
 * the session's history, which grows by a few turns each round, with a trivial summarizer.
 *
 *   fleet OUT.md [LOCAL_DIR]
 *
 * writes a Markdown table: compactions per second (all workers together), p50 / p99 of
 * ck_compactor_new() (the resume) and of ck_compactor_compact(), and the bytes stored per
 * session (evidence, audit records, the key's share not counted). `make bench-fleet` runs it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctxkeel.h"
#include "s3_server.h"

#define SESSIONS 32
#define ROUNDS 4
#define MAX_WORKERS 32

static const char ACCESS[] = "fleetAccessKey";
static const char SECRET[] = "fleetSecretKey0123456789abcdefghijklmnop";
static const char BUCKET[] = "ctxkeel-fleet";

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Session j's history at round r: a task, then 24 + 6r turns of a shell call and its output,
 * every fourth output 6 KB (offloaded) and the others 500 bytes. Caller frees. */
static char *history_json(int j, int r) {
    int turns = 24 + 6 * r;
    size_t cap = 512 + (size_t)turns * 6400;
    char *s = malloc(cap);
    size_t at = (size_t)snprintf(s, cap, "[{\"role\":\"user\",\"content\":\"Session %d: make "
                                         "the build pass.\"}", j);
    for (int t = 0; t < turns; t++) {
        at += (size_t)snprintf(s + at, cap - at,
                               ",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
                               "\"c%d\",\"type\":\"function\",\"function\":{\"name\":\"sh\","
                               "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":"
                               "\"c%d\",\"content\":\"",
                               t, t);
        size_t n = t % 4 == 3 ? 6000 : 500;
        for (size_t i = 0; i < n; i++)
            s[at++] = i % 64 == 63 ? ' ' : (char)('a' + (i * 31 + (size_t)(t * 7 + j)) % 26);
        at += (size_t)snprintf(s + at, cap - at, " make: exit %d\"}", t % 3);
    }
    snprintf(s + at, cap - at, "]");
    return s;
}

static int summarize(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    (void)ctx;
    (void)req;
    static const char reply[] = "## User Intent\nMake the build pass.\n## Next Steps\nRerun make.";
    return ck_compaction_set_summary(c, reply, sizeof reply - 1);
}

typedef struct fleet_config {
    const char *name;   /* "S3" or "local disk" */
    const char *url;    /* the S3 URL, or NULL */
    const char *dir;    /* the local store folder (unused by S3 but for its empty check) */
    int workers;
    uint64_t window;
} fleet_config;

/* One worker: waits for a byte per round, serves its sessions of that round, answers a byte.
 * Writes its timings (new ms, compact ms) as doubles to `out_fd` at the end. */
static void worker(const fleet_config *cfg, int w, int go_fd, int done_fd, int out_fd) {
    double *t_new = calloc(SESSIONS * ROUNDS, sizeof *t_new);
    double *t_cmp = calloc(SESSIONS * ROUNDS, sizeof *t_cmp);
    int n = 0, failed = 0;
    for (int r = 0; r < ROUNDS; r++) {
        char c;
        if (read(go_fd, &c, 1) != 1) _exit(2);
        for (int j = 0; j < SESSIONS; j++) {
            if ((r * SESSIONS + j + r) % cfg->workers != w) continue;
            char session[32];
            snprintf(session, sizeof session, "fleet-%d", j);
            char *json = history_json(j, r);
            ck_error err;
            ck_history *h = ck_json_read(json, strlen(json), &err);
            ck_compactor_options o;
            memset(&o, 0, sizeof o);
            o.context_window = cfg->window;
            o.session_id = session;
            o.store_dir = cfg->dir;
            o.store = cfg->url;
            o.keep_tail = 4;
            double t0 = now_ms();
            ck_compactor *k = ck_compactor_new(&o, &err);
            double t1 = now_ms();
            ck_compaction *cp = NULL;
            int rc = k && h ? ck_compactor_compact(k, h, 0, summarize, NULL, &cp, &err) : -1;
            double t2 = now_ms();
            if (rc != CK_OK) {
                fprintf(stderr, "fleet: worker %d session %d round %d: %s (%s)\n", w, j, r,
                        err.msg, err.where);
                failed = 1;
            } else {
                size_t len;
                const char *rec = ck_compaction_record(cp, &len);
                if (rec && strstr(rec, "\"error\":null") == NULL) {
                    fprintf(stderr, "fleet: a record tells of a failure: %.300s\n", rec);
                    failed = 1;
                }
            }
            t_new[n] = t1 - t0;
            t_cmp[n++] = t2 - t1;
            ck_compaction_free(cp);
            ck_compactor_free(k);
            ck_history_free(h);
            free(json);
        }
        if (write(done_fd, "d", 1) != 1) _exit(2);
    }
    int ok = write(out_fd, &n, sizeof n) == (ssize_t)sizeof n &&
             write(out_fd, t_new, sizeof *t_new * (size_t)n) == (ssize_t)(sizeof *t_new * (size_t)n) &&
             write(out_fd, t_cmp, sizeof *t_cmp * (size_t)n) == (ssize_t)(sizeof *t_cmp * (size_t)n);
    _exit(ok && !failed ? 0 : 1);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    int i = (int)(p * (n - 1) + 0.5);
    return n ? v[i] : 0;
}

typedef struct fleet_result {
    double rate, new50, new99, cmp50, cmp99;
    int failed;
} fleet_result;

/* Runs one configuration: forks the workers, releases them round by round, gathers timings. */
static fleet_result run_fleet(const fleet_config *cfg) {
    fleet_result res = {0, 0, 0, 0, 0, 0};
    int go[MAX_WORKERS][2], done[2], out[MAX_WORKERS][2];
    pid_t pids[MAX_WORKERS];
    if (pipe(done)) exit(1);
    fflush(NULL);
    for (int w = 0; w < cfg->workers; w++) {
        if (pipe(go[w]) || pipe(out[w])) exit(1);
        pids[w] = fork();
        if (pids[w] == 0) {
            close(done[0]);
            worker(cfg, w, go[w][0], done[1], out[w][1]);
        }
        close(go[w][0]);
        close(out[w][1]);
    }
    close(done[1]);
    double t0 = now_ms();
    for (int r = 0; r < ROUNDS; r++) {
        for (int w = 0; w < cfg->workers; w++)
            if (write(go[w][1], "g", 1) != 1) res.failed = 1;
        for (int w = 0; w < cfg->workers; w++) {
            char c;
            if (read(done[0], &c, 1) != 1) res.failed = 1;
        }
    }
    double wall = now_ms() - t0;
    double t_new[SESSIONS * ROUNDS], t_cmp[SESSIONS * ROUNDS];
    int total = 0;
    for (int w = 0; w < cfg->workers; w++) {
        close(go[w][1]);
        int n = 0;
        if (read(out[w][0], &n, sizeof n) != (ssize_t)sizeof n || n < 0 ||
            total + n > SESSIONS * ROUNDS ||
            read(out[w][0], t_new + total, sizeof(double) * (size_t)n) !=
                (ssize_t)(sizeof(double) * (size_t)n) ||
            read(out[w][0], t_cmp + total, sizeof(double) * (size_t)n) !=
                (ssize_t)(sizeof(double) * (size_t)n))
            res.failed = 1;
        else total += n;
        close(out[w][0]);
        int st = 0;
        if (waitpid(pids[w], &st, 0) != pids[w] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            res.failed = 1;
    }
    close(done[0]);
    if (total != SESSIONS * ROUNDS) res.failed = 1;
    res.rate = total / (wall / 1e3);
    res.new50 = pct(t_new, total, 0.50);
    res.new99 = pct(t_new, total, 0.99);
    res.cmp50 = pct(t_cmp, total, 0.50);
    res.cmp99 = pct(t_cmp, total, 0.99);
    return res;
}

/* Bytes the backend holds under `prefix`. */
typedef struct sizes {
    const ck_evidence_backend *be;
    unsigned long long bytes;
    int keys;
} sizes;

static int add_size(void *ctx, const char *key, size_t len) {
    (void)len;
    sizes *s = ctx;
    char *text = NULL;
    size_t n = 0;
    ck_error err;
    if (s->be->get(s->be->ctx, key, &text, &n, &err) == CK_OK && text) s->bytes += n;
    ck_free(text);
    s->keys++;
    return 0;
}

static unsigned long long s3_bytes_per_session(const char *url) {
    ck_error err;
    ck_s3_backend *b = ck_s3_backend_new(url, strlen(url), &err);
    if (!b) return 0;
    sizes s = {ck_s3_backend_evidence(b), 0, 0};
    s.be->list(s.be->ctx, "tool_results/", NULL, add_size, &s, &err);
    s.be->list(s.be->ctx, "compactions/fleet-", NULL, add_size, &s, &err);
    ck_s3_backend_free(b);
    return s.bytes / SESSIONS;
}

static unsigned long long disk_bytes_per_session(const char *dir) {
    char cmd[800];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && find tool_results compactions -type f ! -name .key -printf '%%s\\n' | "
             "awk '{s+=$1} END {print s+0}'",
             dir);
    FILE *p = popen(cmd, "r");
    unsigned long long total = 0;
    if (p) {
        if (fscanf(p, "%llu", &total) != 1) total = 0;
        pclose(p);
    }
    return total / SESSIONS;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fleet OUT.md [LOCAL_DIR]\n");
        return 2;
    }
    const char *local = argc > 2 ? argv[2] : "/tmp/ctxkeel-fleet";
    s3_server srv;
    if (!s3_server_available(&srv)) {
        fprintf(stderr, "fleet: no SeaweedFS binary (make s3-server)\n");
        return 1;
    }
    if (s3_server_start(&srv, ACCESS, SECRET, BUCKET) != 0) {
        fprintf(stderr, "fleet: SeaweedFS did not start\n");
        return 1;
    }
    setenv("AWS_ACCESS_KEY_ID", ACCESS, 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    unsetenv("AWS_SESSION_TOKEN");
    char *h0 = history_json(0, 0);
    ck_error err;
    ck_history *hist = ck_json_read(h0, strlen(h0), &err);
    /* The first round starts at the soft tier; later rounds grow past it again. */
    uint64_t window = (uint64_t)((double)ck_estimate_history(hist, CK_EST_DEFAULT) / 0.75);
    ck_history_free(hist);
    free(h0);
    static const int fleets[] = {2, 8, 32};
    FILE *out = fopen(argv[1], "w");
    if (!out) return 1;
    fprintf(out, "| store | workers | compactions/s | resume p50 / p99 (ms) | compact() p50 / p99 "
                 "(ms) | bytes stored per session |\n|---|---:|---:|---:|---:|---:|\n");
    int failed = 0;
    for (int s = 0; s < 2; s++) {
        for (size_t f = 0; f < sizeof fleets / sizeof *fleets; f++) {
            char url[512], dir[400], cmd[900];
            snprintf(dir, sizeof dir, "%s-%d-%d", local, s, fleets[f]);
            snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
            if (system(cmd) != 0) return 1;
            snprintf(url, sizeof url, "s3://%s/fleet-%d?region=us-east-1&endpoint=%s", BUCKET,
                     fleets[f], srv.endpoint);
            fleet_config cfg = {s ? "local disk" : "S3 (SeaweedFS, loopback)", s ? NULL : url,
                                dir, fleets[f], window};
            fleet_result r = run_fleet(&cfg);
            unsigned long long bytes = s ? disk_bytes_per_session(dir) : s3_bytes_per_session(url);
            fprintf(out, "| %s | %d | %.0f | %.1f / %.1f | %.1f / %.1f | %llu |\n", cfg.name,
                    cfg.workers, r.rate, r.new50, r.new99, r.cmp50, r.cmp99, bytes);
            fprintf(stderr, "fleet: %s, %d workers: %.0f compactions/s%s\n", cfg.name,
                    cfg.workers, r.rate, r.failed ? " (FAILED)" : "");
            failed |= r.failed;
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            if (system(cmd) != 0) failed = 1;
        }
    }
    fprintf(out, "\n%d sessions, %d rounds: in round r, session j is served by worker "
                 "(r x %d + j + r) mod N, so every turn of a session lands on another worker "
                 "than its last; each call makes a fresh compactor (the resume) and compacts "
                 "the session's history (%d to %d turns, every fourth output 6 KB), with a "
                 "summarizer that answers at once. Window %llu tokens.\n",
            SESSIONS, ROUNDS, SESSIONS, 24, 24 + 6 * (ROUNDS - 1), (unsigned long long)window);
    fclose(out);
    s3_server_remove(&srv);
    return failed;
}
