/* ctxkeel - the command-line front end: check, repair and count a JSON message list. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctxkeel.h"

static const char USAGE[] =
    "usage: ctxkeel check FILE [--format auto|openai|anthropic]\n"
    "       ctxkeel repair FILE [--format F] [-o OUT] [--pretty]\n"
    "       ctxkeel tokens FILE [--estimator default|chars4|cl100k]\n"
    "       ctxkeel compact FILE --window N [-o OUT] [--pretty] [COMPACTOR OPTIONS]\n"
    "       ctxkeel replay FILE --window N [--svg OUT] [COMPACTOR OPTIONS]\n"
    "compactor options: --store DIR (default .ctxkeel), --session ID,\n"
    "  --keep-tail N, --summary-max-tokens N, --estimator E, --format F\n"
    "summarizer (default: the built-in extractive one): --llm-url URL --model M\n"
    "  [--api openai|anthropic] [--api-key-env VAR] [--llm-timeout SECONDS]\n"
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
    uint64_t window;
    uint32_t keep_tail;
    uint64_t summary_max_tokens;
    const char *store;
    const char *session;
    const char *svg;
    const char *llm_url;
    const char *model;
    const char *api_key_env;
    ck_http_api api;
    double llm_timeout;
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

static int parse_count(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end || *end || s[0] == '-' || end == s) return -1;
    *out = v;
    return 0;
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
            else if (strcmp(next, "cl100k") == 0) o->estimator = CK_EST_CL100K;
            else return -1;
        } else if (strcmp(a, "-o") == 0 && next) {
            o->out = argv[++i];
        } else if (strcmp(a, "--window") == 0 && next) {
            if (parse_count(argv[++i], &o->window) || !o->window) return -1;
        } else if (strcmp(a, "--keep-tail") == 0 && next) {
            uint64_t v;
            if (parse_count(argv[++i], &v) || v > 1000000) return -1;
            o->keep_tail = (uint32_t)v;
        } else if (strcmp(a, "--summary-max-tokens") == 0 && next) {
            if (parse_count(argv[++i], &o->summary_max_tokens)) return -1;
        } else if (strcmp(a, "--store") == 0 && next) {
            o->store = argv[++i];
        } else if (strcmp(a, "--session") == 0 && next) {
            o->session = argv[++i];
        } else if (strcmp(a, "--svg") == 0 && next) {
            o->svg = argv[++i];
        } else if (strcmp(a, "--llm-url") == 0 && next) {
            o->llm_url = argv[++i];
        } else if (strcmp(a, "--model") == 0 && next) {
            o->model = argv[++i];
        } else if (strcmp(a, "--api-key-env") == 0 && next) {
            o->api_key_env = argv[++i];
        } else if (strcmp(a, "--api") == 0 && next) {
            i++;
            if (strcmp(next, "openai") == 0) o->api = CK_HTTP_OPENAI;
            else if (strcmp(next, "anthropic") == 0) o->api = CK_HTTP_ANTHROPIC;
            else return -1;
        } else if (strcmp(a, "--llm-timeout") == 0 && next) {
            char *end = NULL;
            o->llm_timeout = strtod(argv[++i], &end);
            if (!end || *end || !(o->llm_timeout > 0)) return -1;
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
           (unsigned long long)total, ck_estimator_name(o->estimator),
           (unsigned long long)chars4);
    return 0;
}


static ck_compactor *new_compactor(const options *o, ck_error *err) {
    ck_compactor_options opts;
    memset(&opts, 0, sizeof opts);
    opts.context_window = o->window;
    opts.keep_tail = o->keep_tail;
    opts.summary_max_tokens = o->summary_max_tokens;
    opts.estimator = o->estimator;
    opts.format = o->format;
    opts.session_id = o->session;
    opts.store_dir = o->store;
    return ck_compactor_new(&opts, err);
}

/* The HTTP summarizer the options ask for, or NULL for the extractive one. Sets *failed when
 * the options are wrong. */
static ck_http_summarizer *new_summarizer(const options *o, int *failed) {
    *failed = 0;
    if (!o->llm_url && !o->model) return NULL;
    ck_http_options hopts;
    memset(&hopts, 0, sizeof hopts);
    hopts.base_url = o->llm_url;
    hopts.model = o->model;
    hopts.api = o->api;
    hopts.api_key_env = o->api_key_env;
    hopts.timeout = o->llm_timeout;
    ck_error err;
    ck_http_summarizer *s = ck_http_summarizer_new(&hopts, &err);
    if (!s) {
        print_error("summarizer", &err);
        *failed = 1;
    }
    return s;
}

