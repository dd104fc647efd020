/* The compactor object: one agent session's options, store and state; resuming the state from
 * the audit log; the tool-time offload gate; reading and searching the evidence, and answering
 * the model's read_evidence calls; the usage correction. Compactions themselves are in
 * compaction.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "./alloc.h"
#include "./compaction.h"
#include "./extract.h"
#include "./hash.h"
#include "./json.h"
#include "./offload.h"

static const char MARKER[] = "[Context Compaction]";

const char *ck_checkpoint_marker(void) { return MARKER; }

const char *ck_tier_name(ck_tier tier) {
    switch (tier) {
        case CK_TIER_NONE: return "none";
        case CK_TIER_WARN: return "warn";
        case CK_TIER_SOFT: return "soft";
        case CK_TIER_FULL: return "full";
        case CK_TIER_EMERGENCY: return "emergency";
    }
    return "unknown";
}

/* Copies the retention policies (and their tool patterns) into the compactor. */
static int compactor_copy_retention(ck_compactor *self, const ck_compactor_options *in) {
    size_t n = in->n_retention;
    self->opt.retention = NULL;
    self->opt.n_retention = 0;
    if (!n) return CK_OK;
    if (n > SIZE_MAX / sizeof *self->retention) return CK_ENOMEM;
    self->retention = ck__calloc(n, sizeof *self->retention);
    if (!self->retention) return CK_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        self->retention[k] = in->retention[k];
        const char *tool = in->retention[k].tool;
        self->retention[k].tool = NULL;
        if (tool && !(self->retention[k].tool = ck__strndup(tool, strlen(tool)))) {
            self->n_retention = k;
            return CK_ENOMEM;
        }
    }
    self->n_retention = n;
    self->opt.retention = self->retention;
    self->opt.n_retention = n;
    return CK_OK;
}

/* A random session id: 16 hex digits from /dev/urandom, or from the clock and pid. */
static char *compactor_new_session_id(void) {
    unsigned char raw[8];
    int ok = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        /* Unbuffered, so that 8 bytes are read rather than a stdio buffer's worth (4 KB that
         * the kernel generates first, which showed in profiles of fresh compactors). */
        setvbuf(f, NULL, _IONBF, 0);
        ok = fread(raw, 1, sizeof raw, f) == sizeof raw;
        fclose(f);
    }
    if (!ok) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = ck__hash_fast((const char *)&ts, sizeof ts, (uint64_t)getpid());
        memcpy(raw, &x, sizeof raw);
    }
    char hex[17];
    ck__hex(raw, sizeof raw, hex);
    return ck__strndup(hex, 16);
}

static void compactor_resume_note(ck_compactor *self, const char *why, size_t line) {
    char msg[256];
    snprintf(msg, sizeof msg, "the audit log could not be resumed: %s (record %zu after the last "
                              "snapshot); the session started afresh",
             why, line);
    ck__free(self->resume_note);
    self->resume_note = ck__strndup(msg, strlen(msg));
}

/* Resumes the state from the audit log: the last snapshot record and the deltas after it, each
 * checked against the store's key. A record that fails its check, or does not parse, leaves a
 * fresh state and a note for the next record: a rewritten log must not steer the session. */
static int compactor_resume_log(ck_compactor *self) {
    char *text = NULL;
    size_t len = 0;
    ck_error err;
    if (ck__store_log_since(self->store, "\"kind\":\"snapshot\"", &text, &len, &err) != CK_OK) {
        compactor_resume_note(self, err.msg ? err.msg : "the log cannot be read", 0);
        return CK_OK;
    }
    if (!text) return CK_OK;
    unsigned char key[32];
    int have_key = ck__store_key(self->store, 0, key, &err) == CK_OK;
    ck__state st;
    if (ck__state_init(&st)) {
        ck__free(text);
        return CK_ENOMEM;
    }
    int rc = CK_OK;
    size_t n = 0;
    const char *why = NULL;
    for (const char *s = text, *end = text + len; s < end && !rc && !why;) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t line = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (line) {
            n++;
            if (!have_key || !ck__record_verify(s, line, key, sizeof key)) {
                why = have_key ? "a record's integrity tag does not match"
                               : "the store's audit key is missing";
            } else {
                int snapshot;
                rc = ck__state_apply_record(&st, s, line, &snapshot);
                if (rc == CK_ESYNTAX) {
                    why = "a record does not check out";
                    rc = CK_OK;
                } else if (!rc && n == 1 && !snapshot) {
                    why = "no snapshot record was found";
                }
            }
        }
        s = nl ? nl + 1 : end;
    }
    ck__free(text);
    if (rc) {
        ck__state_dispose(&st);
        return rc;
    }
    if (why) {
        compactor_resume_note(self, why, n);
        /* The record counter still moves on, so ids stay unique in the log. */
        uint64_t records = st.records;
        ck__state_dispose(&st);
        self->st.records = records;
        return CK_OK;
    }
    ck__state_dispose(&self->st);
    self->st = st;
    return CK_OK;
}

