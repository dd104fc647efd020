/* replay.c - a transcript fed to a compactor as an agent loop would feed it, one row per model
 * call, and the chart of those rows as SVG text. The CLI and both bindings call this file, so
 * the figures a user sees are the same everywhere. It uses the compactor only through the
 * public API, and reads the few figures it reports from the audit record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"
#include "./buf.h"
#include "./internal.h"

struct ck_replay {
    ck_replay_row *rows;
    size_t n, cap;
    uint64_t window;
    double bands[4]; /* warn, soft, full, emergency, as fractions of the window */
};

/* ---- the audit record: our own compact JSON, read for a few top-level fields ---- */

/* The byte after the JSON value at p, or NULL when the text ends first. */
static const char *replay_skip(const char *p, const char *end) {
    if (p >= end) return NULL;
    if (*p == '"') {
        for (p++; p < end; p++) {
            if (*p == '\\') p++;
            else if (*p == '"') return p + 1;
        }
        return NULL;
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; p < end; p++) {
            if (*p == '"') {
                p = replay_skip(p, end);
                if (!p) return NULL;
                p--;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if ((*p == '}' || *p == ']') && --depth == 0) {
                return p + 1;
            }
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']') p++;
    return p;
}

/* The value of key `key` in the object that starts at p, or NULL when it has none. */
static const char *replay_field(const char *p, const char *end, const char *key) {
    size_t klen = strlen(key);
    if (p >= end || *p != '{') return NULL;
    p++;
    while (p < end && *p == '"') {
        const char *k = p + 1, *after = replay_skip(p, end);
        if (!after || after >= end || *after != ':') return NULL;
        int match = (size_t)(after - 1 - k) == klen && memcmp(k, key, klen) == 0;
        if (match) return after + 1;
        p = replay_skip(after + 1, end);
        if (!p || p >= end || *p != ',') return NULL;
        p++;
    }
    return NULL;
}

/* The figures of one record that a row reports, and the raw id of the first offloaded output
 * (a pointer into the record, not unescaped). */
typedef struct replay_facts {
    size_t summarized, offloaded;
    int fallback;
    const char *first_id;
    size_t first_id_len;
} replay_facts;

static void replay_read_record(const char *rec, size_t len, replay_facts *f) {
    const char *end = rec + len, *v;
    memset(f, 0, sizeof *f);
    if ((v = replay_field(rec, end, "summarized")) != NULL)
        f->summarized = (size_t)strtoull(v, NULL, 10);
    v = replay_field(rec, end, "fallback");
    f->fallback = v && *v == '"';
    v = replay_field(rec, end, "offloaded");
    if (!v || *v != '[') return;
    for (v++; v < end && *v != ']';) {
        const char *item = v;
        v = replay_skip(v, end);
        if (!v) return;
        if (f->offloaded++ == 0) {
            const char *id = replay_field(item, v, "tool_call_id");
            const char *id_end = id && *id == '"' ? replay_skip(id, v) : NULL;
            if (id_end) {
                f->first_id = id + 1;
                f->first_id_len = (size_t)(id_end - 1 - f->first_id);
            }
        }
        if (v < end && *v == ',') v++;
    }
}

/* ---- what the view holds ---- */

/* The checkpoint message's text in `view`, or NULL. */
static const char *replay_checkpoint(const ck_view *view, size_t *len) {
    const char *marker = ck_checkpoint_marker();
    size_t mlen = strlen(marker);
    for (size_t i = 0; i < ck_view_count(view); i++) {
        ck_out_msg m;
        if (ck_view_get(view, i, &m) || m.op != CK_OP_NEW) continue;
        for (size_t k = 0; k < m.n_parts; k++) {
            const ck_part *p = &m.parts[k].part;
            if (p->kind == CK_PART_TEXT && p->text_len >= mlen &&
                memcmp(p->text, marker, mlen) == 0) {
                *len = p->text_len;
                return p->text;
            }
        }
    }
    return NULL;
}

/* The text that replaced the output of tool call `id` in `view`, or NULL. */
static const char *replay_placeholder(const ck_view *view, const char *id, size_t id_len,
                                      size_t *len) {
    for (size_t i = 0; id && i < ck_view_count(view); i++) {
        ck_out_msg m;
        if (ck_view_get(view, i, &m)) continue;
        for (size_t k = 0; k < m.n_parts; k++) {
            const ck_out_part *o = &m.parts[k];
            if (o->replaced && o->part.kind == CK_PART_TOOL_RESULT && o->part.id_len == id_len &&
                memcmp(o->part.id, id, id_len) == 0) {
                *len = o->part.text_len;
                return o->part.text;
            }
        }
    }
    return NULL;
}

/* ---- the loop ---- */

/* Between the compactor and the summarizer the caller gave (NULL: the extractive one): counts
 * the summary requests and their size. */
typedef struct replay_summarizer {
    ck_summarize_fn fn;
    void *ctx;
    ck_estimator est;
    size_t calls;
    uint64_t tokens;
} replay_summarizer;

static int replay_summarize(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    replay_summarizer *s = ctx;
    s->calls++;
    s->tokens += ck_estimate_text(req->system, req->system_len, s->est) +
                 ck_estimate_text(req->prompt, req->prompt_len, s->est);
    if (!s->fn) return ck_compaction_use_extractive(c);
    return s->fn(s->ctx, req, c);
}

/* Copies message i of `h` onto the end of `p` (its strings stay borrowed from h). */
static int replay_append(ck_history *p, const ck_history *h, size_t i) {
    ck_role role;
    uint32_t flags;
    const ck_part *parts;
    size_t n_parts;
    int rc = ck_history_get(h, i, &role, &flags, &parts, &n_parts);
    if (!rc) rc = ck_history_add_message(p, role, flags);
    for (size_t k = 0; k < n_parts && !rc; k++) rc = ck_history_add_part(p, &parts[k], NULL);
    return rc;
}

static char *replay_dup(const char *s, size_t len) { return s ? ck__strndup(s, len) : NULL; }

static void replay_row_dispose(ck_replay_row *row) {
    ck__free((char *)row->action);
    ck__free((char *)row->record);
    ck__free((char *)row->checkpoint);
    ck__free((char *)row->placeholder);
}

/* What a row's action column says. */
static char *replay_action(const ck_replay_row *row) {
    ck__buf b;
    ck__buf_init(&b);
    if (!row->compaction) {
        ck__buf_adds(&b, "-");
        return ck__buf_take(&b, NULL);
    }
    ck__buf_printf(&b, ">> compaction %zu:", row->compaction);
    const char *sep = " ";
    if (row->summarized) {
        ck__buf_printf(&b, " %zu message%s folded into the checkpoint", row->summarized,
                       row->summarized == 1 ? "" : "s");
        if (row->fallback)
            ck__buf_adds(&b, " (the summarizer failed; the extractive one wrote it)");
        sep = ", ";
    }
    if (row->offloaded) {
        ck__buf_printf(&b, "%s%zu output%s offloaded", sep, row->offloaded,
                       row->offloaded == 1 ? "" : "s");
        sep = ", ";
    }
    if (!row->summarized && !row->offloaded)
        ck__buf_printf(&b, "%snothing folded or offloaded (the record says why)", sep);
    return ck__buf_take(&b, NULL);
}

static int replay_push(ck_replay *r, const ck_replay_row *row) {
    if (ck__grow((void **)&r->rows, &r->cap, r->n + 1, sizeof *r->rows)) return CK_ENOMEM;
    r->rows[r->n++] = *row;
    return CK_OK;
}

/* Tokens of messages [from, to) of `h`, through the compactor's counter when it has one. */
static uint64_t replay_tokens(const ck_history *h, size_t from, size_t to,
                              const ck_compactor_options *o) {
    uint64_t t = 0;
    for (size_t j = from; j < to; j++) {
        uint64_t m = o->counter.count ? ck_count_message(h, j, &o->counter) : UINT64_MAX;
        t += m != UINT64_MAX ? m : ck_estimate_message(h, j, o->estimator);
    }
    return t;
}

int ck_replay_run(ck_compactor *compactor, const ck_history *history, ck_summarize_fn summarize,
                  void *ctx, ck_replay **out, ck_error *err) {
    ck__error_clear(err);
    if (!out) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    *out = NULL;
    if (!compactor || !history) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    ck_compactor_options o;
    ck_compactor_get_options(compactor, &o);
    ck_replay *r = ck__calloc(1, sizeof *r);
    ck_history *p = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    if (!r || !p) {
        ck__free(r);
        ck_history_free(p);
        return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    }
    /* The prefixes are in the dialect the history was read in (they are made part by part,
     * which alone tells only OpenAI from Anthropic). */
    p->dialect = history->dialect;
    r->window = o.context_window;
    r->bands[0] = o.warn;
    r->bands[1] = o.soft;
    r->bands[2] = o.full;
    r->bands[3] = o.emergency;
    replay_summarizer s = {summarize, ctx, o.estimator, 0, 0};
    size_t n = ck_history_count(history), compactions = 0, held = 0;
    uint64_t history_tokens = 0;
    const char *last_checkpoint = NULL;
    size_t last_checkpoint_len = 0;
    int rc = CK_OK;
    /* A model call comes before every assistant message, and one more after the transcript. */
    for (size_t i = 1; i <= n && !rc; i++) {
        ck_role role = CK_ROLE_OTHER;
        if (i < n) ck_history_get(history, i, &role, NULL, NULL, NULL);
        if (i < n && role != CK_ROLE_ASSISTANT) continue;
        for (; held < i && !rc; held++) rc = replay_append(p, history, held);
        if (rc) {
            ck__fail(err, rc, NULL, CK_NONE, NULL);
            break;
        }
        history_tokens += replay_tokens(history, r->n ? r->rows[r->n - 1].messages : 0, i, &o);
        ck_compaction *c = NULL;
        size_t calls_before = s.calls;
        uint64_t tokens_before_call = s.tokens;
        rc = ck_compactor_compact(compactor, p, 0, replay_summarize, &s, &c, err);
        if (rc) break;
        const ck_view *view = ck_compaction_view(c);
        ck_replay_row row;
        memset(&row, 0, sizeof row);
        row.call = r->n + 1;
        row.messages = i;
        row.view_messages = ck_view_count(view);
        row.history_tokens =
            o.estimator == CK_EST_CHARS4 && !o.counter.count
                ? ck_estimate_history(p, CK_EST_CHARS4)
                : history_tokens + CK_REQUEST_OVERHEAD;
        row.tokens_before = ck_compaction_tokens_before(c);
        row.tokens_after = ck_compaction_tokens_after(c);
        row.ratio_before = (double)row.tokens_before / (double)r->window;
        row.ratio_after = (double)row.tokens_after / (double)r->window;
        ck_compaction_cache(c, &row.prefix_kept, &row.prefix_broken);
        row.tier = ck_compaction_tier(c);
        row.summary_calls = s.calls - calls_before;
        row.summary_tokens = s.tokens - tokens_before_call;
        size_t rec_len = 0, cp_len = 0, ph_len = 0;
        const char *rec = ck_compaction_record(c, &rec_len);
        const char *cp = replay_checkpoint(view, &cp_len);
        const char *ph = NULL;
        int oom = 0;
        if (rec) {
            replay_facts f;
            replay_read_record(rec, rec_len, &f);
            row.compaction = ++compactions;
            row.summarized = f.summarized;
            row.offloaded = f.offloaded;
            row.fallback = f.fallback;
            ph = replay_placeholder(view, f.first_id, f.first_id_len, &ph_len);
            oom |= !(row.record = replay_dup(rec, rec_len));
            row.record_len = rec_len;
        }
        /* A checkpoint is shown on the call that wrote it, not on every call that resends it. */
        if (cp && !(last_checkpoint && cp_len == last_checkpoint_len &&
                    memcmp(cp, last_checkpoint, cp_len) == 0)) {
            oom |= !(row.checkpoint = replay_dup(cp, cp_len));
            row.checkpoint_len = cp_len;
            last_checkpoint = row.checkpoint;
            last_checkpoint_len = cp_len;
        }
        if (ph) {
            oom |= !(row.placeholder = replay_dup(ph, ph_len));
            row.placeholder_len = ph_len;
        }
        ck_compaction_free(c);
        oom |= !(row.action = replay_action(&row));
        if (oom || replay_push(r, &row)) {
            replay_row_dispose(&row);
            rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        }
    }
    ck_history_free(p);
    if (rc) {
        ck_replay_free(r);
        return rc;
    }
    *out = r;
    return CK_OK;
}

void ck_replay_free(ck_replay *self) {
    if (!self) return;
    for (size_t i = 0; i < self->n; i++) replay_row_dispose(&self->rows[i]);
    ck__free(self->rows);
    ck__free(self);
}

size_t ck_replay_count(const ck_replay *self) { return self ? self->n : 0; }

const ck_replay_row *ck_replay_get(const ck_replay *self, size_t i) {
    return self && i < self->n ? &self->rows[i] : NULL;
}

uint64_t ck_replay_window(const ck_replay *self) { return self ? self->window : 0; }

void ck_replay_totals(const ck_replay *self, ck_replay_total *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; self && i < self->n; i++) {
        const ck_replay_row *row = &self->rows[i];
        double ratio_history = (double)row->history_tokens / (double)self->window;
        out->calls++;
        out->per_tier[row->tier]++;
        out->compactions += row->compaction != 0;
        out->summary_calls += row->summary_calls;
        out->summary_tokens += row->summary_tokens;
        out->offloaded += row->offloaded;
        out->tokens_sent += row->tokens_after;
        out->tokens_without += row->history_tokens;
        out->prefix_kept += row->prefix_kept;
        out->prefix_breaks += row->prefix_broken > 0;
        out->over_window_without += row->history_tokens > self->window;
        if (row->ratio_after > out->peak_ratio) out->peak_ratio = row->ratio_after;
        if (ratio_history > out->peak_ratio_without) out->peak_ratio_without = ratio_history;
        if (!out->first_over_without && row->history_tokens > self->window)
            out->first_over_without = row->call;
    }
}

