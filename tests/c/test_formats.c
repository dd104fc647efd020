/* The shared format cases (tests/data/formats/README.md), run through the C API: every
 * case file of every dialect, read, checked, repaired and compacted, each output compared with
 * the JSON the case writes down and checked again against the dialect's pairing rules. The
 * Python and Node suites run the same files through their bindings. */
#include <dirent.h>
#include <stdlib.h>

#include "util.h"

#include "../../csrc/src/idmap.h"
#include "../../csrc/src/internal.h"
#include "../../csrc/src/json.h"

/* Whether every part's id number (ck_history) is that of its id: 0 exactly for no id, the
 * same number exactly for the same bytes, below n_ids. Quadratic: for small histories. */
static int ids_numbered(const ck_history *h) {
    for (size_t g = 0; g < h->n_parts; g++) {
        const ck_part *p = &h->parts[g];
        if ((h->id_num[g] == 0) != (p->id_len == 0) || h->id_num[g] >= (h->n_ids ? h->n_ids : 1)) {
            OK(0);
            return 0;
        }
        for (size_t q = 0; q < g; q++) {
            const ck_part *o = &h->parts[q];
            int same = o->id_len == p->id_len && memcmp(o->id, p->id, p->id_len) == 0;
            if (same != (h->id_num[q] == h->id_num[g])) {
                OK(0);
                return 0;
            }
        }
    }
    return 1;
}

/* A repaired history (the one a compaction works on when the pairing needed repairs) takes
 * its kept messages' hashes from the original: they are what hashing their bytes gives. */
TEST(a_repaired_history_keeps_the_hashes) {
    const char *json =
        "[{\"role\":\"system\",\"content\":\"sys\"},{\"role\":\"user\",\"content\":\"task\"},"
        "{\"role\":\"assistant\",\"content\":\"a\",\"tool_calls\":[{\"id\":\"c1\","
        "\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c9\",\"content\":\"orphan\"},"
        "{\"role\":\"user\",\"content\":\"go on\"}]";
    ck_error err;
    ck_history *h = ck_json_read(json, strlen(json), &err);
    OK(h != NULL);
    ck_view *v = NULL;
    ck_history *fixed = NULL;
    OK(h && ck_repair_pairs(h, CK_FORMAT_OPENAI, &v, &err) == CK_OK);
    OK(v && !ck_view_is_identity(v));
    OK(v && ck__history_from_view(v, h, &fixed) == CK_OK);
    for (size_t i = 0; fixed && i < fixed->n_msgs; i++) {
        uint64_t hash = fixed->msgs[i].hash, content = fixed->msgs[i].content;
        OK(ck__history_rehash(fixed, i) == CK_OK);
        OK(fixed->msgs[i].hash == hash && fixed->msgs[i].content == content);
    }
    if (fixed) OK(ids_numbered(fixed));
    ck_history_free(fixed);
    ck_view_free(v);
    ck_history_free(h);
}

/* Ids numbered across cuts and reads again: a history cut at message j and read on with
 * other ids (as a binding does when the host edited message j), again and again, until the
 * table is rebuilt and renumbered; the numbers always match the ids, and stay few. */
TEST(id_numbers_survive_cuts) {
    static char ids[64][16];
    for (int k = 0; k < 64; k++) snprintf(ids[k], sizeof ids[k], "call_%d", k % 24);
    ck_history *h = ck_history_new(0);
    OK(h != NULL);
    unsigned seed = 7;
    for (int round = 0; round < 400 && h; round++) {
        size_t n = ck_history_count(h);
        seed = seed * 1103515245u + 12345u;
        ck_history_truncate(h, n ? (seed >> 8) % (n + 1) : 0);
        for (int m = 0; m < 6; m++) {
            seed = seed * 1103515245u + 12345u;
            const char *id = ids[(seed >> 8) % 64];
            int call = (seed >> 20) & 1;
            OK(ck_history_add_message(h, call ? CK_ROLE_ASSISTANT : CK_ROLE_TOOL, 0) == CK_OK);
            ck_part p = {0};
            p.kind = call ? CK_PART_TOOL_CALL : CK_PART_TOOL_RESULT;
            p.id = id;
            p.id_len = strlen(id);
            p.text = "x";
            p.text_len = 1;
            OK(ck_history_add_part(h, &p, NULL) == CK_OK);
            if (m == 2) OK(ck_history_add_part(h, &(ck_part){.kind = CK_PART_TEXT}, NULL) == 0);
        }
        if (!ids_numbered(h)) {
            fprintf(stderr, "round %d: the id numbers do not match the ids\n", round);
            break;
        }
        /* 24 distinct ids: numbers given out are renumbered before they pass 2 x 24 + 1024
         * by more than a table's worth. */
        OK(h->n_ids <= 2 * 24 + 1024 + 64);
    }
    ck_history_clear(h);
    OK(h->n_ids == 0 && h->n_id_slots == 0);
    ck_history_free(h);
}