int ck__compactor_resume(ck_compactor *self) {
    int rc = compactor_resume_log(self);
    /* Records in the backend are numbered by their keys: the next one goes after the newest
     * listed, whatever the record ids say. */
    uint64_t seen = ck__store_records_seen(self->store);
    if (!rc && seen > self->st.records) self->st.records = seen;
    return rc;
}

/* The built-in S3 backend named by the `store` option, made and owned by the compactor. Its
 * errors name the URL's parts as parts of "store". */
static int compactor_open_store(ck_compactor *self, const char *url, ck_error *err) {
    if (self->opt.backend)
        return ck__fail(err, CK_EINVAL, "store and backend exclude each other", CK_NONE, "store");
    self->s3 = ck_s3_backend_new(url, strlen(url), err);
    if (!self->s3) {
        if (err && strncmp(err->where, "url", 3) == 0) {
            char where[sizeof err->where];
            snprintf(where, sizeof where, "store%s", err->where + 3);
            memcpy(err->where, where, sizeof where);
        }
        return err ? err->code : CK_EINVAL;
    }
    self->backend = *ck_s3_backend_evidence(self->s3);
    self->opt.backend = &self->backend;
    self->opt.store = ck_s3_backend_url(self->s3);
    return CK_OK;
}

ck_compactor *ck_compactor_new(const ck_compactor_options *opts, ck_error *err) {
    ck__error_clear(err);
    if (!opts) {
        ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
        return NULL;
    }
    ck_compactor *self = ck__calloc(1, sizeof *self);
    if (!self) {
        ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        return NULL;
    }
    int rc = ck__options_check(opts, &self->opt, err);
    if (rc) {
        ck__free(self);
        return NULL;
    }
    int resume = opts->session_id != NULL;
    if (opts->session_id && !opts->session_id[0]) {
        ck__free(self);
        ck__fail(err, CK_EINVAL, "session_id must not be empty", CK_NONE, "session_id");
        return NULL;
    }
    self->session_id = opts->session_id
                           ? ck__strndup(opts->session_id, strlen(opts->session_id))
                           : compactor_new_session_id();
    const char *dir = opts->store_dir && opts->store_dir[0] ? opts->store_dir : ".ctxkeel";
    self->store_dir = ck__strndup(dir, strlen(dir));
    self->opt.session_id = self->session_id;
    self->opt.store_dir = self->store_dir;
    if (opts->backend) {
        self->backend = *opts->backend;
        self->opt.backend = &self->backend;
    }
    ck__tokcache_init(&self->tokcache, &self->opt.counter, self->opt.estimator);
    self->opt.store = NULL;
    if (opts->store && opts->store[0] && compactor_open_store(self, opts->store, err)) {
        ck_compactor_free(self);
        return NULL;
    }
    if (!self->session_id || !self->store_dir || compactor_copy_retention(self, opts) ||
        !(self->store = ck__store_new(self->store_dir, self->session_id, self->opt.backend)) ||
        ck__state_init(&self->st) || (resume && ck__compactor_resume(self))) {
        ck_compactor_free(self);
        ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        return NULL;
    }
    return self;
}

