/* ctxkeel - the command-line front end: check, repair and count a JSON message list. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctxkeel.h"

static const char USAGE[] =
    "usage: ctxkeel check FILE [--format auto|openai|anthropic]\n"
    "       ctxkeel repair FILE [--format F] [-o OUT] [--pretty]\n"
    "       ctxkeel tokens FILE [--estimator default|chars4]\n"
    "       ctxkeel --version\n"
    "FILE is a JSON message list (or an object with \"messages\"); - reads standard input.\n"
    "Exit status: 0 success, 1 violations found (check), 2 bad usage or input.\n";

typedef struct options {
    const char *command;
    const char *file;
    const char *out;
    ck_format format;
    ck_estimator estimator;
    int pretty;
} options;

static char *read_all(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            char *grown = cap > ((size_t)1 << 40) ? NULL : realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    int failed = ferror(f);
    if (f != stdin) fclose(f);
    if (failed) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--format") == 0 && next) {
            i++;
            if (strcmp(next, "auto") == 0) o->format = CK_FORMAT_AUTO;
            else if (strcmp(next, "openai") == 0) o->format = CK_FORMAT_OPENAI;
            else if (strcmp(next, "anthropic") == 0) o->format = CK_FORMAT_ANTHROPIC;
            else return -1;
        } else if (strcmp(a, "--estimator") == 0 && next) {
            i++;
            if (strcmp(next, "default") == 0) o->estimator = CK_EST_DEFAULT;
            else if (strcmp(next, "chars4") == 0) o->estimator = CK_EST_CHARS4;
            else return -1;
        } else if (strcmp(a, "-o") == 0 && next) {
            o->out = argv[++i];
        } else if (strcmp(a, "--pretty") == 0) {
            o->pretty = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            return -1;
        } else if (!o->command) {
            o->command = a;
        } else if (!o->file) {
            o->file = a;
        } else {
            return -1;
        }
    }
    return o->command && o->file ? 0 : -1;
}

static void print_error(const char *file, const ck_error *err) {
    fprintf(stderr, "ctxkeel: %s: %s", file, err->msg ? err->msg : ck_strerror(err->code));
    if (err->where[0]) fprintf(stderr, " at %s", err->where);
    if (err->code == CK_ESYNTAX) fprintf(stderr, " (byte %zu)", err->offset);
    fprintf(stderr, " [%s]\n", ck_err_name(err->code));
}

static int cmd_check(const options *o, ck_history *h) {
    ck_pair_violation *v = NULL;
    size_t n = 0;
    ck_error err;
    if (ck_check_pairs(h, o->format, &v, &n, &err)) {
        print_error(o->file, &err);
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        printf("%s: messages[%zu] part %zu: %s (tool call id \"%.*s\")\n", o->file, v[i].index,
               v[i].part, ck_pair_issue_name(v[i].kind), (int)v[i].id_len, v[i].id);
    printf("%s: %zu messages, %zu violation%s\n", o->file, ck_history_count(h), n,
           n == 1 ? "" : "s");
    ck_free(v);
    return n ? 1 : 0;
}

static int cmd_repair(const options *o, ck_history *h) {
    ck_view *view = NULL;
    ck_error err;
    ck_format format;
    if (ck_history_format(h, o->format, &format, &err) ||
        ck_repair_pairs(h, format, &view, &err)) {
        print_error(o->file, &err);
        return 2;
    }
    char *json = ck_json_write(h, view, format, o->pretty, &err);
    size_t changed = 0;
    for (size_t i = 0; i < ck_view_count(view); i++) {
        ck_out_msg m;
        ck_view_get(view, i, &m);
        changed += m.op != CK_OP_KEEP;
    }
    size_t n_out = ck_view_count(view);
    ck_view_free(view);
    if (!json) {
        print_error(o->file, &err);
        return 2;
    }
    FILE *out = o->out ? fopen(o->out, "wb") : stdout;
    if (!out) {
        fprintf(stderr, "ctxkeel: %s: %s\n", o->out, strerror(errno));
        ck_free(json);
        return 2;
    }
    int failed = fputs(json, out) < 0 || fputc('\n', out) == EOF;
    if (o->out) failed |= fclose(out) != 0;
    ck_free(json);
    if (failed) {
        fprintf(stderr, "ctxkeel: cannot write the output\n");
        return 2;
    }
    fprintf(stderr, "%s: %zu messages in, %zu out, %zu new or edited\n", o->file,
            ck_history_count(h), n_out, changed);
    return 0;
}

static int cmd_tokens(const options *o, ck_history *h) {
    uint64_t total = ck_estimate_history(h, o->estimator);
    uint64_t chars4 = ck_estimate_history(h, CK_EST_CHARS4);
    printf("%s: %zu messages, %llu tokens (%s), chars4 %llu\n", o->file, ck_history_count(h),
           (unsigned long long)total, o->estimator == CK_EST_CHARS4 ? "chars4" : "default",
           (unsigned long long)chars4);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("ctxkeel %s\n", ck_version());
        return 0;
    }
    options o;
    if (parse_args(argc, argv, &o) != 0) {
        fputs(USAGE, stderr);
        return 2;
    }
    int (*run)(const options *, ck_history *) = NULL;
    if (strcmp(o.command, "check") == 0) run = cmd_check;
    else if (strcmp(o.command, "repair") == 0) run = cmd_repair;
    else if (strcmp(o.command, "tokens") == 0) run = cmd_tokens;
    if (!run) {
        fputs(USAGE, stderr);
        return 2;
    }
    size_t len = 0;
    char *text = read_all(o.file, &len);
    if (!text) {
        fprintf(stderr, "ctxkeel: %s: %s\n", o.file, strerror(errno ? errno : EIO));
        return 2;
    }
    ck_error err;
    ck_history *h = ck_json_read(text, len, &err);
    if (!h) {
        print_error(o.file, &err);
        free(text);
        return 2;
    }
    int rc = run(&o, h);
    ck_history_free(h);
    free(text);
    return rc;
}