/* ---- the chart ---- */

/* Appends `s` with the five XML specials escaped. */
static void replay_xml(ck__buf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
            case '&': ck__buf_adds(b, "&amp;"); break;
            case '<': ck__buf_adds(b, "&lt;"); break;
            case '>': ck__buf_adds(b, "&gt;"); break;
            case '"': ck__buf_adds(b, "&quot;"); break;
            case '\'': ck__buf_adds(b, "&#39;"); break;
            default: ck__buf_addc(b, *s);
        }
    }
}

#define SVG_W 900.0
#define SVG_H 400.0
#define SVG_LEFT 64.0
#define SVG_RIGHT 110.0
#define SVG_TOP 34.0
#define SVG_BOTTOM 64.0

int ck_replay_svg(const ck_replay *self, const char *title, char **out, size_t *len) {
    if (!out) return CK_EINVAL;
    *out = NULL;
    if (!self) return CK_EINVAL;
    const double pw = SVG_W - SVG_LEFT - SVG_RIGHT, ph = SVG_H - SVG_TOP - SVG_BOTTOM;
    /* The axis reaches past the emergency threshold, and up to what the history alone would
     * take (clipped at twice the window, so that the compacted lines stay readable). */
    double ymax = self->bands[3] + 0.15;
    for (size_t i = 0; i < self->n; i++) {
        double r = (double)self->rows[i].history_tokens / (double)self->window;
        if (r > ymax) ymax = r;
    }
    int clipped = ymax > 2.0;
    if (clipped) ymax = 2.0;
    ymax = ceil(ymax * 10.0) / 10.0;
    size_t n = self->n;
#define X(i) (SVG_LEFT + (n > 1 ? pw * (double)(i) / (double)(n - 1) : pw / 2))
#define Y(r) (SVG_TOP + ph * (1.0 - ((r) > ymax ? ymax : (r)) / ymax))
    ck__buf b;
    ck__buf_init(&b);
    ck__buf_printf(&b,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                   "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n",
                   SVG_W, SVG_H, SVG_W, SVG_H);
    ck__buf_adds(&b, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    /* The tier bands up to the window, and what lies over it (a provider refuses that). */
    static const char *const band_names[5] = {"warn", "soft", "full", "emergency",
                                              "over the window"};
    static const char *const band_colors[5] = {"#fff6d5", "#ffe9c7", "#ffd8c7", "#f8c4c4",
                                               "#eeeeee"};
    for (int k = 0; k < 5; k++) {
        double lo = k < 4 ? self->bands[k] : 1.0, hi = k < 3 ? self->bands[k + 1] : 1.0;
        if (k == 4) hi = ymax;
        if (lo >= ymax || hi <= lo) continue;
        ck__buf_printf(&b,
                       "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" fill=\"#6d5200\" font-size=\"10\">%s",
                       SVG_LEFT, Y(hi), pw, Y(lo) - Y(hi), band_colors[k], SVG_LEFT + pw + 4,
                       (Y(lo) + Y(hi)) / 2 + 3, band_names[k]);
        if (k < 4) ck__buf_printf(&b, " %.0f%%", lo * 100);
        ck__buf_adds(&b, "</text>\n");
    }
    /* The y axis: ticks every 20% of the window, the window itself drawn solid. */
    for (int t = 0; t <= (int)(ymax * 10 + 0.5); t += 2) {
        double y = Y(t / 10.0);
        ck__buf_printf(&b,
                       "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n",
                       SVG_LEFT, SVG_LEFT + pw, y, y, t == 10 ? "#888" : "#e4e4e4",
                       SVG_LEFT - 4, y + 4, t * 10);
    }
    ck__buf_printf(&b,
                   "<text transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">"
                   "tokens sent, %% of the context window (%llu tokens)</text>\n",
                   SVG_TOP + ph / 2, (unsigned long long)self->window);
    /* The x axis: model calls, about ten ticks. */
    size_t step = n > 10 ? (n + 9) / 10 : 1;
    for (size_t i = 0; i < n; i += step)
        ck__buf_printf(&b,
                       "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%zu</text>\n",
                       X(i), X(i), SVG_TOP + ph, SVG_TOP + ph + 4, X(i), SVG_TOP + ph + 16,
                       self->rows[i].call);
    ck__buf_printf(&b,
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">model call (one before "
                   "each assistant message)</text>\n",
                   SVG_LEFT + pw / 2, SVG_TOP + ph + 32);
    /* A marker at each compaction: a dashed line, and its number at the top. */
    for (size_t i = 0; i < n; i++) {
        const ck_replay_row *row = &self->rows[i];
        if (!row->compaction) continue;
        ck__buf_printf(&b,
                       "<g><title>call %zu: %s, ", row->call, ck_tier_name(row->tier));
        replay_xml(&b, row->action);
        ck__buf_printf(&b,
                       "</title><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                       "stroke=\"#6a1b9a\" stroke-dasharray=\"3 3\"/>"
                       "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#6a1b9a\"/></g>\n",
                       X(i), X(i), SVG_TOP, SVG_TOP + ph, X(i), Y(row->ratio_after));
    }
    double legend_x = SVG_LEFT;
    static const char *const series_color[3] = {"#9e9e9e", "#1565c0", "#2e7d32"};
    static const char *const series_name[3] = {"without ctxkeel (the whole history)",
                                               "before compaction", "view sent to the model"};
    for (int s = 0; s < 3; s++) {
        ck__buf_printf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"",
                       series_color[s], s == 2 ? "2" : "1.2",
                       s == 0 ? " stroke-dasharray=\"5 3\"" : "");
        for (size_t i = 0; i < n; i++) {
            const ck_replay_row *row = &self->rows[i];
            double r = s == 0   ? (double)row->history_tokens / (double)self->window
                       : s == 1 ? row->ratio_before
                                : row->ratio_after;
            ck__buf_printf(&b, "%.1f,%.1f ", X(i), Y(r));
        }
        ck__buf_adds(&b, "\"/>\n");
        const char *name =
            s == 0 && clipped ? "without ctxkeel (clipped at 200%)" : series_name[s];
        ck__buf_printf(&b,
                       "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                       "stroke-width=\"2\"%s/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                       legend_x, legend_x + 18, SVG_H - 12, SVG_H - 12, series_color[s],
                       s == 0 ? " stroke-dasharray=\"5 3\"" : "", legend_x + 22, SVG_H - 8,
                       name);
        legend_x += 40 + 6.0 * (double)strlen(name);
    }
    ck__buf_printf(&b,
                   "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#6a1b9a\" "
                   "stroke-dasharray=\"3 3\"/><text x=\"%.1f\" y=\"%.1f\">compaction</text>\n",
                   legend_x, legend_x + 18, SVG_H - 12, SVG_H - 12, legend_x + 22, SVG_H - 8);
    ck__buf_printf(&b, "<text x=\"%.1f\" y=\"20\" font-size=\"13\">", SVG_LEFT);
    replay_xml(&b, title && *title ? title : "replay");
    ck__buf_printf(&b, ": context use over %zu model calls</text>\n</svg>\n", n);
#undef X
#undef Y
    *out = ck__buf_take(&b, len);
    return *out ? CK_OK : CK_ENOMEM;
}