void ck_compactor_free(ck_compactor *self) {
    if (!self) return;
    ck__state_dispose(&self->st);
    ck__store_free(self->store);
    ck_s3_backend_free(self->s3);
    for (size_t k = 0; k < self->n_retention; k++) ck__free((char *)self->retention[k].tool);
    ck__strs_dispose(&self->tool_refs);
    ck__tokcache_dispose(&self->tokcache);
    ck__free(self->sent_key);
    ck__free(self->sent_tok);
    ck__free(self->retention);
    ck__free(self->session_id);
    ck__free(self->store_dir);
    ck__free(self->resume_note);
    ck__free(self);
}

void ck_compactor_reset(ck_compactor *self) {
    if (!self) return;
    /* Out of memory keeps the state rather than lose the object, marked inactive. */
    if (ck__state_forget(&self->st)) {
        self->st.active = 0;
        self->st.covered = 0;
        self->st.origin_n = 0;
    }
}

const char *ck_compactor_session_id(const ck_compactor *self) {
    return self ? self->session_id : NULL;
}

void ck_compactor_get_options(const ck_compactor *self, ck_compactor_options *out) {
    if (self && out) *out = self->opt;
}

/* ---- the tool-time gate ---- */

int ck_compactor_offload(ck_compactor *self, const ck_history *history, size_t i, ck_view **out,
                         ck_error *err) {
    ck__error_clear(err);
    if (!self || !history || !out) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    *out = NULL;
    if (i >= history->n_msgs)
        return ck__fail(err, CK_EINVAL, "message index out of range", i, "messages[%zu]", i);
    ck_view *v = ck__view_new();
    if (!v) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    const ck__msg *m = &history->msgs[i];
    const ck_part *parts = ck__msg_parts(history, i);
    int rc = ck__view_begin(v, CK_OP_EDIT, i, m->role, m->flags);
    ck__buf b;
    ck__buf_init(&b);
    for (size_t k = 0; k < m->n_parts && !rc; k++) {
        const ck_part *p = &parts[k];
        size_t tool_len;
        const char *tool = ck__tool_name_of(history, p, i, &tool_len);
        int big = p->kind == CK_PART_TOOL_RESULT && p->id_len &&
                  !ck__is_placeholder(p->text, p->text_len) &&
                  p->text_len > self->opt.tool_offload_threshold &&
                  !ck__never_offloaded(self->retention, self->n_retention, tool, tool_len);
        ck__offload o;
        memset(&o, 0, sizeof o);
        if (big) {
            ck_error werr;
            int put = ck__offload_store(self->store, p, tool, tool_len,
                                        ck__hash_text(p->text, p->text_len), &o, &werr);
            if (put == CK_ENOMEM) rc = put;
            else if (put) {
                /* Fail-open: the output stays; the caller hears why through err. */
                if (err) *err = werr;
                big = 0;
            } else if (self->opt.backend) {
                rc = ck__strs_push_unique(&self->tool_refs, o.ref, strlen(o.ref));
            }
        }
        if (rc || !big) {
            if (!rc) rc = ck__view_add_src_part(v, history, i, k);
            ck__offload_dispose(&o);
            continue;
        }
        b.len = 0;
        const ck_retention *policy = ck__retention_for(self->retention, self->n_retention, o.tool);
        int failed = policy ? 0 : ck__looks_failed(p->text, p->text_len, p->flags);
        rc = ck__render_placeholder(&b, p, &o, policy, failed, 20, 2048, 0);
        const char *text = rc ? NULL : ck__view_own(v, b.data, b.len);
        if (!rc && !text) rc = CK_ENOMEM;
        if (!rc) rc = ck__view_add_replaced_part(v, history, i, k, text, b.len);
        ck__offload_dispose(&o);
    }
    ck__buf_dispose(&b);
    /* The refs of the view name durable files (even those of a view not returned). */
    ck__store_sync(self->store);
    if (!rc) ck__view_end(v, history);
    if (rc) {
        ck_view_free(v);
        return ck__fail(err, rc, NULL, CK_NONE, NULL);
    }
    *out = v;
    return CK_OK;
}

/* ---- evidence ---- */

int ck_compactor_read_evidence(const ck_compactor *self, const char *ref, size_t ref_len,
                               size_t offset, size_t limit, char **out, size_t *out_len,
                               ck_error *err) {
    ck__error_clear(err);
    if (!self || !ref || !out) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    size_t len = 0;
    int rc = ck__store_read(self->store, ref, ref_len, offset, limit, out, &len, err);
    if (out_len) *out_len = rc ? 0 : len;
    return rc;
}