static int cmd_compact(const options *o, ck_history *h) {
    ck_error err;
    if (!o->window) {
        fprintf(stderr, "ctxkeel: compact needs --window N\n");
        return 2;
    }
    int bad = 0;
    ck_http_summarizer *llm = new_summarizer(o, &bad);
    if (bad) return 2;
    ck_compactor *k = new_compactor(o, &err);
    ck_compaction *c = NULL;
    ck_format format;
    if (!k || ck_history_format(h, o->format, &format, &err) ||
        ck_compactor_compact(k, h, 0, llm ? ck_http_summarize_fn : NULL, llm, &c, &err)) {
        print_error(o->file, &err);
        ck_compactor_free(k);
        ck_http_summarizer_free(llm);
        return 2;
    }
    char *json = ck_json_write(h, ck_compaction_view(c), format, o->pretty, &err);
    int rc = 0;
    FILE *out = o->out ? fopen(o->out, "wb") : stdout;
    if (!json || !out) {
        if (!json) print_error(o->file, &err);
        else fprintf(stderr, "ctxkeel: %s: %s\n", o->out, strerror(errno));
        rc = 2;
    } else {
        int failed = fputs(json, out) < 0 || fputc('\n', out) == EOF;
        if (o->out) failed |= fclose(out) != 0;
        if (failed) {
            fprintf(stderr, "ctxkeel: cannot write the output\n");
            rc = 2;
        }
    }
    size_t len = 0;
    const char *record = ck_compaction_record(c, &len);
    fprintf(stderr, "%s: tier %s, %llu -> %llu tokens, %zu -> %zu messages\n", o->file,
            ck_tier_name(ck_compaction_tier(c)),
            (unsigned long long)ck_compaction_tokens_before(c),
            (unsigned long long)ck_compaction_tokens_after(c), ck_history_count(h),
            ck_view_count(ck_compaction_view(c)));
    if (record) fprintf(stderr, "%.*s\n", (int)len, record);
    ck_free(json);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_http_summarizer_free(llm);
    return rc;
}

/* The first `n` messages of `h` as a history of their own (strings borrowed from `h`). */
static ck_history *prefix(const ck_history *h, size_t n) {
    ck_history *p = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    for (size_t i = 0; p && i < n; i++) {
        ck_role role;
        uint32_t flags;
        const ck_part *parts;
        size_t n_parts;
        ck_history_get(h, i, &role, &flags, &parts, &n_parts);
        int rc = ck_history_add_message(p, role, flags);
        for (size_t k = 0; k < n_parts && !rc; k++) rc = ck_history_add_part(p, &parts[k], NULL);
        if (rc) {
            ck_history_free(p);
            p = NULL;
        }
    }
    return p;
}

typedef struct replay_point {
    size_t msgs;
    double before, after;
    ck_tier tier;
} replay_point;

static void write_svg(const char *path, const replay_point *pts, size_t n, const options *o) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "ctxkeel: %s: %s\n", path, strerror(errno));
        return;
    }
    const double w = 900, hgt = 360, left = 50, right = 20, top = 30, bottom = 40;
    const double pw = w - left - right, ph = hgt - top - bottom, ymax = 1.1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", w, hgt);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    static const struct { double lo, hi; const char *color, *name; } bands[] = {
        {0.60, 0.70, "#fff3c4", "warn"},
        {0.70, 0.80, "#ffe0b2", "soft"},
        {0.80, 0.95, "#ffccbc", "full"},
        {0.95, 1.10, "#ef9a9a", "emergency"},
    };
    for (size_t b = 0; b < 4; b++) {
        double y1 = top + ph * (1 - bands[b].hi / ymax), y2 = top + ph * (1 - bands[b].lo / ymax);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                left, y1, pw, y2 - y1, bands[b].color);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">%s</text>\n", left + pw - 60,
                y2 - 3, bands[b].name);
    }
    for (int t = 0; t <= 10; t += 2) {
        double y = top + ph * (1 - t / 10.0 / ymax);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"5\" y=\"%.1f\">%d%%</text>\n", left, left + pw, y, y, y + 4, t * 10);
    }
    const char *series[2] = {"#1565c0", "#2e7d32"};
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"",
                series[s], s ? "2" : "1");
        for (size_t i = 0; i < n; i++) {
            double r = s ? pts[i].after : pts[i].before;
            if (r > ymax) r = ymax;
            double x = left + (n > 1 ? pw * (double)i / (double)(n - 1) : 0);
            fprintf(f, "%.1f,%.1f ", x, top + ph * (1 - r / ymax));
        }
        fprintf(f, "\"/>\n");
    }
    fprintf(f, "<text x=\"%.1f\" y=\"18\" font-size=\"13\">%s: context use per model call "
               "(window %llu tokens)</text>\n", left, o->file, (unsigned long long)o->window);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">before compaction</text>"
               "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">view sent to the model</text>\n",
            left, hgt - 12, series[0], left + 150, hgt - 12, series[1]);
    fprintf(f, "</svg>\n");
    fclose(f);
}