static const char *formats_dir(void) {
    const char *d = getenv("CK_FORMATS");
    return d && *d ? d : "tests/data/formats";
}

/* The compact JSON text of a value of the case document. Release with ck__free. */
static char *formats_text(const ck__jval *v) {
    ck__buf b;
    ck__buf_init(&b);
    ck__jwriter w;
    ck__jw_init(&w, &b, 0);
    ck__jw_value(&w, v);
    return ck__buf_take(&b, NULL);
}

/* Whether JSON text `got` is the same JSON as `want`; prints both when it is not. */
static int formats_same(const char *file, const char *what, const char *got, const ck__jval *want) {
    ck_error err;
    ck__jread_options o = {0, 0};
    ck__jdoc *d = got ? ck__jread(got, strlen(got), o, &err) : NULL;
    int same = d && ck__jequal(ck__jdoc_root(d), want) == 1;
    if (!same) {
        char *w = formats_text(want);
        fprintf(stderr, "%s: %s differs\n  want: %s\n  got:  %s\n", file, what, w ? w : "?",
                got ? got : "(nothing)");
        ck_free(w);
    }
    ck__jdoc_free(d);
    return same;
}

/* The pairing violations of a history as the case spells them. */
static char *formats_check(ck_history *h, ck_format f, ck_error *err) {
    ck_pair_violation *v = NULL;
    size_t n = 0;
    if (ck_check_pairs(h, f, &v, &n, err) != CK_OK) return NULL;
    ck__buf b;
    ck__buf_init(&b);
    ck__jwriter w;
    ck__jw_init(&w, &b, 0);
    ck__jw_begin_array(&w);
    for (size_t i = 0; i < n; i++) {
        ck__jw_begin_object(&w);
        ck__jw_keys(&w, "index");
        ck__jw_u64(&w, v[i].index);
        ck__jw_keys(&w, "part");
        ck__jw_u64(&w, v[i].part);
        ck__jw_keys(&w, "kind");
        ck__jw_strings(&w, ck_pair_issue_name(v[i].kind));
        ck__jw_keys(&w, "id");
        ck__jw_string(&w, v[i].id, v[i].id_len);
        ck__jw_end_object(&w);
    }
    ck__jw_end_array(&w);
    ck_free(v);
    return ck__buf_take(&b, NULL);
}

/* Output JSON text `json`, read again in dialect f, has no pairing violation. */
static int formats_clean(const char *file, const char *what, const char *json, ck_format f) {
    ck_error err;
    ck_history *h = json ? ck_json_read_as(json, strlen(json), f, &err) : NULL;
    size_t n = 1;
    ck_pair_violation *v = NULL;
    if (h && ck_check_pairs(h, f, &v, &n, &err) == CK_OK && n == 0) {
        ck_history_free(h);
        return 1;
    }
    fprintf(stderr, "%s: the %s breaks %s's pairing rules (%zu violations%s%s)\n", file, what,
            ck_format_name(f), h ? n : 0, h ? "" : ": it does not even read: ",
            h ? "" : (err.msg ? err.msg : ck_strerror(err.code)));
    ck_free(v);
    ck_history_free(h);
    return 0;
}

static int formats_format(const ck__jval *c, const char *key, ck_format *out) {
    size_t len;
    const char *name = ck__jstr(ck__jgets(c, key), &len);
    return name && ck_format_from_name(name, len, out) == CK_OK ? 0 : -1;
}