/* The ref a file of the session's evidence folder is known by: the one its offload or archive
 * record holds (a search over every file reports file names, and the name of a hashed id or
 * of an archive is not what the model was told to use), or NULL when no record names it. */
static const char *compactor_ref_of_file(const ck_compactor *self, const char *name) {
    const ck__state *st = &self->st;
    size_t nl = strlen(name);
    for (size_t pass = 0; pass < 2; pass++) {
        size_t n = pass ? st->n_archives : st->n_offloads;
        for (size_t i = 0; i < n; i++) {
            const char *path = pass ? st->archives[i].path : st->offloads[i].path;
            const char *ref = pass ? st->archives[i].ref : st->offloads[i].ref;
            size_t pl = strlen(path);
            /* The path ends in "/<name>" or "/<name>.txt". */
            for (size_t ext = 0; ext <= 4; ext += 4) {
                if (pl < nl + ext + 1) continue;
                const char *at = path + pl - ext - nl;
                if (at[-1] == '/' && memcmp(at, name, nl) == 0 &&
                    (ext == 0 || memcmp(path + pl - 4, ".txt", 4) == 0))
                    return ref;
            }
        }
    }
    return NULL;
}

/* Rewrites the file names a session-wide search reports into the refs the model knows. Each
 * hit starts with {"ref":"<name>", and a name is made of [A-Za-z0-9._~-] only, so the text is
 * rewritten where it stands (inside the hits' texts every quote is escaped, so the sequence
 * cannot occur there) and every other byte, NUL escapes included, is copied as it is. */
static int compactor_name_refs(const ck_compactor *self, char **json, size_t *len,
                               ck_error *err) {
    static const char head[] = "{\"ref\":\"";
    const size_t hl = sizeof head - 1;
    ck__buf b;
    ck__buf_init(&b);
    const char *s = *json, *end = *json + *len;
    int changed = 0;
    while (s < end) {
        const char *at = NULL;
        for (const char *q = s; q + hl <= end; q++) {
            q = memchr(q, '{', (size_t)(end - q));
            if (!q || q + hl > end) break;
            if (memcmp(q, head, hl) == 0) {
                at = q;
                break;
            }
        }
        if (!at) {
            ck__buf_add(&b, s, (size_t)(end - s));
            break;
        }
        const char *name = at + hl, *close = memchr(name, '"', (size_t)(end - name));
        if (!close) {
            ck__buf_add(&b, s, (size_t)(end - s));
            break;
        }
        char file[256];
        size_t nl = (size_t)(close - name);
        const char *known = NULL;
        if (nl < sizeof file) {
            memcpy(file, name, nl);
            file[nl] = '\0';
            known = compactor_ref_of_file(self, file);
        }
        ck__buf_add(&b, s, (size_t)(name - s));
        if (known && strcmp(known, file) != 0) {
            for (const char *k = known; *k; k++) {
                unsigned char ch = (unsigned char)*k;
                if (ch == '"' || ch == '\\') ck__buf_addc(&b, '\\');
                if (ch < 0x20) ck__buf_printf(&b, "\\u%04x", ch);
                else ck__buf_addc(&b, (char)ch);
            }
            changed = 1;
        } else {
            ck__buf_add(&b, name, nl);
        }
        s = close;
    }
    if (b.failed) {
        ck__buf_dispose(&b);
        return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    }
    if (!changed) {
        ck__buf_dispose(&b);
        return CK_OK;
    }
    ck__free(*json);
    *json = ck__buf_take(&b, len);
    return *json ? CK_OK : ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
}

