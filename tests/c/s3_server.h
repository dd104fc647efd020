/* A SeaweedFS server for one test process, through tools/seaweedfs.sh: started on loopback
 * ports with its data in a fresh temporary folder, killed with the process if that dies
 * (CK_S3_WATCH_PID), stopped and removed at the end. Used by tests/c/test_s3.c and
 * tools/s3_latency.c. */
#ifndef CK_TEST_S3_SERVER_H_
#define CK_TEST_S3_SERVER_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct s3_server {
    const char *script; /* $CK_SEAWEEDFS_SH, or tools/seaweedfs.sh (run from the repo root) */
    char dir[256];      /* the server's folder: data, ports, pid, log */
    char endpoint[128]; /* "http://127.0.0.1:PORT" once started */
} s3_server;

/* Runs `script VERB DIR`; the first line it prints goes to `line` (may be NULL). Returns its
 * exit status, or -1. */
static inline int s3_server_run(const s3_server *s, const char *verb, char *line, size_t cap) {
    char cmd[1024], buf[256] = "";
    snprintf(cmd, sizeof cmd, "bash '%s' %s '%s'", s->script, verb, s->dir);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    if (!fgets(buf, sizeof buf, p)) buf[0] = '\0';
    int st = pclose(p);
    buf[strcspn(buf, "\r\n")] = '\0';
    if (line) snprintf(line, cap, "%s", buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether the SeaweedFS binary is built (`make s3-server`). */
static inline int s3_server_available(s3_server *s) {
    s->script = getenv("CK_SEAWEEDFS_SH") ? getenv("CK_SEAWEEDFS_SH") : "tools/seaweedfs.sh";
    snprintf(s->dir, sizeof s->dir, "/nonexistent");
    return s3_server_run(s, "path", NULL, 0) == 0;
}

/* Starts the server (again, in the same folder and on the same ports, when it ran before)
 * with the one identity `access` / `secret`, and waits until it stores objects. Returns 0. */
static inline int s3_server_start(s3_server *s, const char *access, const char *secret,
                                  const char *bucket) {
    if (strcmp(s->dir, "/nonexistent") == 0) {
        snprintf(s->dir, sizeof s->dir, "%s/ck-s3-XXXXXX",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(s->dir)) return -1;
    }
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    setenv("CK_S3_WATCH_PID", pid, 1);
    setenv("CK_S3_ACCESS_KEY", access, 1);
    setenv("CK_S3_SECRET_KEY", secret, 1);
    setenv("CK_S3_BUCKET", bucket, 1);
    if (s3_server_run(s, "start", s->endpoint, sizeof s->endpoint) != 0) return -1;
    return strncmp(s->endpoint, "http://127.0.0.1:", 17) == 0 ? 0 : -1;
}

/* The server's process id, or 0. */
static inline pid_t s3_server_pid(const s3_server *s) {
    char path[300];
    long pid = 0;
    snprintf(path, sizeof path, "%s/pid", s->dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1) pid = 0;
        fclose(f);
    }
    return (pid_t)pid;
}

/* Stops the server and removes its folder. */
static inline void s3_server_remove(s3_server *s) {
    s3_server_run(s, "stop", NULL, 0);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", s->dir);
}

#endif
