/* cli.c - the ctxkeel command (ck_cli_main): check, repair, count, compact and replay a JSON
 * message list. The one core file that prints: the csrc/cli program, the Python console
 * script and the npm bin all run this function, so they share flags, output and exit codes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"
#include "./internal.h"

static const char CLI_USAGE[] =
    "usage: ctxkeel check FILE [--format F]\n"
    "       ctxkeel repair FILE [--format F] [-o OUT] [--pretty]\n"
    "       ctxkeel tokens FILE [--format F] [--estimator default|chars4|cl100k|o200k]\n"
    "       ctxkeel compact FILE --window N [-o OUT] [--pretty] [COMPACTOR OPTIONS]\n"
    "       ctxkeel replay FILE --window N [--svg OUT] [--explain] [COMPACTOR OPTIONS]\n"
    "compactor options: --store DIR (default .ctxkeel) or --store s3://BUCKET/PREFIX?region=R\n"
    "  [&endpoint=E] (credentials from AWS_ACCESS_KEY_ID...), --session ID,\n"
    "  --keep-tail N, --summary-max-tokens N, --estimator E, --format F,\n"
    "  --prompt-cache anthropic|openai, --cache-breakpoints, --min-gain N\n"
    "summarizer (default: the built-in extractive one): --llm-url URL --model M\n"
    "  [--api openai|anthropic] [--api-key-env VAR] [--llm-timeout SECONDS]\n"
    "       ctxkeel --version | --help\n"
    "FILE is a JSON message list (or an object with \"messages\"); - reads standard input.\n"
    "F, the dialect: auto (the default: told from the messages), openai, anthropic,\n"
    "  responses, gemini, ai-sdk, langchain. Every subcommand takes --format.\n"
    "Exit status: 0 success, 1 violations found (check), 2 bad usage or input.\n";

/* What every column and line means; `ctxkeel --help` prints it after the usage, and
 * `replay --explain` prints the replay part before its table. */
static const char CLI_HELP_CHECK[] =
    "\n"
    "check prints one line per tool-call pairing violation, in message order:\n"
    "  FILE: messages[I] part K: KIND (tool call id \"ID\")\n"
    "    I, K   the message and its part (0-based)\n"
    "    KIND   orphan_result (a result whose id matches no call), missing_result (a call\n"
    "           no result answers), not_adjacent (a result not right after its call's\n"
    "           message), duplicate_result, duplicate_call (an id used twice), empty_id,\n"
    "           misplaced (a call outside an assistant message, a result outside a tool or\n"
    "           user message), result_order (Anthropic: a tool_result after other content)\n"
    "  then FILE: N messages, M violations. Exit status 1 when M > 0.\n"
    "\n"
    "repair writes the repaired list as JSON (to -o OUT, or standard output) and says on\n"
    "standard error: FILE: N messages in, M out, E new or edited. Orphan and duplicate\n"
    "results are dropped, a stub result is added for a call without one, results are moved\n"
    "next to their calls; the output passes check.\n"
    "\n"
    "tokens prints FILE: N messages, T tokens (ESTIMATOR), chars4 C\n"
    "    T      the estimate of --estimator (default: fitted to o200k_base), message and\n"
    "           request overhead included\n"
    "    C      UTF-8 bytes / 4, rounded up, for comparison\n"
    "\n"
    "compact writes the view to send (JSON, to -o OUT or standard output) and says on\n"
    "standard error: FILE: tier T, B -> A tokens, M -> K messages, then the audit record\n"
    "(one JSON line) when the view changed. B and A are the estimates before and after.\n";

static const char CLI_HELP_REPLAY[] =
    "\n"
    "replay feeds FILE to a compactor as an agent loop would: before each assistant message\n"
    "(a model call) the history up to it, and once more after the last message. One line\n"
    "per model call:\n"
    "  call     the model call's number\n"
    "  msgs     messages of the history at that call\n"
    "  history  estimated tokens of the whole history: what would be sent without ctxkeel\n"
    "  before   tokens of the view before this call's compaction (after an earlier one:\n"
    "           pinned messages + the checkpoint + the messages since it)\n"
    "  after    tokens of the view sent to the model\n"
    "  ratio    before / window\n"
    "  view     after / window\n"
    "  tier     where ratio fell: none, warn (offload large tool outputs), soft (fold the\n"
    "           oldest part into the checkpoint), full (fold all but the tail), emergency\n"
    "           (fold without a model); thresholds 60/70/80/95% of the window by default\n"
    "  action   - when the view needed no change; else \">> compaction N:\" and what it\n"
    "           did: messages folded into the checkpoint, tool outputs offloaded to the\n"
    "           evidence store (a placeholder stays in the view)\n"
    "Then the calls per tier, and what the session cost without ctxkeel (the whole history\n"
    "sent on every call) against with it (the views sent, plus the summary requests).\n"
    "--svg OUT writes the chart; --explain prints this legend first, and the first\n"
    "checkpoint and the first placeholder in full where they appear.\n";