int ck_compactor_search_evidence(const ck_compactor *self, const char *ref, size_t ref_len,
                                 const char *pattern, size_t max_hits, char **out,
                                 size_t *out_len, ck_error *err) {
    ck__error_clear(err);
    if (!self || !pattern || !out) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    /* A backend cannot be listed: the session's evidence is what this compactor stored or
     * resumed (outputs, archives of folded messages, tool-time offloads), each ref once. */
    const char **refs = NULL;
    size_t n_refs = 0;
    ck__idmap seen;
    memset(&seen, 0, sizeof seen);
    int rc = CK_OK;
    if (self->opt.backend && !ref) {
        const ck__state *st = &self->st;
        size_t most = st->n_offloads + st->n_archives + self->tool_refs.n;
        if (!(refs = ck__calloc(most ? most : 1, sizeof *refs)) || ck__idmap_init(&seen, most))
            rc = CK_ENOMEM;
        for (size_t k = 0; !rc && k < most; k++) {
            const char *r = k < st->n_offloads ? st->offloads[k].ref
                            : k < st->n_offloads + st->n_archives
                                ? st->archives[k - st->n_offloads].ref
                                : self->tool_refs.v[k - st->n_offloads - st->n_archives].s;
            int fresh = ck__idmap_put(&seen, r, strlen(r), k);
            if (fresh < 0) rc = CK_ENOMEM;
            else if (fresh) refs[n_refs++] = r;
        }
    }
    size_t len = 0;
    if (!rc)
        rc = ck__store_search(self->store, ref, ref_len, pattern, max_hits ? max_hits : 1000,
                              refs, n_refs, out, &len, err);
    else
        rc = ck__fail(err, rc, NULL, CK_NONE, NULL);
    ck__idmap_dispose(&seen);
    ck__free(refs);
    if (!rc && !self->opt.backend) rc = compactor_name_refs(self, out, &len, err);
    if (out_len) *out_len = rc ? 0 : len;
    return rc;
}

#define TOOL_DESCRIPTION                                                                       \
    "Read text that was moved out of the context: a tool output (by the ref its placeholder "  \
    "names) or the archive of earlier messages (by the ref the checkpoint names), a page of "  \
    "lines at a time. With a pattern, find the lines that match it instead, in one ref or, "   \
    "without a ref, across everything stored for this session; each match comes with the "     \
    "offset that reads it."
#define TOOL_PROPERTIES                                                                        \
    "{\"ref\":{\"type\":\"string\",\"description\":\"the ref (or path) a placeholder or the "  \
    "checkpoint names; leave it out to search the whole session\"},\"offset\":{\"type\":"      \
    "\"integer\",\"minimum\":0,\"description\":\"first line to read, counted from 0\"},"       \
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"number of lines, "         \
    "default 200\"},\"pattern\":{\"type\":\"string\",\"description\":\"a regular expression "  \
    "(POSIX extended) to find instead of reading\"}}"

const char *ck_read_evidence_tool(ck_format format) {
    static const char OPENAI[] =
        "{\"type\":\"function\",\"function\":{\"name\":\"read_evidence\",\"description\":\"" TOOL_DESCRIPTION
        "\",\"parameters\":{\"type\":\"object\",\"properties\":" TOOL_PROPERTIES "}}}";
    static const char ANTHROPIC[] =
        "{\"name\":\"read_evidence\",\"description\":\"" TOOL_DESCRIPTION
        "\",\"input_schema\":{\"type\":\"object\",\"properties\":" TOOL_PROPERTIES "}}";
    return format == CK_FORMAT_ANTHROPIC ? ANTHROPIC : OPENAI;
}

/* Answers are bounded, so a page of huge lines cannot flood the context it was moved out of. */
#define ANSWER_MAX_BYTES 65536
#define ANSWER_MAX_HITS 50

/* The integer argument `key` of a read_evidence call, within [min, max] (larger: max). */
static const char *compactor_int_arg(const ck__jval *args, const char *key, size_t dflt,
                                     size_t min, size_t max, size_t *out) {
    const ck__jval *v = ck__jgets(args, key);
    *out = dflt;
    if (!v || ck__jis(v, CK__JNULL)) return NULL;
    uint64_t x;
    double d;
    if (ck__ju64(v, &x)) {
        if (x < min) return "must be a whole number, at least 1";
        *out = x > max ? max : (size_t)x;
        return NULL;
    }
    /* A whole number too large for 64 bits still means "as far as there is". */
    if (ck__jdouble(v, &d) && d > 0 && d == (double)(uint64_t)-1) {
        *out = max;
        return NULL;
    }
    return min ? "must be a whole number, at least 1" : "must be a whole number, 0 or more";
}

