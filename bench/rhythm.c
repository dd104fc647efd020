/* The rhythm of compaction over real transcripts: each one replayed as an agent loop (a
 * compact() before every assistant message and once at the end) at windows of a fraction of
 * the session's tokens, with a summarizer that answers at once. Prints one tab-separated row
 * per transcript and window:
 *
 *   name fraction window calls compactions summary_calls peak_ratio over_bound quick forced
 *
 * where compactions are the calls at soft or above that made the view smaller, peak_ratio the
 * largest view returned as a fraction of the window, over_bound the compactions that left the
 * view above soft x window, quick the compactions that followed the previous one before the
 * history had grown by (soft - target) / 2 x window tokens (0.10: soft 0.70, target 0.50)
 * although no new message alone was that large, and forced those of the quick ones whose
 * previous compaction could not bring the view to the target (half the window): when the
 * pinned messages alone take more than that, the bound itself calls for them.
 *
 *   rhythm CORPUS_DIR STORE_DIR [FRACTION ...]      (default fractions: 0.20 0.35 0.50)
 *
 * followed by sent (the tokens of every view summed), prefix_kept (of them, a prefix of the view
 * before) and prefix_breaks (calls whose view changed a message of the one before). With
 * CK_RHYTHM_PROMPT_CACHE set to a preset's name ("anthropic", "openai") the compactors weigh
 * folds against those prices (the prompt_cache option). Without it, the program uses only the
 * C API that the first version had too, so that it measures the policy before and after a
 * change. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctxkeel.h"

static char *rhythm_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(*len + 1);
    if (buf && fread(buf, 1, *len, f) != *len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* The first n messages of h as a history of their own (strings borrowed from h). */
static ck_history *rhythm_prefix(const ck_history *h, size_t n) {
    ck_history *p = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    for (size_t m = 0; p && m < n; m++) {
        ck_role role;
        uint32_t flags;
        const ck_part *parts;
        size_t np;
        ck_history_get(h, m, &role, &flags, &parts, &np);
        ck_history_add_message(p, role, flags);
        for (size_t q = 0; q < np; q++) ck_history_add_part(p, &parts[q], NULL);
    }
    return p;
}

static int rhythm_reply(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    (void)req;
    (*(int *)ctx)++;
    static const char reply[] =
        "## User Intent\nFinish the task.\n## Execution Progress\nWork is under way.\n"
        "## Key Decisions\nN/A\n## Tried Solutions\nN/A\n## Next Steps\nContinue.\n";
    return ck_compaction_set_summary(c, reply, sizeof reply - 1);
}

static void rhythm_one(const char *name, const char *text, size_t len, double fraction,
                       const char *store) {
    ck_error err;
    ck_history *full = ck_json_read(text, len, &err);
    if (!full) {
        fprintf(stderr, "rhythm: %s: not a message list\n", name);
        exit(1);
    }
    uint64_t total = ck_estimate_history(full, CK_EST_DEFAULT);
    uint64_t window = (uint64_t)((double)total * fraction);
    if (window < 1000) window = 1000;
    char session[300];
    snprintf(session, sizeof session, "%s-%.2f", name, fraction);
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = window;
    o.store_dir = store;
    o.session_id = session;
    const char *preset = getenv("CK_RHYTHM_PROMPT_CACHE");
    if (preset && *preset &&
        ck_prompt_cache_preset(preset, &o.cache_read, &o.cache_write, &err) != CK_OK) {
        fprintf(stderr, "rhythm: CK_RHYTHM_PROMPT_CACHE: %s\n", err.msg);
        exit(2);
    }
    ck_compactor *k = ck_compactor_new(&o, &err);
    if (!k) {
        fprintf(stderr, "rhythm: %s: %s\n", name, err.msg ? err.msg : "no compactor");
        exit(1);
    }
    int calls = 0, compactions = 0, summaries = 0, over = 0, quick = 0, forced = 0, breaks = 0;
    uint64_t sent = 0, prefix = 0; /* tokens sent; of them, a prefix of the view before */
    int have_last = 0;
    int last_reached = 0;
    double peak = 0;
    uint64_t last_size = 0;
    size_t n = ck_history_count(full);
    for (size_t m = 1; m <= n; m++) {
        if (m < n) {
            ck_role role;
            uint32_t flags;
            const ck_part *parts;
            size_t np;
            ck_history_get(full, m, &role, &flags, &parts, &np);
            if (role != CK_ROLE_ASSISTANT) continue;
        }
        ck_history *h = rhythm_prefix(full, m);
        uint64_t size = ck_estimate_history(h, CK_EST_DEFAULT);
        uint64_t newest = ck_estimate_message(h, m - 1, CK_EST_DEFAULT);
        ck_compaction *c = NULL;
        if (ck_compactor_compact(k, h, 0, rhythm_reply, &summaries, &c, &err) == CK_OK) {
            calls++;
            uint64_t after = ck_compaction_tokens_after(c), kept, broken;
            ck_compaction_cache(c, &kept, &broken);
            sent += after;
            prefix += kept;
            breaks += broken > 0;
            double ratio = (double)after / (double)window;
            if (ratio > peak) peak = ratio;
            const char *rec = ck_compaction_record(c, NULL);
            int changed = rec && ck_compaction_tier(c) >= CK_TIER_SOFT &&
                          after < ck_compaction_tokens_before(c);
            if (changed) {
                uint64_t need = (uint64_t)(0.1 * (double)window);
                if (have_last && size - last_size < need && newest < need) {
                    quick++;
                    forced += !last_reached;
                }
                compactions++;
                last_size = size;
                have_last = 1;
                last_reached = after <= window / 2;
                if (ratio > 0.70 + 1e-9) over++;
            }
            ck_compaction_free(c);
        } else {
            fprintf(stderr, "rhythm: %s at %.2f, message %zu: %s %s\n", name, fraction, m,
                    ck_err_name(err.code), err.where);
        }
        ck_history_free(h);
    }
    printf("%s\t%.2f\t%llu\t%d\t%d\t%d\t%.3f\t%d\t%d\t%d\t%llu\t%llu\t%d\n", name, fraction,
           (unsigned long long)window, calls, compactions, summaries, peak, over, quick, forced,
           (unsigned long long)sent, (unsigned long long)prefix, breaks);
    ck_compactor_free(k);
    ck_history_free(full);
}

static int rhythm_name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: rhythm CORPUS_DIR STORE_DIR [FRACTION ...]\n");
        return 2;
    }
    double fractions[16] = {0.20, 0.35, 0.50};
    int nf = 3;
    if (argc > 3) {
        nf = 0;
        for (int i = 3; i < argc && nf < 16; i++) fractions[nf++] = atof(argv[i]);
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "rhythm: no corpus at %s\n", argv[1]);
        return 1;
    }
    char *names[64];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 64) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, rhythm_name_cmp);
    printf("name\tfraction\twindow\tcalls\tcompactions\tsummary_calls\tpeak_ratio\tover_bound\t"
           "quick\tforced\tsent\tprefix_kept\tprefix_breaks\n");
    for (int i = 0; i < nn; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
        size_t len = 0;
        char *text = rhythm_read(path, &len);
        if (!text) {
            fprintf(stderr, "rhythm: cannot read %s\n", path);
            return 1;
        }
        for (int f = 0; f < nf; f++) rhythm_one(names[i], text, len, fractions[f], argv[2]);
        free(text);
        free(names[i]);
    }
    return 0;
}