/* The case's options over the defaults; -1 for an option this runner does not know. */
static int formats_options(const char *file, const ck__jval *opts, ck_compactor_options *o) {
    memset(o, 0, sizeof *o);
    o->session_id = "case";
    o->store_dir = "st";
    for (size_t i = 0; opts && i < ck__jcount(opts); i++) {
        const ck__jmember *m = ck__jmember_at(opts, i);
        const ck__jval *v = &m->value;
        uint64_t u = 0;
        double d = 0;
        int is_u = ck__ju64(v, &u) == 1, is_d = ck__jdouble(v, &d) == 1;
#define U_OPT(name)                                                                           \
    if (m->key_len == strlen(#name) && memcmp(m->key, #name, m->key_len) == 0 && is_u) {                                                 \
        o->name = (__typeof__(o->name))u;                                                     \
        continue;                                                                             \
    }
#define D_OPT(name)                                                                           \
    if (m->key_len == strlen(#name) && memcmp(m->key, #name, m->key_len) == 0 && is_d) {                                                 \
        o->name = d;                                                                          \
        continue;                                                                             \
    }
        U_OPT(context_window)
        U_OPT(keep_tail)
        U_OPT(keep_tail_tokens)
        U_OPT(offload_threshold)
        U_OPT(tool_offload_threshold)
        U_OPT(summary_max_tokens)
        D_OPT(warn)
        D_OPT(soft)
        D_OPT(full)
        D_OPT(emergency)
        D_OPT(target)
#undef U_OPT
#undef D_OPT
        if (m->key_len == 9 && memcmp(m->key, "estimator", 9) == 0) {
            size_t len;
            const char *name = ck__jstr(v, &len);
            int found = 0;
            for (int e = 0; name && ck_estimator_name((ck_estimator)e); e++)
                if (strlen(ck_estimator_name((ck_estimator)e)) == len &&
                    memcmp(ck_estimator_name((ck_estimator)e), name, len) == 0) {
                    o->estimator = (ck_estimator)e;
                    found = 1;
                }
            if (found) continue;
        }
        fprintf(stderr, "%s: option %s is not known to the runner (or has the wrong type)\n",
                file, m->key);
        return -1;
    }
    return 0;
}

/* Runs `compact` of a case in a fresh empty folder (the store is "st" inside it). */
static char *formats_compact(const char *file, ck_history *h, const ck__jval *spec,
                             ck_error *err) {
    ck_compactor_options o;
    if (formats_options(file, ck__jgets(spec, "options"), &o)) return NULL;
    char cwd[PATH_MAX], tmp[] = "/tmp/ck-formats-XXXXXX";
    if (!getcwd(cwd, sizeof cwd) || !mkdtemp(tmp) || chdir(tmp) != 0) return NULL;
    char *json = NULL;
    ck_compactor *k = ck_compactor_new(&o, err);
    ck_compaction *c = NULL;
    if (k && ck_compactor_compact(k, h, 0, NULL, NULL, &c, err) == CK_OK)
        json = ck_json_write(h, ck_compaction_view(c), CK_FORMAT_AUTO, 0, err);
    ck_compaction_free(c);
    ck_compactor_free(k);
    if (chdir(cwd) != 0) fprintf(stderr, "cannot go back to %s\n", cwd);
    char rm[sizeof tmp + 16];
    snprintf(rm, sizeof rm, "rm -rf %s", tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return json;
}

static void formats_error_is(const char *file, const ck_error *err, const ck__jval *want) {
    size_t cl, wl;
    const char *code = ck__jstr(ck__jgets(want, "code"), &cl);
    const char *where = ck__jstr(ck__jgets(want, "where"), &wl);
    const char *name = ck_err_name(err->code);
    /* The case names the code without the CK_ prefix. */
    if (name && strncmp(name, "CK_", 3) == 0) name += 3;
    int ok = code && name && strlen(name) == cl && memcmp(name, code, cl) == 0;
    if (where) ok = ok && strlen(err->where) == wl && memcmp(err->where, where, wl) == 0;
    if (!ok)
        fprintf(stderr, "%s: error %s at \"%s\" (%s); the case wants %.*s at \"%.*s\"\n", file,
                name ? name : "?", err->where, err->msg ? err->msg : "", (int)cl,
                code ? code : "", (int)wl, where ? where : "");
    OK(ok);
}

static void formats_case(const char *path, const char *dialect) {
    size_t len = 0;
    char *text = h_read_file(path, &len);
    OK(text != NULL);
    if (!text) return;
    ck_error err;
    ck__jread_options ro = {0, 0};
    ck__jdoc *doc = ck__jread(text, len, ro, &err);
    OK(doc != NULL);
    const ck__jval *c = doc ? ck__jdoc_root(doc) : NULL;
    const ck__jval *input = c ? ck__jgets(c, "input") : NULL;
    ck_format f = CK_FORMAT_AUTO, detected = CK_FORMAT_AUTO;
    OK(input != NULL && formats_format(c, "format", &f) == 0);
    if (!input || formats_format(c, "format", &f)) {
        fprintf(stderr, "%s: a case needs \"format\" and \"input\"\n", path);
        ck__jdoc_free(doc);
        free(text);
        return;
    }
    char *in = formats_text(input);
    ck_history *h = ck_json_read_as(in, strlen(in), f, &err);
    const ck__jval *want_error = ck__jgets(c, "error");
    if (want_error) {
        OK(h == NULL);
        if (!h) formats_error_is(path, &err, want_error);
        goto done;
    }
    OK(h != NULL);
    if (!h) {
        fprintf(stderr, "%s: does not read: %s at %s\n", path, err.msg ? err.msg : "", err.where);
        goto done;
    }
    ck_format used = ck_history_dialect(h);
    OK(strcmp(ck_format_name(used), dialect) == 0);
    /* Pairing trusts the id numbers the history keeps per part, made ids (Gemini) included. */
    if (!ids_numbered(h)) fprintf(stderr, "%s: the id numbers do not match the ids\n", path);
    if (ck__jgets(c, "detected")) {
        OK(formats_format(c, "detected", &detected) == 0);
        ck_history *a = ck_json_read_as(in, strlen(in), CK_FORMAT_AUTO, &err);
        OK(a != NULL);
        if (a && ck_history_dialect(a) != detected)
            fprintf(stderr, "%s: auto detects %s\n", path, ck_format_name(ck_history_dialect(a)));
        if (a) INT_EQ(ck_history_dialect(a), detected);
        ck_history_free(a);
    }
    const ck__jval *check = ck__jgets(c, "check");
    if (check) {
        char *got = formats_check(h, used, &err);
        OK(formats_same(path, "check", got, check));
        ck_free(got);
    }
    /* Repair: the case's list, or the input itself when nothing is wrong. */
    const ck__jval *repair = ck__jgets(c, "repair");
    if (!repair && check && ck__jcount(check) == 0) repair = input;
    if (repair) {
        ck_view *v = NULL;
        char *got = NULL;
        if (ck_repair_pairs(h, used, &v, &err) == CK_OK)
            got = ck_json_write(h, v, used, 0, &err);
        OK(formats_same(path, "repair", got, repair));
        OK(formats_clean(path, "repair", got, used));
        ck_view_free(v);
        ck_free(got);
    }
    const ck__jval *compact = ck__jgets(c, "compact");
    if (compact) {
        char *got = formats_compact(path, h, compact, &err);
        const ck__jval *view = ck__jgets(compact, "view");
        OK(view != NULL);
        if (!got)
            fprintf(stderr, "%s: compact failed: %s at %s\n", path, err.msg ? err.msg : "",
                    err.where);
        if (view) OK(formats_same(path, "compact view", got, view));
        OK(formats_clean(path, "compact view", got, used));
        ck_free(got);
    }
done:
    ck_history_free(h);
    ck_free(in);
    ck__jdoc_free(doc);
    free(text);
}

static int formats_name_order(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in folder `dir` that end with `suffix` (or every entry but dot files), sorted. */
static size_t formats_list(const char *dir, const char *suffix, char ***out) {
    DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), sl = suffix ? strlen(suffix) : 0;
        if (e->d_name[0] == '.') continue;
        if (suffix && (l <= sl || strcmp(e->d_name + l - sl, suffix) != 0)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            names = realloc(names, cap * sizeof *names);
        }
        names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    if (n) qsort(names, n, sizeof *names, formats_name_order);
    *out = names;
    return n;
}

TEST(every_case_of_every_dialect) {
    char **dialects = NULL;
    size_t nd = formats_list(formats_dir(), NULL, &dialects), cases = 0;
    for (size_t i = 0; i < nd; i++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/%s", formats_dir(), dialects[i]);
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            free(dialects[i]);
            continue;
        }
        ck_format f;
        /* A folder is named for its dialect. */
        OK(ck_format_from_name(dialects[i], strlen(dialects[i]), &f) == CK_OK);
        char **files = NULL;
        size_t nf = formats_list(dir, ".json", &files);
        for (size_t j = 0; j < nf; j++) {
            char path[2 * PATH_MAX + 2];
            snprintf(path, sizeof path, "%s/%s", dir, files[j]);
            formats_case(path, dialects[i]);
            cases++;
            free(files[j]);
        }
        free(files);
        free(dialects[i]);
    }
    free(dialects);
    printf("test_formats: %zu cases\n", cases);
    /* A runner that finds nothing tests nothing. */
    OK(cases >= 2);
}

/* ---- ck_list_is_tools, over the reader of the core's own JSON values ---- */

/* The core's item(), failing with the status in *ctx at item 1 when that is not CK_OK (the
 * reader's own ctx is a history, which ck_list_is_tools never needs). */
static int tools_item(void *ctx, ck_value v, size_t i, ck_value *out) {
    const int *fail = ctx;
    if (*fail && i == 1) return *fail;
    return ck__json_reader(NULL).item(NULL, v, i, out);
}

/* ck_list_is_tools() of JSON text, with a reader whose item() fails with `fail` at item 1. */
static int tools_of(const char *json, int fail) {
    ck_error err;
    ck__jread_options o = {0, 0};
    ck__jdoc *d = ck__jread(json, strlen(json), o, &err);
    if (!d) {
        fprintf(stderr, "tools_of: bad test JSON %s\n", json);
        return -1000;
    }
    ck_host_reader r = ck__json_reader(NULL);
    r.ctx = &fail;
    r.item = tools_item;
    int got = ck_list_is_tools(&r, (ck_value){(void *)ck__jdoc_root(d), 0});
    ck__jdoc_free(d);
    return got;
}

TEST(tool_schemas_are_told_from_messages) {
    /* Tool schemas of the providers: Chat Completions, Anthropic, Responses, Gemini. */
    INT_EQ(tools_of("[{\"type\":\"function\",\"function\":{\"name\":\"read_file\","
                    "\"parameters\":{\"type\":\"object\"}}}]", 0), 1);
    INT_EQ(tools_of("[{\"name\":\"bash\",\"description\":\"Runs a command\","
                    "\"input_schema\":{\"type\":\"object\"}},{\"name\":\"grep\"}]", 0), 1);
    INT_EQ(tools_of("[{\"type\":\"function\",\"name\":\"bash\",\"parameters\":{}}]", 0), 1);
    INT_EQ(tools_of("[{\"functionDeclarations\":[{\"name\":\"bash\"}]}]", 0), 1);
    /* Messages of every dialect, alone or after a schema. */
    INT_EQ(tools_of("[{\"role\":\"user\",\"content\":\"hi\"}]", 0), 0);
    INT_EQ(tools_of("[{\"name\":\"bash\"},{\"role\":\"tool\",\"content\":\"x\"}]", 0), 0);
    INT_EQ(tools_of("[{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"bash\","
                    "\"arguments\":\"{}\"}]", 0), 0);
    INT_EQ(tools_of("[{\"type\":\"function_call_output\",\"call_id\":\"c1\","
                    "\"output\":\"ok\"}]", 0), 0);
    INT_EQ(tools_of("[{\"parts\":[{\"functionCall\":{\"name\":\"bash\"}}]}]", 0), 0);
    INT_EQ(tools_of("[{\"type\":\"human\",\"content\":\"hi\"}]", 0), 0);
    INT_EQ(tools_of("[{\"type\":\"ai\",\"data\":{\"content\":\"ok\"}}]", 0), 0);
    /* Not a list of objects, or nothing in it. */
    INT_EQ(tools_of("[]", 0), 0);
    INT_EQ(tools_of("{\"name\":\"bash\"}", 0), 0);
    INT_EQ(tools_of("[{\"name\":\"bash\"},1]", 0), 0);
    INT_EQ(tools_of("[\"bash\"]", 0), 0);
    /* A host's failure is passed back as it is; before it fails, none is asked. */
    INT_EQ(tools_of("[{\"name\":\"bash\"},{\"name\":\"grep\"}]", CK_ENOMEM), CK_ENOMEM);
    INT_EQ(tools_of("[{\"name\":\"bash\"}]", CK_ENOMEM), 1);
    /* Without the callbacks it needs, a reader has no tools to tell. */
    ck_host_reader none = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    INT_EQ(ck_list_is_tools(&none, (ck_value){NULL, 0}), 0);
    INT_EQ(ck_list_is_tools(NULL, (ck_value){NULL, 0}), 0);
}

HARNESS_MAIN(RUN(every_case_of_every_dialect) RUN(tool_schemas_are_told_from_messages)
             RUN(id_numbers_survive_cuts) RUN(a_repaired_history_keeps_the_hashes))