typedef struct cli_options {
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
    int explain;
    double cache_read, cache_write; /* --prompt-cache: the preset's prices */
    int cache_breakpoints;
    uint64_t min_gain;
} cli_options;

static char *cli_read_all(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = ck__malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            char *grown = cap > ((size_t)1 << 40) ? NULL : ck__realloc(buf, cap * 2);
            if (!grown) {
                ck__free(buf);
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
        ck__free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int cli_count(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end || *end || s[0] == '-' || end == s) return -1;
    *out = v;
    return 0;
}

static int cli_parse(int argc, char **argv, cli_options *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--format") == 0 && next) {
            i++;
            if (ck_format_from_name(next, strlen(next), &o->format) != CK_OK) return -1;
        } else if (strcmp(a, "--estimator") == 0 && next) {
            i++;
            if (ck_estimator_from_name(next, strlen(next), &o->estimator) != CK_OK) return -1;
        } else if (strcmp(a, "-o") == 0 && next) {
            o->out = argv[++i];
        } else if (strcmp(a, "--window") == 0 && next) {
            if (cli_count(argv[++i], &o->window) || !o->window) return -1;
        } else if (strcmp(a, "--keep-tail") == 0 && next) {
            uint64_t v;
            if (cli_count(argv[++i], &v) || v > 1000000) return -1;
            o->keep_tail = (uint32_t)v;
        } else if (strcmp(a, "--prompt-cache") == 0 && next) {
            ck_error err;
            if (ck_prompt_cache_preset(argv[++i], &o->cache_read, &o->cache_write, &err))
                return -1;
        } else if (strcmp(a, "--cache-breakpoints") == 0) {
            o->cache_breakpoints = 1;
        } else if (strcmp(a, "--min-gain") == 0 && next) {
            if (cli_count(argv[++i], &o->min_gain) || !o->min_gain) return -1;
        } else if (strcmp(a, "--summary-max-tokens") == 0 && next) {
            if (cli_count(argv[++i], &o->summary_max_tokens)) return -1;
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
        } else if (strcmp(a, "--explain") == 0) {
            o->explain = 1;
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

static void cli_error(const char *file, const ck_error *err) {
    fprintf(stderr, "ctxkeel: %s: %s", file, err->msg ? err->msg : ck_strerror(err->code));
    if (err->where[0]) fprintf(stderr, " at %s", err->where);
    if (err->code == CK_ESYNTAX) fprintf(stderr, " (byte %zu)", err->offset);
    fprintf(stderr, " [%s]\n", ck_err_name(err->code));
}

static int cli_check(const cli_options *o, ck_history *h) {
    ck_pair_violation *v = NULL;
    size_t n = 0;
    ck_error err;
    if (ck_check_pairs(h, o->format, &v, &n, &err)) {
        cli_error(o->file, &err);
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

static int cli_repair(const cli_options *o, ck_history *h) {
    ck_view *view = NULL;
    ck_error err;
    ck_format format;
    if (ck_history_format(h, o->format, &format, &err) ||
        ck_repair_pairs(h, format, &view, &err)) {
        cli_error(o->file, &err);
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
        cli_error(o->file, &err);
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

static int cli_tokens(const cli_options *o, ck_history *h) {
    uint64_t total = ck_estimate_history(h, o->estimator);
    uint64_t chars4 = ck_estimate_history(h, CK_EST_CHARS4);
    printf("%s: %zu messages, %llu tokens (%s), chars4 %llu\n", o->file, ck_history_count(h),
           (unsigned long long)total, ck_estimator_name(o->estimator),
           (unsigned long long)chars4);
    return 0;
}


static ck_compactor *cli_compactor(const cli_options *o, ck_error *err) {
    ck_compactor_options opts;
    memset(&opts, 0, sizeof opts);
    opts.context_window = o->window;
    opts.keep_tail = o->keep_tail;
    opts.summary_max_tokens = o->summary_max_tokens;
    opts.min_gain = o->min_gain;
    opts.cache_read = o->cache_read;
    opts.cache_write = o->cache_write;
    if (o->cache_breakpoints) opts.flags |= CK_OPT_CACHE_BREAKPOINTS;
    opts.estimator = o->estimator;
    opts.format = o->format;
    opts.session_id = o->session;
    /* An s3:// URL names the built-in S3 backend, anything else a folder. */
    if (o->store && strncmp(o->store, "s3://", 5) == 0) opts.store = o->store;
    else opts.store_dir = o->store;
    return ck_compactor_new(&opts, err);
}

/* The HTTP summarizer the options ask for, or NULL for the extractive one. Sets *failed when
 * the options are wrong. */
static ck_http_summarizer *cli_summarizer(const cli_options *o, int *failed) {
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
        cli_error("summarizer", &err);
        *failed = 1;
    }
    return s;
}

static int cli_compact(const cli_options *o, ck_history *h) {
    ck_error err;
    if (!o->window) {
        fprintf(stderr, "ctxkeel: compact needs --window N\n");
        return 2;
    }
    int bad = 0;
    ck_http_summarizer *llm = cli_summarizer(o, &bad);
    if (bad) return 2;
    ck_compactor *k = cli_compactor(o, &err);
    ck_compaction *c = NULL;
    ck_format format;
    if (!k || ck_history_format(h, o->format, &format, &err) ||
        ck_compactor_compact(k, h, 0, llm ? ck_http_summarize_fn : NULL, llm, &c, &err)) {
        cli_error(o->file, &err);
        ck_compactor_free(k);
        ck_http_summarizer_free(llm);
        return 2;
    }
    char *json = ck_json_write(h, ck_compaction_view(c), format, o->pretty, &err);
    int rc = 0;
    FILE *out = o->out ? fopen(o->out, "wb") : stdout;
    if (!json || !out) {
        if (!json) cli_error(o->file, &err);
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

/* Prints `text` in full between two rules that say what it is. */
static void cli_show(const char *what, size_t call, const char *text, size_t len) {
    printf("---- the %s, call %zu (%zu bytes), in full ----\n%.*s\n---- end of the %s ----\n",
           what, call, len, (int)len, text, what);
}

/* The bound of DESIGN section 2 over a replay: every view at most the window, and at most
 * soft x window after each compaction that folded or offloaded (a record that did neither
 * tells why a view stays above soft, as when a fold waits for the history to grow); the
 * target each compaction aims for. */
static void cli_bound(const ck_compactor *k, const ck_replay *r) {
    ck_compactor_options opt;
    ck_compactor_get_options(k, &opt);
    size_t over_window = 0, over_soft = 0, n = ck_replay_count(r);
    for (size_t i = 0; i < n; i++) {
        const ck_replay_row *row = ck_replay_get(r, i);
        if (row->ratio_after > 1.0) over_window++;
        if (row->compaction && (row->summarized || row->offloaded) &&
            row->tier >= CK_TIER_SOFT && row->ratio_after > opt.soft)
            over_soft++;
    }
    printf("bound: no view above the window, none above %.0f%% after a compaction "
           "(compactions aim for %.0f%%): %s",
           opt.soft * 100, opt.target * 100, over_window || over_soft ? "NOT held" : "held");
    if (over_window || over_soft)
        printf(" (%zu views above the window, %zu compactions left above %.0f%%: their records "
               "say why)",
               over_window, over_soft, opt.soft * 100);
    printf("\n");
}

static void cli_totals(const cli_options *o, const ck_replay *r, int extractive) {
    ck_replay_total t;
    ck_replay_totals(r, &t);
    printf("%s: %zu model calls; tiers: none %zu, warn %zu, soft %zu, full %zu, emergency "
           "%zu; %zu compactions recorded; peak view %.0f%% of the window\n",
           o->file, t.calls, t.per_tier[CK_TIER_NONE], t.per_tier[CK_TIER_WARN],
           t.per_tier[CK_TIER_SOFT], t.per_tier[CK_TIER_FULL], t.per_tier[CK_TIER_EMERGENCY],
           t.compactions, t.peak_ratio * 100);
    printf("without ctxkeel: %llu tokens sent over %zu calls, peak %.0f%% of the window",
           (unsigned long long)t.tokens_without, t.calls, t.peak_ratio_without * 100);
    if (t.over_window_without)
        printf("; %zu calls (the first: call %zu) over the window, which a provider refuses",
               t.over_window_without, t.first_over_without);
    printf("\nwith ctxkeel:    %llu tokens sent over %zu calls (%.0f%% of that), peak %.0f%% "
           "of the window; %zu summary requests (~%llu tokens)%s\n",
           (unsigned long long)t.tokens_sent, t.calls,
           t.tokens_without ? 100.0 * (double)t.tokens_sent / (double)t.tokens_without : 0.0,
           t.peak_ratio * 100, t.summary_calls, (unsigned long long)t.summary_tokens,
           extractive && t.summary_calls ? ", answered by the built-in extractive summarizer "
                                           "without a model"
                                         : "");
    printf("prompt cache:    %llu of those tokens (%.0f%%) were a prefix of the call before's "
           "view; the prefix changed at %zu of %zu calls\n",
           (unsigned long long)t.prefix_kept,
           t.tokens_sent ? 100.0 * (double)t.prefix_kept / (double)t.tokens_sent : 0.0,
           t.prefix_breaks, t.calls);
}

static int cli_write_file(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "ctxkeel: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int failed = fwrite(text, 1, len, f) != len;
    failed |= fclose(f) != 0;
    if (failed) fprintf(stderr, "ctxkeel: %s: cannot write the file\n", path);
    return failed ? -1 : 0;
}

static int cli_replay(const cli_options *o, ck_history *h) {
    ck_error err;
    if (!o->window) {
        fprintf(stderr, "ctxkeel: replay needs --window N\n");
        return 2;
    }
    int bad = 0;
    ck_http_summarizer *llm = cli_summarizer(o, &bad);
    if (bad) return 2;
    ck_compactor *k = cli_compactor(o, &err);
    ck_replay *r = NULL;
    if (!k || ck_replay_run(k, h, llm ? ck_http_summarize_fn : NULL, llm, &r, &err)) {
        cli_error(o->file, &err);
        ck_compactor_free(k);
        ck_http_summarizer_free(llm);
        return 2;
    }
    if (o->explain) fputs(CLI_HELP_REPLAY + 1, stdout);
    printf("%s: replay with a window of %llu tokens (session %s)\n", o->file,
           (unsigned long long)o->window, ck_compactor_session_id(k));
    printf("%5s %5s %8s %8s %8s %6s %6s  %-9s %s\n", "call", "msgs", "history", "before", "after",
           "ratio", "view", "tier", "action");
    int shown_checkpoint = 0, shown_placeholder = 0;
    for (size_t i = 0; i < ck_replay_count(r); i++) {
        const ck_replay_row *row = ck_replay_get(r, i);
        printf("%5zu %5zu %8llu %8llu %8llu %6.2f %6.2f  %-9s %s\n", row->call, row->messages,
               (unsigned long long)row->history_tokens, (unsigned long long)row->tokens_before,
               (unsigned long long)row->tokens_after, row->ratio_before, row->ratio_after,
               ck_tier_name(row->tier), row->action);
        if (o->explain && row->checkpoint && !shown_checkpoint++)
            cli_show("first checkpoint", row->call, row->checkpoint, row->checkpoint_len);
        if (o->explain && row->placeholder && !shown_placeholder++)
            cli_show("first placeholder", row->call, row->placeholder, row->placeholder_len);
    }
    int rc = 0;
    if (o->svg) {
        char *svg = NULL;
        size_t len = 0;
        if (ck_replay_svg(r, o->file, &svg, &len)) {
            fprintf(stderr, "ctxkeel: out of memory\n");
            rc = 2;
        } else if (cli_write_file(o->svg, svg, len)) {
            rc = 2;
        } else {
            printf("%s: chart written to %s\n", o->file, o->svg);
        }
        ck_free(svg);
    }
    cli_bound(k, r);
    cli_totals(o, r, llm == NULL); /* last: what the session cost, with and without */
    ck_replay_free(r);
    ck_compactor_free(k);
    ck_http_summarizer_free(llm);
    return rc;
}

static int cli_run(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(CLI_USAGE, stdout);
            fputs(CLI_HELP_CHECK, stdout);
            fputs(CLI_HELP_REPLAY, stdout);
            return 0;
        }
    }
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("ctxkeel %s\n", ck_version());
        return 0;
    }
    cli_options o;
    if (cli_parse(argc, argv, &o) != 0) {
        fputs(CLI_USAGE, stderr);
        return 2;
    }
    int (*run)(const cli_options *, ck_history *) = NULL;
    if (strcmp(o.command, "check") == 0) run = cli_check;
    else if (strcmp(o.command, "repair") == 0) run = cli_repair;
    else if (strcmp(o.command, "tokens") == 0) run = cli_tokens;
    else if (strcmp(o.command, "compact") == 0) run = cli_compact;
    else if (strcmp(o.command, "replay") == 0) run = cli_replay;
    if (!run) {
        fputs(CLI_USAGE, stderr);
        return 2;
    }
    size_t len = 0;
    errno = 0;
    char *text = cli_read_all(o.file, &len);
    if (!text) {
        fprintf(stderr, "ctxkeel: %s: %s\n", o.file, strerror(errno ? errno : EIO));
        return 2;
    }
    ck_error err;
    ck_history *h = ck_json_read_as(text, len, o.format, &err);
    if (!h) {
        cli_error(o.file, &err);
        ck__free(text);
        return 2;
    }
    int rc = run(&o, h);
    ck_history_free(h);
    ck__free(text);
    return rc;
}

int ck_cli_main(int argc, char **argv) {
    int rc = argc > 0 && argv ? cli_run(argc, argv) : 2;
    /* A host that calls this in its own process writes through its own buffers afterwards. */
    fflush(stdout);
    fflush(stderr);
    return rc;
}