/* Feeds the transcript to the compactor as an agent loop would: before every assistant
 * message (a model call), the history so far. */
static int cmd_replay(const options *o, ck_history *h) {
    ck_error err;
    if (!o->window) {
        fprintf(stderr, "ctxkeel: replay needs --window N\n");
        return 2;
    }
    int bad = 0;
    ck_http_summarizer *llm = new_summarizer(o, &bad);
    if (bad) return 2;
    ck_compactor *k = new_compactor(o, &err);
    if (!k) {
        print_error(o->file, &err);
        ck_http_summarizer_free(llm);
        return 2;
    }
    size_t n = ck_history_count(h), calls = 0, per_tier[5] = {0}, records = 0;
    replay_point *pts = calloc(n ? n : 1, sizeof *pts);
    double peak = 0;
    int rc = 0;
    printf("%s: replay with a window of %llu tokens (session %s)\n", o->file,
           (unsigned long long)o->window, ck_compactor_session_id(k));
    printf("%5s %5s %8s %8s %6s %6s  %-9s %s\n", "call", "msgs", "before", "after", "ratio",
           "view", "tier", "action");
    for (size_t i = 1; i <= n && pts; i++) {
        ck_role role;
        ck_history_get(h, i < n ? i : n - 1, &role, NULL, NULL, NULL);
        if (i < n && role != CK_ROLE_ASSISTANT) continue;
        ck_history *p = prefix(h, i);
        ck_compaction *c = NULL;
        if (!p || ck_compactor_compact(k, p, 0, llm ? ck_http_summarize_fn : NULL, llm, &c,
                                       &err)) {
            print_error(o->file, &err);
            ck_history_free(p);
            rc = 2;
            break;
        }
        ck_tier tier = ck_compaction_tier(c);
        uint64_t before = ck_compaction_tokens_before(c), after = ck_compaction_tokens_after(c);
        size_t len = 0;
        const char *record = ck_compaction_record(c, &len);
        char action[160] = "-";
        if (record) {
            records++;
            unsigned long summarized = 0, offloaded = 0;
            const char *s = strstr(record, "\"summarized\":");
            if (s) summarized = strtoul(s + 13, NULL, 10);
            for (const char *q = strstr(record, "\"offloaded\":["); q && *q && *q != ']'; q++)
                if (strncmp(q, "\"tool_call_id\"", 14) == 0) offloaded++;
            const char *fb = strstr(record, "\"fallback\":\"");
            snprintf(action, sizeof action, "%s%lu messages folded, %lu outputs offloaded%s",
                     summarized ? "" : "", summarized, offloaded,
                     fb ? " (fallback)" : "");
        }
        double rb = (double)before / (double)o->window, ra = (double)after / (double)o->window;
        printf("%5zu %5zu %8llu %8llu %6.2f %6.2f  %-9s %s\n", ++calls, i,
               (unsigned long long)before, (unsigned long long)after, rb, ra,
               ck_tier_name(tier), action);
        pts[calls - 1].msgs = i;
        pts[calls - 1].before = rb;
        pts[calls - 1].after = ra;
        pts[calls - 1].tier = tier;
        per_tier[tier]++;
        if (ra > peak) peak = ra;
        ck_compaction_free(c);
        ck_history_free(p);
    }
    if (!rc) {
        printf("%s: %zu model calls; tiers: none %zu, warn %zu, soft %zu, full %zu, emergency "
               "%zu; %zu compactions recorded; peak view %.0f%% of the window\n",
               o->file, calls, per_tier[0], per_tier[1], per_tier[2], per_tier[3], per_tier[4],
               records, peak * 100);
        if (o->svg) {
            write_svg(o->svg, pts, calls, o);
            printf("%s: chart written to %s\n", o->file, o->svg);
        }
    }
    free(pts);
    ck_compactor_free(k);
    ck_http_summarizer_free(llm);
    return rc;
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
    else if (strcmp(o.command, "compact") == 0) run = cmd_compact;
    else if (strcmp(o.command, "replay") == 0) run = cmd_replay;
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