static void compactor_answer_hits(const char *json, size_t len, const char *pattern,
                                  size_t pattern_len, ck__buf *b) {
    ck__jread_options opts = {0, 0};
    ck__jdoc *doc = ck__jread(json, len, opts, NULL);
    const ck__jval *hits = doc ? ck__jdoc_root(doc) : NULL;
    size_t n = ck__jcount(hits);
    if (!n) {
        ck__buf_adds(b, "read_evidence: no stored line matches the pattern ");
        ck__buf_add_inline(b, pattern, pattern_len, 200);
        ck__buf_adds(b, "\n");
    }
    for (size_t i = 0; i < n && b->len <= ANSWER_MAX_BYTES; i++) {
        const ck__jval *h = ck__jat(hits, i);
        size_t rl, tl;
        const char *ref = ck__jstr(ck__jgets(h, "ref"), &rl);
        const char *text = ck__jstr(ck__jgets(h, "text"), &tl);
        uint64_t line;
        if (!ref || !text || !ck__ju64(ck__jgets(h, "line"), &line)) continue;
        ck__buf_adds(b, "ref=\"");
        ck__buf_add_inline(b, ref, rl, 300);
        ck__buf_printf(b, "\" offset=%llu: ", (unsigned long long)line);
        ck__buf_add_inline(b, text, tl, 300);
        ck__buf_addc(b, '\n');
    }
    if (n >= ANSWER_MAX_HITS)
        ck__buf_printf(b, "(the first %d matches; narrow the pattern or give a ref for more)\n",
                       ANSWER_MAX_HITS);
    ck__jdoc_free(doc);
}

