/* The ctxkeel command: every subcommand run as a user runs it (a process, files, exit status),
 * and `make demo`'s promise that its replay goes through every tier. The Makefile passes the
 * binary as CK_CLI and the demo's transcript and window as CK_DEMO_FILE and CK_DEMO_WINDOW. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static const char *cli(void) {
    const char *path = getenv("CK_CLI");
    return path && *path ? path : "build-c/ctxkeel";
}

static char dir[64];      /* this run's temporary folder */
static char out_path[96]; /* what the last command wrote to stdout */
static char err_path[96]; /* ... and to stderr */

/* Runs the command with `args` (NULL-terminated, without the program), standard input from
 * `in` (or /dev/null) and its output into out_path and err_path. Returns its exit status, or
 * 128 + the signal that ended it, or -1 when it could not be started. */
static int run(const char *in, const char *const *args) {
    const char *argv[32] = {cli()};
    size_t n = 1;
    while (args[n - 1] && n < 31) {
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd_in = open(in ? in : "/dev/null", O_RDONLY);
        int fd_out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fd_err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd_in < 0 || fd_out < 0 || fd_err < 0 || dup2(fd_in, 0) < 0 || dup2(fd_out, 1) < 0 ||
            dup2(fd_err, 2) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define RUN_CLI(in, ...) run((in), (const char *const[]){__VA_ARGS__, NULL})

/* The whole of a file, NUL-terminated (malloc'd; free it); "" when it cannot be read. */
static char *slurp(const char *path) {
    size_t len = 0;
    char *text = h_read_file(path, &len);
    if (!text) return strdup("");
    char *z = realloc(text, len + 1);
    if (!z) {
        free(text);
        return strdup("");
    }
    z[len] = '\0';
    return z;
}

static int contains(const char *path, const char *needle) {
    char *text = slurp(path);
    int yes = strstr(text, needle) != NULL;
    if (!yes) fprintf(stderr, "    %s does not contain \"%s\":\n%.2000s\n", path, needle, text);
    free(text);
    return yes;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void path_in(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", dir, name);
}

/* The transcript the demo replays, or NULL (with a note) when the corpus is not there. */
static const char *demo_file(void) {
    const char *file = getenv("CK_DEMO_FILE");
    if (file && access(file, R_OK) == 0) return file;
    fprintf(stderr, "note: no demo transcript (CK_DEMO_FILE); the corpus cases are skipped\n");
    return NULL;
}

/* The number of tokens and messages ck_json_read and the default estimator give `file`. */
static int file_figures(const char *file, size_t *messages, uint64_t *tokens) {
    size_t len = 0;
    char *text = h_read_file(file, &len);
    if (!text) return -1;
    ck_error err;
    ck_history *h = ck_json_read(text, len, &err);
    free(text);
    if (!h) return -1;
    *messages = ck_history_count(h);
    *tokens = ck_estimate_history(h, CK_EST_DEFAULT);
    ck_history_free(h);
    return 0;
}

TEST(usage_and_version) {
    char want[64];
    snprintf(want, sizeof want, "ctxkeel %s\n", ck_version());
    INT_EQ(RUN_CLI(NULL, "--version"), 0);
    char *out = slurp(out_path);
    STR_EQ(out, want);
    free(out);
    INT_EQ(run(NULL, (const char *const[]){NULL}), 2);
    OK(contains(err_path, "usage: ctxkeel check FILE"));
    INT_EQ(RUN_CLI(NULL, "frobnicate", "x.json"), 2);
    OK(contains(err_path, "usage:"));
    char file[128];
    path_in(file, sizeof file, "small.json");
    write_file(file, "[{\"role\":\"user\",\"content\":\"fix the parser\"}]");
    INT_EQ(RUN_CLI(NULL, "compact", file), 2);
    OK(contains(err_path, "compact needs --window N"));
    INT_EQ(RUN_CLI(NULL, "replay", file), 2);
    OK(contains(err_path, "replay needs --window N"));
    INT_EQ(RUN_CLI(NULL, "replay", file, "--window", "-5"), 2);
    INT_EQ(RUN_CLI(NULL, "check", file, "--format", "klingon"), 2);
}

TEST(check_and_repair) {
    char broken[128], fixed[128];
    path_in(broken, sizeof broken, "broken.json");
    path_in(fixed, sizeof fixed, "fixed.json");
    /* A call without its result, then a result whose call is not there. */
    write_file(broken,
               "[{\"role\":\"user\",\"content\":\"fix it\"},"
               "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
               "\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]},"
               "{\"role\":\"user\",\"content\":\"and?\"},"
               "{\"role\":\"tool\",\"tool_call_id\":\"call_9\",\"content\":\"stray\"}]");
    INT_EQ(RUN_CLI(NULL, "check", broken), 1);
    OK(contains(out_path, "4 messages, 2 violations"));
    OK(contains(out_path, "call_1"));
    OK(contains(out_path, "call_9"));
    INT_EQ(RUN_CLI(NULL, "repair", broken, "-o", fixed), 0);
    OK(contains(err_path, "4 messages in"));
    INT_EQ(RUN_CLI(NULL, "check", fixed), 0);
    OK(contains(out_path, "0 violations"));
    OK(contains(fixed, "result unavailable: context was compacted"));
    char *repaired = slurp(fixed);
    OK(strstr(repaired, "call_9") == NULL); /* the stray result is dropped */
    free(repaired);
    /* Standard input, and the repaired list written to standard output. */
    INT_EQ(RUN_CLI(broken, "repair", "-"), 0);
    OK(contains(out_path, "\"tool_call_id\":\"call_1\""));
}

/* Every subcommand takes --format gemini; auto detects it; a Gemini call without an id gets
 * a named stub without one, and the repaired list reads back clean. */
TEST(gemini_through_every_subcommand) {
    char turns[128], fixed[128], store[128];
    path_in(turns, sizeof turns, "gemini.json");
    path_in(fixed, sizeof fixed, "gemini-fixed.json");
    path_in(store, sizeof store, "gemini-store");
    write_file(turns,
               "[{\"role\":\"user\",\"parts\":[{\"text\":\"fix it\"}]},"
               "{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"bash\","
               "\"args\":{\"cmd\":\"make\"}}}]},"
               "{\"role\":\"user\",\"parts\":[{\"text\":\"and?\"}]}]");
    INT_EQ(RUN_CLI(NULL, "check", turns), 1);
    OK(contains(out_path, "messages[1] part 0: missing_result (tool call id \"bash#0@1\")"));
    INT_EQ(RUN_CLI(NULL, "check", turns, "--format", "gemini"), 1);
    INT_EQ(RUN_CLI(NULL, "repair", turns, "--format", "gemini", "-o", fixed), 0);
    OK(contains(fixed, "{\"functionResponse\":{\"name\":\"bash\",\"response\":{\"error\":"
                       "\"result unavailable: context was compacted\"}}},{\"text\":\"and?\"}"));
    INT_EQ(RUN_CLI(NULL, "check", fixed, "--format", "gemini"), 0);
    INT_EQ(RUN_CLI(NULL, "tokens", fixed, "--format", "gemini"), 0);
    OK(contains(out_path, "3 messages"));
    INT_EQ(RUN_CLI(NULL, "compact", fixed, "--format", "gemini", "--window", "100000", "--store",
                   store, "-o", turns),
           0);
    OK(contains(turns, "\"role\":\"model\",\"parts\":[{\"functionCall\""));
    INT_EQ(RUN_CLI(NULL, "replay", fixed, "--format", "gemini", "--window", "100000", "--store",
                   store),
           0);
}

/* Every subcommand reads the Responses dialect when told (and a stub output comes back in
 * its shape), and refuses an item of another dialect among its items. */
TEST(responses_through_every_subcommand) {
    char items[128], fixed[128], view[128], store[128];
    path_in(items, sizeof items, "items.json");
    path_in(fixed, sizeof fixed, "items-fixed.json");
    path_in(view, sizeof view, "items-view.json");
    path_in(store, sizeof store, "items-store");
    write_file(items,
               "[{\"role\":\"user\",\"content\":\"fix it\"},"
               "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
               "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\","
               "\"name\":\"bash\",\"arguments\":\"{}\"},"
               "{\"type\":\"message\",\"role\":\"user\",\"content\":\"and?\"}]");
    INT_EQ(RUN_CLI(NULL, "check", items, "--format", "responses"), 1);
    OK(contains(out_path, "messages[2] part 0: missing_result (tool call id \"call_1\")"));
    INT_EQ(RUN_CLI(NULL, "repair", items, "--format", "responses", "-o", fixed), 0);
    OK(contains(fixed, "{\"type\":\"function_call_output\",\"call_id\":\"call_1\","
                       "\"output\":\"result unavailable: context was compacted\"}"));
    INT_EQ(RUN_CLI(NULL, "check", fixed, "--format", "responses"), 0);
    INT_EQ(RUN_CLI(NULL, "tokens", fixed, "--format", "responses"), 0);
    OK(contains(out_path, "5 messages, "));
    INT_EQ(RUN_CLI(NULL, "compact", fixed, "--format", "responses", "--window", "100000", "-o",
                   view, "--store", store),
           0);
    INT_EQ(RUN_CLI(NULL, "check", view, "--format", "responses"), 0);
    INT_EQ(RUN_CLI(NULL, "replay", fixed, "--format", "responses", "--window", "100000",
                   "--store", store),
           0);
    write_file(items, "[{\"type\":\"message\",\"role\":\"user\",\"content\":\"a\"},"
                      "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"x\"}]");
    INT_EQ(RUN_CLI(NULL, "check", items, "--format", "responses"), 2);
    OK(contains(err_path, "messages[1] (openai, not responses)"));
}

TEST(bad_input_is_named) {
    char file[128];
    path_in(file, sizeof file, "bad.json");
    write_file(file, "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":");
    INT_EQ(RUN_CLI(NULL, "check", file), 2);
    OK(contains(err_path, "CK_ESYNTAX"));
    OK(contains(err_path, "(byte "));
    write_file(file, "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":7}]");
    INT_EQ(RUN_CLI(NULL, "tokens", file), 2);
    OK(contains(err_path, "messages[1].content"));
    OK(contains(err_path, "CK_ETYPE"));
    INT_EQ(RUN_CLI(NULL, "check", "/nonexistent/ctxkeel.json"), 2);
    OK(contains(err_path, "/nonexistent/ctxkeel.json"));
}

TEST(langchain_and_ai_sdk_through_every_subcommand) {
    char broken[128], fixed[128], view[128], store[128];
    path_in(broken, sizeof broken, "lc.json");
    path_in(fixed, sizeof fixed, "lc-fixed.json");
    path_in(view, sizeof view, "lc-view.json");
    path_in(store, sizeof store, "lc-store");
    /* LangChain dicts: an ai call without its tool message. */
    write_file(broken,
               "[{\"type\":\"human\",\"content\":\"fix it\"},"
               "{\"type\":\"ai\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\","
               "\"name\":\"bash\",\"args\":{\"cmd\":\"make\"},\"type\":\"tool_call\"}]},"
               "{\"type\":\"human\",\"content\":\"and?\"}]");
    INT_EQ(RUN_CLI(NULL, "check", broken, "--format", "langchain"), 1);
    OK(contains(out_path, "messages[1] part 1: missing_result (tool call id \"call_1\")"));
    INT_EQ(RUN_CLI(NULL, "repair", broken, "--format", "langchain", "-o", fixed), 0);
    OK(contains(fixed, "{\"type\":\"tool\",\"tool_call_id\":\"call_1\",\"name\":\"bash\","
                       "\"content\":\"result unavailable: context was compacted\"}"));
    INT_EQ(RUN_CLI(NULL, "check", fixed, "--format", "langchain"), 0);
    INT_EQ(RUN_CLI(NULL, "tokens", fixed, "--format", "langchain"), 0);
    OK(contains(out_path, "4 messages"));
    INT_EQ(RUN_CLI(NULL, "compact", fixed, "--format", "langchain", "--window", "100000", "-o",
                   view, "--store", store, "--session", "cli-lc"),
           0);
    OK(contains(view, "\"type\":\"human\""));
    INT_EQ(RUN_CLI(NULL, "replay", fixed, "--format", "langchain", "--window", "100000",
                   "--store", store, "--session", "cli-lc-replay"),
           0);
    /* The AI SDK's tool message after its calls, through check and repair. */
    write_file(broken,
               "[{\"role\":\"user\",\"content\":\"fix it\"},"
               "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool-call\","
               "\"toolCallId\":\"call_1\",\"toolName\":\"bash\",\"input\":{}}]}]");
    INT_EQ(RUN_CLI(NULL, "check", broken, "--format", "ai-sdk"), 1);
    OK(contains(out_path, "missing_result (tool call id \"call_1\")"));
    INT_EQ(RUN_CLI(NULL, "repair", broken, "--format", "ai_sdk", "-o", fixed), 0);
    OK(contains(fixed, "{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\","
                       "\"toolCallId\":\"call_1\",\"toolName\":\"bash\",\"output\":{\"type\":"
                       "\"text\",\"value\":\"result unavailable: context was compacted\"}}]}"));
    INT_EQ(RUN_CLI(NULL, "tokens", fixed, "--format", "ai-sdk"), 0);
    INT_EQ(RUN_CLI(NULL, "compact", fixed, "--format", "ai-sdk", "--window", "100000", "-o", view,
                   "--store", store, "--session", "cli-aisdk"),
           0);
    INT_EQ(RUN_CLI(NULL, "replay", fixed, "--format", "ai-sdk", "--window", "100000", "--store",
                   store, "--session", "cli-aisdk-replay"),
           0);
    /* Read as another dialect, a LangChain message is refused, naming its place. */
    write_file(broken, "[{\"type\":\"human\",\"content\":\"fix it\"}]");
    INT_EQ(RUN_CLI(NULL, "check", broken, "--format", "openai"), 2);
    OK(contains(err_path, "messages[0]"));
}

TEST(tokens_match_the_library) {
    const char *file = demo_file();
    if (!file) return;
    size_t messages = 0;
    uint64_t tokens = 0;
    OK(file_figures(file, &messages, &tokens) == 0);
    char want[256];
    snprintf(want, sizeof want, "%zu messages, %llu tokens (default)", messages,
             (unsigned long long)tokens);
    INT_EQ(RUN_CLI(NULL, "tokens", file), 0);
    OK(contains(out_path, want));
    INT_EQ(RUN_CLI(file, "tokens", "-", "--estimator", "chars4"), 0);
    OK(contains(out_path, "tokens (chars4)"));
}

TEST(compact_writes_a_valid_view_and_its_record) {
    const char *file = demo_file();
    if (!file) return;
    size_t messages = 0;
    uint64_t tokens = 0;
    OK(file_figures(file, &messages, &tokens) == 0);
    char window[32], view[128], store[128], log_dir[160];
    snprintf(window, sizeof window, "%llu", (unsigned long long)(tokens / 0.85));
    path_in(view, sizeof view, "view.json");
    path_in(store, sizeof store, "store");
    snprintf(log_dir, sizeof log_dir, "%s/compactions", store);
    INT_EQ(RUN_CLI(NULL, "compact", file, "--window", window, "-o", view, "--store", store,
                   "--session", "cli-test"),
           0);
    OK(contains(err_path, ": tier full, "));
    OK(contains(err_path, "\"tier\":\"full\""));
    OK(contains(err_path, "\"session_id\":\"cli-test\""));
    OK(contains(view, "[Context Compaction]"));
    INT_EQ(RUN_CLI(NULL, "check", view), 0);
    struct stat st;
    char log[200];
    snprintf(log, sizeof log, "%s/cli-test.jsonl", log_dir);
    OK(stat(log, &st) == 0 && (st.st_mode & 0777) == 0600);
    /* The view is smaller than the history and within the soft limit (70% of the window). */
    size_t view_messages = 0;
    uint64_t view_tokens = 0;
    OK(file_figures(view, &view_messages, &view_tokens) == 0);
    OK(view_messages < messages);
    OK(view_tokens <= (uint64_t)(0.7 * (double)(tokens / 0.85)));
}

/* `make demo` replays its transcript through every tier; a change to the compactor that makes
 * one of them vanish at the demo's window fails here, not silently in the demo. */
TEST(demo_replay_goes_through_every_tier) {
    const char *file = demo_file();
    const char *window = getenv("CK_DEMO_WINDOW");
    if (!file) return;
    OK(window != NULL);
    if (!window) return;
    char svg[128], store[128];
    path_in(svg, sizeof svg, "demo.svg");
    path_in(store, sizeof store, "demo-store");
    INT_EQ(RUN_CLI(NULL, "replay", file, "--window", window, "--svg", svg, "--store", store,
                   "--explain"),
           0);
    char *out = slurp(out_path);
    /* The demo stays within its own bound and says so (issue 12, item 7). */
    OK(strstr(out, "bound: no view above the window, none above 70% after a compaction "
                   "(compactions aim for 50%): held\n") != NULL);
    const char *line = strstr(out, " model calls; tiers: ");
    size_t calls = 0, counts[5] = {0};
    OK(line != NULL);
    if (line) {
        while (line > out && line[-1] != ' ') line--;
        OK(sscanf(line, "%zu model calls; tiers: none %zu, warn %zu, soft %zu, full %zu, "
                        "emergency %zu",
                  &calls, &counts[0], &counts[1], &counts[2], &counts[3], &counts[4]) == 6);
    }
    static const char *const tiers[5] = {"none", "warn", "soft", "full", "emergency"};
    for (int t = 0; t < 5; t++) {
        if (counts[t] == 0) fprintf(stderr, "    the demo never reached tier %s\n", tiers[t]);
        OK(counts[t] > 0);
    }
    INT_EQ(counts[0] + counts[1] + counts[2] + counts[3] + counts[4], calls);
    /* One line per model call, numbered 1..calls. */
    char last[32];
    snprintf(last, sizeof last, "\n%5zu ", calls);
    OK(calls > 0 && strstr(out, last) != NULL);
    /* --explain: the legend, the first checkpoint and the first placeholder in full, each
     * compaction marked, and the cost with and without ctxkeel summed from the rows. */
    OK(strstr(out, "  history  estimated tokens of the whole history") != NULL);
    OK(strstr(out, "---- the first checkpoint, call ") != NULL);
    OK(strstr(out, ck_checkpoint_marker()) != NULL);
    OK(strstr(out, "---- the first placeholder, call ") != NULL);
    OK(strstr(out, ">> compaction 1: ") != NULL);
    unsigned long long sent = 0, without = 0, want_sent = 0, want_without = 0;
    for (const char *p = strchr(out, '\n'); p; p = strchr(p + 1, '\n')) {
        size_t call, msgs;
        unsigned long long history, before, after;
        if (sscanf(p + 1, "%5zu %5zu %8llu %8llu %8llu ", &call, &msgs, &history, &before,
                   &after) == 5) {
            want_sent += after;
            want_without += history;
        }
    }
    const char *w = strstr(out, "\nwithout ctxkeel: "), *c = strstr(out, "\nwith ctxkeel: ");
    OK(w && sscanf(w, "\nwithout ctxkeel: %llu tokens sent", &without) == 1);
    OK(c && sscanf(c, "\nwith ctxkeel: %llu tokens sent", &sent) == 1);
    INT_EQ(sent, want_sent);
    INT_EQ(without, want_without);
    OK(sent < without);
    free(out);
    OK(contains(svg, "<svg xmlns="));
    OK(contains(svg, "</svg>"));
}

/* --help (anywhere on the line) explains every subcommand and every column they print. */
TEST(help_explains_the_columns) {
    static const char *const wanted[] = {
        "usage: ctxkeel check FILE", "replay FILE --window N", "--svg OUT", "--explain",
        "  call ", "  msgs ", "  history ", "  before ", "  after ", "  ratio ", "  view ",
        "  tier ", "  action ", "messages in, M out", "chars4 C", "tier T, B -> A tokens",
        "Exit status: 0 success, 1 violations found (check), 2 bad usage or input."};
    const char *const forms[3][4] = {{"--help", NULL}, {"-h", NULL},
                                     {"replay", "x.json", "--help", NULL}};
    for (int f = 0; f < 3; f++) {
        INT_EQ(run(NULL, forms[f]), 0);
        for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
            OK(contains(out_path, wanted[i]));
        for (int k = 0; k <= CK_PAIR_RESULT_ORDER; k++)
            OK(contains(out_path, ck_pair_issue_name((ck_pair_issue)k)));
        char *err = slurp(err_path);
        STR_EQ(err, "");
        free(err);
    }
}

static void cleanup(void) {
    if (!dir[0]) return;
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", dir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
}

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/ck_cli_XXXXXX");
    if (!mkdtemp(dir)) {
        dir[0] = '\0';
        return;
    }
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    OK(access(cli(), X_OK) == 0);
}

HARNESS_MAIN(setup(); RUN(usage_and_version) RUN(help_explains_the_columns)
                 RUN(check_and_repair) RUN(gemini_through_every_subcommand)
                 RUN(responses_through_every_subcommand) RUN(bad_input_is_named)
                 RUN(langchain_and_ai_sdk_through_every_subcommand)
                 RUN(tokens_match_the_library) RUN(compact_writes_a_valid_view_and_its_record)
                     RUN(demo_replay_goes_through_every_tier) cleanup();)
