/* Latency of the S3 backend's operations against a SeaweedFS server started for the run on
 * loopback (tools/seaweedfs.sh): p50 / p90 / p99 / max of put, get, put_new and list, one
 * thread, connections reused. `make s3-latency` builds and runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctxkeel.h"
#include "s3_server.h"

#define N 200

static const ck_evidence_backend *be;
static char small[4096], large[1 << 20];
static int failed;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int count_key(void *ctx, const char *key, size_t len) {
    (void)key;
    (void)len;
    ++*(int *)ctx;
    return 0;
}

typedef enum op { PUT_SMALL, GET_SMALL, GET_MISSING, PUT_NEW, PUT_NEW_CONFLICT, LIST_AFTER,
                  LIST_ALL, PUT_LARGE, GET_LARGE } op;

/* One call of `what`, number i; a failure is remembered. */
static void call(op what, int i) {
    char key[64], *out = NULL;
    size_t n = 0;
    int count = 0, rc = CK_OK;
    ck_error err;
    switch (what) {
        case PUT_SMALL:
        case GET_SMALL:
            snprintf(key, sizeof key, "tool_results/s/%06d.txt", i);
            rc = what == PUT_SMALL ? be->put(be->ctx, key, small, sizeof small, &err)
                                   : be->get(be->ctx, key, &out, &n, &err);
            break;
        case GET_MISSING:
            rc = be->get(be->ctx, "tool_results/s/missing.txt", &out, &n, &err);
            break;
        case PUT_NEW:
            snprintf(key, sizeof key, "compactions/s/%08d", i);
            rc = be->put_new(be->ctx, key, small, 512, &err);
            break;
        case PUT_NEW_CONFLICT:
            rc = be->put_new(be->ctx, "compactions/s/00000000", small, 512, &err);
            rc = rc == CK_ECONFLICT ? CK_OK : CK_EIO;
            break;
        case LIST_AFTER:
        case LIST_ALL:
            rc = be->list(be->ctx, "compactions/s/",
                          what == LIST_AFTER ? "compactions/s/00000190" : NULL, count_key, &count,
                          &err);
            if (count != (what == LIST_AFTER ? 9 : N)) rc = CK_EIO;
            break;
        case PUT_LARGE:
        case GET_LARGE:
            snprintf(key, sizeof key, "tool_results/s/large%06d.txt", i);
            rc = what == PUT_LARGE ? be->put(be->ctx, key, large, sizeof large, &err)
                                   : be->get(be->ctx, key, &out, &n, &err);
            break;
    }
    ck_free(out);
    if (rc) {
        fprintf(stderr, "s3_latency: call %d of %d failed\n", i, (int)what);
        failed = 1;
    }
}

static void measure(const char *name, op what, int n) {
    static double ms[N];
    for (int i = 0; i < n; i++) {
        double t = now_ms();
        call(what, i);
        ms[i] = now_ms() - t;
    }
    qsort(ms, (size_t)n, sizeof *ms, by_value);
    printf("| %-28s | %5d | %7.2f | %7.2f | %7.2f | %7.2f |\n", name, n, ms[n / 2],
           ms[n * 9 / 10], ms[n * 99 / 100], ms[n - 1]);
}

int main(void) {
    static const char ACCESS[] = "latencyAccess", SECRET[] = "latencySecret0123456789";
    s3_server srv;
    if (!s3_server_available(&srv)) {
        fprintf(stderr, "s3_latency: no SeaweedFS binary (make s3-server)\n");
        return 1;
    }
    setenv("AWS_ACCESS_KEY_ID", ACCESS, 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    if (s3_server_start(&srv, ACCESS, SECRET, "ctxkeel-test") != 0) {
        fprintf(stderr, "s3_latency: the server did not start (see %s/weed.log)\n", srv.dir);
        return 1;
    }
    char url[512], load[64] = "?\n";
    snprintf(url, sizeof url, "s3://ctxkeel-test/latency?region=us-east-1&endpoint=%s",
             srv.endpoint);
    ck_error err;
    ck_s3_backend *s3 = ck_s3_backend_new(url, strlen(url), &err);
    if (!s3) {
        fprintf(stderr, "s3_latency: %s (%s)\n", err.msg, err.where);
        s3_server_remove(&srv);
        return 1;
    }
    be = ck_s3_backend_evidence(s3);
    memset(small, 'x', sizeof small);
    memset(large, 'y', sizeof large);
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (!fgets(load, sizeof load, la)) strcpy(load, "?\n");
        fclose(la);
    }
    load[strcspn(load, "\n")] = '\0';
    printf("S3 backend on SeaweedFS at %s, one thread (loadavg %s)\n", srv.endpoint, load);
    printf("| operation                    | calls | p50 ms  | p90 ms  | p99 ms  | max ms  |\n");
    printf("|------------------------------|-------|---------|---------|---------|---------|\n");
    measure("put 4 KiB", PUT_SMALL, N);
    measure("get 4 KiB", GET_SMALL, N);
    measure("get missing (404)", GET_MISSING, N);
    measure("put_new 512 B", PUT_NEW, N);
    measure("put_new conflict (412)", PUT_NEW_CONFLICT, N);
    measure("list 9 keys after a key", LIST_AFTER, N / 4);
    measure("list 200 keys (1 page)", LIST_ALL, N / 4);
    measure("put 1 MiB", PUT_LARGE, N / 4);
    measure("get 1 MiB", GET_LARGE, N / 4);
    ck_s3_backend_free(s3);
    s3_server_remove(&srv);
    return failed;
}