int ck_compactor_answer_read_evidence(const ck_compactor *self, const char *args, size_t len,
                                      char **out, size_t *out_len, int *is_error) {
    if (!self || !out || (!args && len)) return CK_EINVAL;
    *out = NULL;
    if (out_len) *out_len = 0;
    int failed = 1;
    ck__buf b;
    ck__buf_init(&b);
    /* Arguments as the model wrote them: duplicate keys and odd bytes are its mistakes to be
     * told about, not errors of the host. An empty text means no arguments. */
    ck__jread_options opts = {CK__JREAD_NO_DUPLICATES, 16};
    ck_error jerr;
    ck__jdoc *doc = len ? ck__jread(args, len, opts, &jerr) : NULL;
    if (!len) jerr.code = CK_OK;
    const ck__jval *a = doc ? ck__jdoc_root(doc) : NULL;
    const ck__jval *ref = ck__jgets(a, "ref"), *pattern = ck__jgets(a, "pattern");
    size_t offset = 0, limit = 200, rl = 0, pl = 0;
    const char *r = ck__jstr(ref, &rl), *pat = ck__jstr(pattern, &pl);
    const char *bad = NULL, *which = NULL;
    if (len && !doc)
        bad = jerr.code == CK_ENOMEM ? NULL : "the arguments are not valid JSON";
    else if (doc && !ck__jis(a, CK__JOBJECT))
        bad = "the arguments must be a JSON object";
    else if (ref && !ck__jis(ref, CK__JNULL) && (!r || !rl || memchr(r, '\0', rl)))
        bad = "'ref' must be a non-empty string: the ref or path named in a placeholder";
    else if (pattern && !ck__jis(pattern, CK__JNULL) && (!pat || !pl || memchr(pat, '\0', pl)))
        bad = "'pattern' must be a non-empty string";
    else if ((bad = compactor_int_arg(a, "offset", 0, 0, SIZE_MAX, &offset))) which = "offset";
    else if ((bad = compactor_int_arg(a, "limit", 200, 1, 2000, &limit))) which = "limit";
    if (len && !doc && jerr.code == CK_ENOMEM) b.failed = 1;
    if (!ck__jis(ref, CK__JSTRING)) r = NULL;
    if (!ck__jis(pattern, CK__JSTRING)) pat = NULL;
    if (!bad && !b.failed && !r && !pat)
        bad = "give a 'ref' to read (the ref or path named in a placeholder or the checkpoint), "
              "or a 'pattern' to search for";
    if (bad) {
        ck__buf_adds(&b, "read_evidence: ");
        if (which) ck__buf_printf(&b, "'%s' ", which);
        ck__buf_adds(&b, bad);
        ck__buf_addc(&b, '\n');
    } else if (b.failed) {
        /* out of memory: reported below */
    } else if (pat) {
        char *json = NULL;
        size_t jl = 0;
        ck_error err;
        int rc = ck_compactor_search_evidence(self, r, r ? rl : 0, pat, ANSWER_MAX_HITS, &json,
                                              &jl, &err);
        if (rc == CK_ENOMEM) b.failed = 1;
        else if (rc) {
            ck__buf_adds(&b, "read_evidence: ");
            if (strcmp(err.where, "pattern") == 0) {
                ck__buf_adds(&b, "the pattern is not a valid regular expression");
                if (err.msg) ck__buf_printf(&b, " (%s)", err.msg);
            } else {
                ck__buf_adds(&b, "cannot search ");
                ck__buf_add_inline(&b, err.where, strlen(err.where), 120);
                if (err.msg) ck__buf_printf(&b, ": %s", err.msg);
            }
            ck__buf_addc(&b, '\n');
        } else {
            compactor_answer_hits(json, jl, pat, pl, &b);
            failed = 0;
        }
        ck__free(json);
    } else {
        char *text = NULL;
        size_t tl = 0;
        ck_error err;
        int rc = ck_compactor_read_evidence(self, r, rl, offset, limit, &text, &tl, &err);
        if (rc == CK_ENOMEM) b.failed = 1;
        else if (rc) {
            ck__buf_adds(&b, "read_evidence: cannot read ");
            ck__buf_add_inline(&b, r, rl, 120);
            ck__buf_printf(&b, ": %s\n", err.msg ? err.msg : ck_strerror(rc));
        } else if (!tl) {
            ck__buf_adds(&b, "read_evidence: ");
            ck__buf_add_inline(&b, r, rl, 120);
            ck__buf_printf(&b, " has no lines from offset %zu on (offsets count lines from 0)\n",
                           offset);
            failed = 0;
        } else {
            size_t keep = tl > ANSWER_MAX_BYTES ? ck__clip(text, tl, ANSWER_MAX_BYTES) : tl;
            ck__buf_add(&b, text, keep);
            if (keep < tl) {
                size_t shown = (size_t)ck__count_lines(text, keep);
                ck__buf_printf(&b, "\n[read_evidence: cut at %zu bytes; continue with offset=%zu]\n",
                               keep, offset + (shown ? shown - 1 : 0));
            }
            failed = 0;
        }
        ck__free(text);
    }
    ck__jdoc_free(doc);
    if (b.failed) {
        ck__buf_dispose(&b);
        return CK_ENOMEM;
    }
    ck__buf_add(&b, "", 0);
    size_t n = 0;
    *out = ck__buf_take(&b, &n);
    if (!*out) return CK_ENOMEM;
    if (out_len) *out_len = n;
    if (is_error) *is_error = failed;
    return CK_OK;
}

/* ---- usage ---- */

static int compactor_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void ck_compactor_observe_usage(ck_compactor *self, uint64_t prompt_tokens) {
    if (!self || !prompt_tokens || !self->st.last_view) return;
    ck__state *st = &self->st;
    double r = (double)prompt_tokens / (double)st->last_view;
    r = r < 0.5 ? 0.5 : (r > 2.0 ? 2.0 : r);
    if (st->n_usage == 5) memmove(st->usage, st->usage + 1, 4 * sizeof st->usage[0]);
    else st->n_usage++;
    st->usage[st->n_usage - 1] = r;
    /* The median ignores one odd reading (a cached prompt, a provider-side truncation). */
    double sorted[5];
    memcpy(sorted, st->usage, st->n_usage * sizeof sorted[0]);
    qsort(sorted, st->n_usage, sizeof sorted[0], compactor_cmp_double);
    st->factor = st->n_usage % 2 ? sorted[st->n_usage / 2]
                                 : (sorted[st->n_usage / 2 - 1] + sorted[st->n_usage / 2]) / 2;
}

double ck_compactor_usage_factor(const ck_compactor *self) {
    return self ? self->st.factor : 1.0;
}
