/* The format layer's driver: the registry of dialects, reading a host list into a history
 * (detecting the dialect on the way), building a view back into host values, and the helpers
 * every fmt_<name>.c uses to read and build through the host's reader and builder. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "./alloc.h"
#include "./fmt.h"

/* ---- names ---- */

static const char *const fmt_key_names[CK_KEY_COUNT] = {
#define FMT_KEY_NAME(name, text) text,
    CK_KEY_LIST(FMT_KEY_NAME)
#undef FMT_KEY_NAME
};

const char *ck_key_name(ck_key key) {
    return (unsigned)key < CK_KEY_COUNT ? fmt_key_names[key] : NULL;
}

/* The registry: one line per dialect. */
static const ck__fmt *const fmt_all[] = {
    &ck__fmt_openai,
    &ck__fmt_anthropic,
    &ck__fmt_gemini,
    &ck__fmt_responses,
    &ck__fmt_langchain,
    &ck__fmt_ai_sdk,
};
#define FMT_N (sizeof fmt_all / sizeof *fmt_all)

const ck__fmt *ck__fmt_of(ck_format f) {
    for (size_t i = 0; i < FMT_N; i++)
        if (fmt_all[i]->format == f) return fmt_all[i];
    return NULL;
}

const char *ck_format_name(ck_format format) {
    static const char *const names[CK_FORMAT_COUNT] = {
        "auto", "openai", "anthropic", "responses", "gemini", "ai-sdk", "langchain",
    };
    return (unsigned)format < CK_FORMAT_COUNT ? names[format] : NULL;
}

int ck_format_from_name(const char *name, size_t len, ck_format *out) {
    if (!name || !out) return CK_EINVAL;
    for (int f = 0; f < CK_FORMAT_COUNT; f++) {
        const char *n = ck_format_name((ck_format)f);
        if (strlen(n) == len && memcmp(n, name, len) == 0) {
            *out = (ck_format)f;
            return CK_OK;
        }
    }
    if ((len == 6 && memcmp(name, "ai_sdk", 6) == 0) || (len == 5 && memcmp(name, "aisdk", 5) == 0)) {
        *out = CK_FORMAT_AI_SDK;
        return CK_OK;
    }
    return CK_EINVAL;
}

/* ---- reading: helpers ---- */

int ck__rd_fail(ck__rd *rd, int code, const char *msg, const char *path, ...) {
    char tail[96] = "";
    if (path) {
        va_list ap;
        va_start(ap, path);
        vsnprintf(tail, sizeof tail, path, ap);
        va_end(ap);
    }
    return ck__fail(rd->err, code, msg, rd->index, "messages[%zu]%s", rd->index, tail);
}

/* A reader status as a failure of the read: the core's own codes name the place; a host's
 * own status (its exception) passes through. */
static int fmt_host_fail(ck__rd *rd, int rc) {
    if (rc == CK_ENOMEM) return ck__fail(rd->err, CK_ENOMEM, NULL, rd->index, NULL);
    if (rd->err && rd->err->code == CK_OK) {
        rd->err->code = rc;
        rd->err->index = rd->index;
    }
    return rc;
}

/* A failure naming `path` (formatted with rd->at, see ck__rd). */
static int fmt_fail_path(ck__rd *rd, int code, const char *msg, const char *path) {
    return ck__rd_fail(rd, code, msg, path ? path : "", rd->at[0], rd->at[1]);
}

/* A string or json callback's status: an input error the core knows (a string the host
 * cannot give as UTF-8, or over a limit; a value with no JSON) names the field being read. */
static int fmt_host_fail_at(ck__rd *rd, int rc, const char *path) {
    if (CK_IS_INPUT_ERROR(rc))
        return fmt_fail_path(rd, rc, rc == CK_ETOOBIG ? CK__MSG_TOO_BIG : NULL, path);
    return fmt_host_fail(rd, rc);
}

ck_value_kind ck__rd_kind(ck__rd *rd, ck_value v) { return rd->r->kind(rd->r->ctx, v); }

int ck__rd_field(ck__rd *rd, ck_value obj, ck_key key, ck_value *out) {
    out->ptr = NULL;
    out->aux = 0;
    int rc = rd->r->field(rd->r->ctx, obj, key, out);
    if (rc < 0) return fmt_host_fail(rd, rc);
    return rc > 0 && ck__rd_kind(rd, *out) != CK_VALUE_ABSENT;
}

int ck__rd_count(ck__rd *rd, ck_value arr, size_t *n) {
    int rc = rd->r->count(rd->r->ctx, arr, n);
    return rc < 0 ? fmt_host_fail(rd, rc) : CK_OK;
}

int ck__rd_item(ck__rd *rd, ck_value arr, size_t i, ck_value *out) {
    int rc = rd->r->item(rd->r->ctx, arr, i, out);
    return rc < 0 ? fmt_host_fail(rd, rc) : CK_OK;
}

int ck__rd_string(ck__rd *rd, ck_value v, const char **s, size_t *len, const char *path) {
    if (ck__rd_kind(rd, v) != CK_VALUE_STRING)
        return fmt_fail_path(rd, CK_ETYPE, "expected a string", path);
    int rc = rd->r->string(rd->r->ctx, v, s, len);
    if (rc < 0) return fmt_host_fail_at(rd, rc, path);
    if (!*s) *s = "";
    return CK_OK;
}

int ck__rd_need_string(ck__rd *rd, ck_value obj, ck_key key, const char **s, size_t *len,
                       const char *path) {
    ck_value v;
    int got = ck__rd_field(rd, obj, key, &v);
    if (got < 0) return got;
    if (!got) return fmt_fail_path(rd, CK_EMISSING, "required field is missing", path);
    return ck__rd_string(rd, v, s, len, path);
}

int ck__rd_opt_string(ck__rd *rd, ck_value obj, ck_key key, const char **s, size_t *len,
                      const char *path) {
    ck_value v;
    *s = "";
    *len = 0;
    int got = ck__rd_field(rd, obj, key, &v);
    if (got <= 0) return got;
    if (ck__rd_kind(rd, v) == CK_VALUE_NULL) return CK_OK;
    return ck__rd_string(rd, v, s, len, path);
}

int ck__rd_text_or_json(ck__rd *rd, ck_value v, const char **s, size_t *len, const char *path) {
    ck_value_kind k = ck__rd_kind(rd, v);
    if (k == CK_VALUE_STRING) return ck__rd_string(rd, v, s, len, path);
    if (k == CK_VALUE_ABSENT || k == CK_VALUE_NULL) {
        *s = "";
        *len = 0;
        return CK_OK;
    }
    int rc = rd->r->json(rd->r->ctx, v, s, len);
    if (rc < 0) return fmt_host_fail_at(rd, rc, path);
    if (!*s) *s = "";
    return CK_OK;
}

int ck__rd_true(ck__rd *rd, ck_value obj, ck_key key) {
    ck_value v;
    int b = 0;
    if (ck__rd_field(rd, obj, key, &v) <= 0 || ck__rd_kind(rd, v) != CK_VALUE_BOOL) return 0;
    return rd->r->boolean(rd->r->ctx, v, &b) == CK_OK && b;
}

/* obj[key] is a string that starts with `lit` (whole: it is `lit`); never an error. */
static int fmt_field_is(ck__rd *rd, ck_value obj, ck_key key, const char *lit, int whole) {
    ck_value v;
    const char *s;
    size_t len, n = strlen(lit);
    if (ck__rd_field(rd, obj, key, &v) <= 0 || ck__rd_kind(rd, v) != CK_VALUE_STRING) return 0;
    if (rd->r->string(rd->r->ctx, v, &s, &len) != CK_OK || !s) return 0;
    return (whole ? len == n : len >= n) && memcmp(s, lit, n) == 0;
}

int ck__rd_is(ck__rd *rd, ck_value obj, ck_key key, const char *lit) {
    return fmt_field_is(rd, obj, key, lit, 1);
}

static int fmt_starts(ck__rd *rd, ck_value obj, ck_key key, const char *lit) {
    return fmt_field_is(rd, obj, key, lit, 0);
}

int ck__rd_message(ck__rd *rd, ck_value msg, ck_role role, uint32_t flags) {
    ck_history *h = rd->h;
    int rc = ck_history_add_message(h, role, flags);
    if (rc) return ck__fail(rd->err, rc, NULL, rd->index, "messages[%zu]", rd->index);
    if (ck__grow((void **)&h->msg_values, &h->cap_msg_values, h->n_msgs, sizeof *h->msg_values))
        return ck__fail(rd->err, CK_ENOMEM, NULL, rd->index, NULL);
    h->msg_values[h->n_msgs - 1] = msg;
    return CK_OK;
}

int ck__rd_head(ck__rd *rd, ck_value msg, ck_role *role, ck_value *content,
                ck_value_kind *kind) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT)
        return ck__rd_fail(rd, CK_ETYPE, "expected an object", NULL);
    const char *role_s;
    size_t role_len;
    int rc = ck__rd_need_string(rd, msg, CK_KEY_ROLE, &role_s, &role_len, ".role");
    if (rc) return rc;
    *role = ck__role_of(role_s, role_len);
    int got = ck__rd_field(rd, msg, CK_KEY_CONTENT, content);
    if (got < 0) return got;
    if (!got) *content = (ck_value){NULL, 0};
    *kind = got ? ck__rd_kind(rd, *content) : CK_VALUE_ABSENT;
    return CK_OK;
}

int ck__rd_plain_item(ck__rd *rd, ck_value item, size_t k, ck_part *p, int *rc) {
    ck_value_kind kind = ck__rd_kind(rd, item);
    if (kind == CK_VALUE_OBJECT) return 0;
    if (kind != CK_VALUE_STRING) {
        *rc = ck__rd_fail(rd, CK_ETYPE, "expected an object", ".content[%zu]", k);
        return 1;
    }
    p->kind = CK_PART_TEXT;
    rd->at[0] = k;
    *rc = ck__rd_string(rd, item, &p->text, &p->text_len, ".content[%zu]");
    if (!*rc) *rc = ck__rd_part(rd, p, item);
    return 1;
}

int ck__rd_item_head(ck__rd *rd, ck_value item, size_t k, ck_part *p, const char **type,
                     size_t *tl, int *rc) {
    memset(p, 0, sizeof *p);
    p->host = (uint32_t)k;
    if (ck__rd_plain_item(rd, item, k, p, rc)) return 1;
    rd->at[0] = k;
    *rc = ck__rd_need_string(rd, item, CK_KEY_TYPE, type, tl, ".content[%zu].type");
    return *rc != CK_OK;
}

int ck__rd_text_item(ck__rd *rd, ck_value item, size_t k, ck_part *p) {
    p->kind = CK_PART_TEXT;
    rd->at[0] = k;
    return ck__rd_need_string(rd, item, CK_KEY_TEXT, &p->text, &p->text_len,
                              ".content[%zu].text");
}

int ck__rd_simple_content(ck__rd *rd, ck_value content, ck_value_kind kind, size_t *n) {
    *n = 0;
    if (kind == CK_VALUE_ABSENT || kind == CK_VALUE_NULL) return CK_OK;
    if (kind == CK_VALUE_ARRAY) return ck__rd_count(rd, content, n);
    if (kind != CK_VALUE_STRING)
        return ck__rd_fail(rd, CK_ETYPE, "expected a string, a list or null", ".content");
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TEXT;
    p.host = CK__HOST_WHOLE;
    int rc = ck__rd_string(rd, content, &p.text, &p.text_len, ".content");
    return rc ? rc : ck__rd_part(rd, &p, content);
}

int ck__rd_part(ck__rd *rd, const ck_part *p, ck_value item) {
    ck_history *h = rd->h;
    int rc = ck_history_add_part(h, p, rd->err);
    if (rc) {
        /* add_part names the field of the part ("messages[3].text"); say which message. */
        if (rd->err) rd->err->index = rd->index;
        return rc;
    }
    if (ck__grow((void **)&h->part_values, &h->cap_part_values, h->n_parts,
                 sizeof *h->part_values)) {
        h->msgs[h->n_msgs - 1].n_parts--;
        h->n_parts--;
        (void)ck__history_rehash(h, h->n_msgs - 1); /* failing already: CK_ENOMEM either way */
        return ck__fail(rd->err, CK_ENOMEM, NULL, rd->index, NULL);
    }
    h->part_values[h->n_parts - 1] = item;
    return CK_OK;
}

/* One text of a joined list: where it was found and, once read, its bytes. */
typedef struct fmt_piece {
    ck_value v;
    const char *s; /* NULL: no text at this item */
    size_t len;
    int in_text; /* the item's .text, not the item itself */
} fmt_piece;

/* Piece j of the list `path` names: its bytes, or with `measure` (the host has a length
 * callback) only its length, checked against the limit; read as ck__rd_string() does, and the
 * place is formatted only for an error. */
static int fmt_joined_piece(ck__rd *rd, const char *path, size_t j, fmt_piece *p, int measure) {
    int rc = CK_ETYPE;
    if (ck__rd_kind(rd, p->v) == CK_VALUE_STRING) {
        if (!measure) {
            rc = rd->r->string(rd->r->ctx, p->v, &p->s, &p->len);
        } else if ((rc = rd->r->length(rd->r->ctx, p->v, &p->len)) >= 0) {
            if (p->len > CK_MAX_STRING) rc = CK_ETOOBIG;
        }
        if (rc >= 0) {
            if (!p->s) p->s = "";
            return CK_OK;
        }
    }
    char base[96], where[128];
    snprintf(base, sizeof base, path, rd->at[0], rd->at[1]);
    snprintf(where, sizeof where, "%s[%zu]%s", base, j, p->in_text ? ".text" : "");
    if (rc == CK_ETYPE) return ck__rd_fail(rd, CK_ETYPE, "expected a string", "%s", where);
    return fmt_host_fail_at(rd, rc, where);
}

int ck__rd_joined_text(ck__rd *rd, ck_value content, const char **out, size_t *len,
                       const char *path) {
    *out = "";
    *len = 0;
    ck_value_kind k = ck__rd_kind(rd, content);
    if (k == CK_VALUE_ABSENT || k == CK_VALUE_NULL) return CK_OK;
    if (k == CK_VALUE_STRING) return ck__rd_string(rd, content, out, len, path);
    if (k != CK_VALUE_ARRAY) return fmt_fail_path(rd, CK_ETYPE, "expected a string or a list", path);
    size_t n;
    int rc = ck__rd_count(rd, content, &n);
    if (rc) return rc;
    /* Find and measure the pieces, then copy them into the history's storage. A host that
     * copies strings measures them first, so a whole over the limit is refused before any
     * piece is copied. */
    int measure = rd->r->length != NULL;
    fmt_piece *pieces = n ? ck__calloc(n, sizeof *pieces) : NULL;
    if (n && !pieces) return ck__fail(rd->err, CK_ENOMEM, NULL, rd->index, NULL);
    size_t total = 0, found = 0;
    for (size_t j = 0; j < n && !rc; j++) {
        ck_value item;
        fmt_piece *p = &pieces[j];
        if ((rc = ck__rd_item(rd, content, j, &item))) break;
        if (ck__rd_kind(rd, item) == CK_VALUE_STRING) {
            p->v = item;
            rc = fmt_joined_piece(rd, path, j, p, measure);
        } else if (ck__rd_kind(rd, item) == CK_VALUE_OBJECT) {
            int got = ck__rd_field(rd, item, CK_KEY_TEXT, &p->v);
            p->in_text = 1;
            if (got < 0) rc = got;
            else if (got && ck__rd_kind(rd, p->v) != CK_VALUE_NULL)
                rc = fmt_joined_piece(rd, path, j, p, measure);
        }
        if (!rc && p->s) {
            total += p->len + (found ? 1 : 0);
            found++;
        }
    }
    if (!rc && found > 1 && total > CK_MAX_STRING) {
        /* Refused before a copy of that size is made; each piece was within the limit. */
        rc = fmt_fail_path(rd, CK_ETOOBIG, CK__MSG_TOO_BIG, path);
    }
    for (size_t j = 0; measure && !rc && j < n; j++) {
        if (!pieces[j].s) continue;
        pieces[j].s = NULL;
        rc = fmt_joined_piece(rd, path, j, &pieces[j], 0);
    }
    if (!rc && found == 1) {
        for (size_t j = 0; j < n; j++)
            if (pieces[j].s) {
                *out = pieces[j].s;
                *len = pieces[j].len;
            }
    } else if (!rc && found > 1) {
        /* Sized again from the copies, as they are joined below. */
        total = 0;
        for (size_t j = 0; j < n; j++)
            if (pieces[j].s) total += pieces[j].len + (total ? 1 : 0);
        char *buf = total <= CK_MAX_STRING ? ck_history_alloc(rd->h, total + 1) : NULL;
        if (!buf && total > CK_MAX_STRING)
            rc = fmt_fail_path(rd, CK_ETOOBIG, CK__MSG_TOO_BIG, path);
        else if (!buf)
            rc = ck__fail(rd->err, CK_ENOMEM, NULL, rd->index, NULL);
        size_t at = 0;
        for (size_t j = 0; buf && j < n; j++) {
            if (!pieces[j].s) continue;
            if (at) buf[at++] = '\n';
            memcpy(buf + at, pieces[j].s, pieces[j].len);
            at += pieces[j].len;
        }
        if (buf) {
            buf[at] = '\0';
            *out = buf;
            *len = at;
        }
    }
    ck__free(pieces);
    return rc;
}

ck_role ck__role_of(const char *s, size_t len) {
    static const char *const names[] = {"system", "developer", "user", "assistant", "tool"};
    for (int r = 0; r < 5; r++)
        if (strlen(names[r]) == len && memcmp(s, names[r], len) == 0) return (ck_role)r;
    return CK_ROLE_OTHER;
}

const char *ck__role_name(ck_role r) {
    static const char *const names[] = {"system", "developer", "user", "assistant", "tool"};
    return (unsigned)r < 5 ? names[r] : "user";
}

/* ---- reading: the driver ---- */

int ck_list_is_tools(const ck_host_reader *reader, ck_value list) {
    if (!reader || !reader->kind || !reader->field || !reader->count || !reader->item ||
        !reader->string || reader->kind(reader->ctx, list) != CK_VALUE_ARRAY)
        return 0;
    ck__rd rd = {reader, NULL, 0, NULL, {0, 0}};
    size_t n;
    int rc = reader->count(reader->ctx, list, &n);
    if (rc < 0) return rc;
    for (size_t i = 0; i < n; i++) {
        ck_value item, role;
        if ((rc = reader->item(reader->ctx, list, i, &item)) < 0) return rc;
        if (reader->kind(reader->ctx, item) != CK_VALUE_OBJECT) return 0;
        if ((rc = reader->field(reader->ctx, item, CK_KEY_ROLE, &role)) != 0)
            return rc < 0 ? rc : 0;
        for (size_t d = 0; d < FMT_N; d++)
            if (fmt_all[d]->detect(&rd, item) == 2) return 0;
    }
    return n > 0;
}

int ck_history_read(ck_history *h, const ck_host_reader *reader, ck_value list, size_t from,
                    ck_format format, ck_format *format_out, ck_error *err) {
    ck__error_clear(err);
    if (!h || !reader || !reader->kind || !reader->field || !reader->count || !reader->item ||
        !reader->string || !reader->boolean || !reader->json || (unsigned)format >= CK_FORMAT_COUNT)
        return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    if (from != h->n_msgs)
        return ck__fail(err, CK_EINVAL, "`from` must be the number of messages read", CK_NONE,
                        "from");
    if (format != CK_FORMAT_AUTO && !ck__fmt_of(format))
        return ck__fail(err, CK_EINVAL, "this format cannot be read yet", CK_NONE, "format");
    ck__rd rd = {reader, h, 0, err, {0, 0}};
    if (reader->kind(reader->ctx, list) != CK_VALUE_ARRAY)
        return ck__fail(err, CK_ETYPE, "expected a message list", CK_NONE, "messages");
    size_t n;
    int rc = reader->count(reader->ctx, list, &n);
    if (rc < 0) return fmt_host_fail(&rd, rc);
    if (format != CK_FORMAT_AUTO) {
        if (h->dialect != CK_FORMAT_AUTO && h->dialect != format)
            return ck__fail(err, CK_EFORMAT, "the history was read in another format", CK_NONE,
                            NULL);
        h->dialect = format;
        h->dialect_decided = 1;
        h->decided_at = 0;
    }
    /* The list's length is known, so the message arrays are sized once for it. Doubling
     * alone left up to half of each unused, and the peak of a compaction holds them all. A
     * failure here only leaves the growing to ck__grow(). */
    int first_read = h->cap_parts == 0;
    if (n > h->n_msgs) {
        (void)ck__reserve((void **)&h->msgs, &h->cap_msgs, n, sizeof *h->msgs);
        (void)ck__reserve((void **)&h->msg_values, &h->cap_msg_values, n, sizeof *h->msg_values);
    }
    for (size_t i = from; i < n; i++) {
        rd.index = i;
        ck_value msg;
        if ((rc = ck__rd_item(&rd, list, i, &msg))) return rc;
        if (!h->dialect_decided) {
            /* The first message only one dialect writes decides; until then the messages are
             * the kind every chat dialect shares, and read alike in any of them. */
            const ck__fmt *best = NULL;
            int best_score = 0;
            for (size_t d = 0; d < FMT_N; d++) {
                int score = fmt_all[d]->detect(&rd, msg);
                if (score > best_score) {
                    best = fmt_all[d];
                    best_score = score;
                }
            }
            if (h->dialect == CK_FORMAT_AUTO)
                h->guess = best ? best->format : CK_FORMAT_OPENAI;
            if (best_score == 2) {
                /* The messages read before were shared ones, unless this dialect cannot read
                 * them at all (a Gemini turn has no "content"; a LangChain list after Chat
                 * Completions messages). */
                for (size_t j = 0; j < i; j++) {
                    rd.index = j;
                    if (best->detect(&rd, h->msg_values[j]) > 0) continue;
                    ck_history_truncate(h, j < from ? from : j);
                    return ck__fail(err, CK_EFORMAT, "a message of another format", j,
                                    "messages[%zu] (not %s, as messages[%zu] is)", j,
                                    best->name, i);
                }
                /* Those read in this call are read again in the dialect now known, so what
                 * only it sees in a shared message (an Anthropic block's cache_control) is
                 * seen there too. */
                if (best->format != h->dialect && from < i) {
                    ck_history_truncate(h, from);
                    for (size_t j = from; j < i; j++) {
                        ck_value again;
                        rd.index = j;
                        if ((rc = ck__rd_item(&rd, list, j, &again)) ||
                            (rc = best->read(&rd, again))) {
                            ck_history_truncate(h, j);
                            return rc;
                        }
                    }
                }
                rd.index = i;
                h->dialect = best->format;
                h->dialect_decided = 1;
                h->decided_at = i;
            } else if (h->dialect == CK_FORMAT_AUTO) {
                h->dialect = h->guess;
            }
        } else {
            /* A message that only another dialect writes is a mistake worth naming. */
            const ck__fmt *own = ck__fmt_of(h->dialect);
            if (own->detect(&rd, msg) == 0) {
                for (size_t d = 0; d < FMT_N; d++) {
                    if (fmt_all[d] == own || fmt_all[d]->detect(&rd, msg) < 2) continue;
                    return ck__fail(err, CK_EFORMAT, "a message of another format", i,
                                    "messages[%zu] (%s, not %s)", i, fmt_all[d]->name,
                                    own->name);
                }
            }
        }
        if ((rc = ck__fmt_of(h->dialect)->read(&rd, msg))) {
            ck_history_truncate(h, i);
            return rc;
        }
    }
    if (h->dialect == CK_FORMAT_AUTO) h->dialect = CK_FORMAT_OPENAI;
    if (format_out) *format_out = h->dialect;
    /* The parts' number was not known ahead: a history's first read gives back the doubling
     * slack (6 of the parts' 16 MiB on a 100,000-message history). A history read again
     * (cleared, or on from a kept prefix) keeps it: fitted, each call on a list that grew
     * would copy the whole array to grow it again. */
    if (first_read) ck__history_fit_parts(h);
    return CK_OK;
}

/* ---- reading: the Chat Completions family (openai, langchain) ---- */

int ck__rd_inner(ck__rd *rd, ck_value inner) {
    ck_history *h = rd->h;
    size_t i = h->n_msgs - 1, had = h->cap_inner_values;
    if (ck__grow((void **)&h->inner_values, &h->cap_inner_values, h->n_msgs,
                 sizeof *h->inner_values))
        return ck__fail(rd->err, CK_ENOMEM, NULL, rd->index, NULL);
    /* Messages read before the first wrapped one (or without one) have none. */
    for (size_t k = had; k < h->cap_inner_values; k++) h->inner_values[k] = (ck_value){NULL, 0};
    h->inner_values[i] = inner;
    return CK_OK;
}

int ck__rd_chat_content(ck__rd *rd, ck_value content, ck_value_kind kind, const char *at,
                        int (*item)(ck__rd *rd, ck_value item, size_t k, const char *at)) {
    ck_part p;
    memset(&p, 0, sizeof p);
    int rc;
    if (kind == CK_VALUE_STRING) {
        char where[64];
        snprintf(where, sizeof where, "%s.content", at);
        p.kind = CK_PART_TEXT;
        p.host = CK__HOST_WHOLE;
        if ((rc = ck__rd_string(rd, content, &p.text, &p.text_len, where))) return rc;
        return ck__rd_part(rd, &p, content);
    }
    if (kind == CK_VALUE_ABSENT || kind == CK_VALUE_NULL) return CK_OK;
    if (kind != CK_VALUE_ARRAY)
        return ck__rd_fail(rd, CK_ETYPE, "expected a string, a list or null", "%s.content", at);
    size_t n;
    if ((rc = ck__rd_count(rd, content, &n))) return rc;
    for (size_t k = 0; k < n && !rc; k++) {
        ck_value v;
        if (!(rc = ck__rd_item(rd, content, k, &v))) rc = item(rd, v, k, at);
    }
    return rc;
}

int ck__rd_chat_result(ck__rd *rd, ck_part *p, ck_value content, const char *where) {
    int rc = ck__rd_joined_text(rd, content, &p->text, &p->text_len, where);
    if (!rc) rc = ck__rd_part(rd, p, content);
    if (!rc && ck__rd_kind(rd, content) == CK_VALUE_ARRAY)
        rc = ck__rd_attachments(rd, content, where);
    return rc;
}

/* ---- building ---- */

ck_value ck__wr_msg_value(const ck__wr *w, size_t i) { return w->h->msg_values[i]; }

ck_value ck__wr_inner_value(const ck__wr *w, size_t i) {
    return i < w->h->cap_inner_values ? w->h->inner_values[i] : (ck_value){NULL, 0};
}

ck_value ck__wr_part_value(const ck__wr *w, size_t msg, size_t part) {
    return w->h->part_values[w->h->msgs[msg].first_part + part];
}

void ck__wr_drop(ck__wr *w, ck_value v) {
    if (v.ptr && w->b->drop) w->b->drop(w->b->ctx, v);
}

int ck__wr_string(ck__wr *w, const char *s, size_t len, ck_value *out) {
    out->ptr = NULL;
    return w->b->string(w->b->ctx, s ? s : "", s ? len : 0, out);
}

int ck__wr_set(ck__wr *w, ck_value obj, ck_key key, ck_value v) {
    return w->b->set(w->b->ctx, obj, key, v);
}

int ck__wr_set_string(ck__wr *w, ck_value obj, ck_key key, const char *s, size_t len) {
    ck_value v;
    int rc = ck__wr_string(w, s, len, &v);
    return rc ? rc : ck__wr_set(w, obj, key, v);
}

int ck__wr_push(ck__wr *w, ck_value arr, ck_value v) { return w->b->push(w->b->ctx, arr, v); }

int ck__wr_ref(ck__wr *w, ck_value v, ck_value *out) {
    out->ptr = NULL;
    return w->b->ref(w->b->ctx, v, out);
}

int ck__wr_head(ck__wr *w, const ck_out_msg *m, const char *role, ck_value *out) {
    const ck_host_builder *b = w->b;
    if (m->op == CK_OP_EDIT) return b->copy(b->ctx, ck__wr_msg_value(w, m->src), out);
    int rc = b->message ? b->message(b->ctx, (ck_value){NULL, 0}, NULL, out)
                        : b->object(b->ctx, out);
    if (!rc && (rc = ck__wr_set_string(w, *out, CK_KEY_ROLE, role, strlen(role))))
        ck__wr_drop(w, *out);
    return rc;
}

int ck__wr_replaced_item(ck__wr *w, ck_value item, ck_key key, const char *type,
                         const char *text, size_t len, ck_value *out) {
    int rc;
    out->ptr = NULL;
    if (item.ptr) {
        rc = w->b->copy(w->b->ctx, item, out);
    } else {
        rc = w->b->object(w->b->ctx, out);
        if (!rc && type) rc = ck__wr_set_string(w, *out, CK_KEY_TYPE, type, strlen(type));
    }
    if (!rc) rc = ck__wr_set_string(w, *out, key, text, len);
    if (rc) {
        ck__wr_drop(w, *out);
        out->ptr = NULL;
    }
    return rc;
}

int ck_view_build(const ck_view *view, const ck_history *h, const ck_host_builder *b,
                  ck_value *out, ck_error *err) {
    ck__error_clear(err);
    if (!view || !h || !b || !out || !b->object || !b->array || !b->string || !b->boolean ||
        !b->json || !b->set || !b->push || !b->copy || !b->ref || !b->unset)
        return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    const ck__fmt *f = ck__fmt_of(h->dialect);
    if (!f || (h->n_msgs && !h->msg_values))
        return ck__fail(err, CK_EINVAL, "the history was not read with ck_history_read()",
                        CK_NONE, NULL);
    ck__wr w = {b, h};
    ck_value list;
    int rc = b->array(b->ctx, &list);
    if (rc) return ck__fail(err, rc, NULL, CK_NONE, NULL);
    size_t n = ck_view_count(view);
    for (size_t i = 0; i < n && !rc; i++) {
        ck_out_msg m;
        ck_value v = {NULL, 0};
        if ((rc = ck_view_get(view, i, &m))) break;
        rc = m.op == CK_OP_KEEP ? ck__wr_ref(&w, h->msg_values[m.src], &v) : f->write(&w, &m, &v);
        if (!rc) rc = ck__wr_push(&w, list, v);
    }
    if (rc) {
        ck__wr_drop(&w, list);
        return ck__fail(err, rc, NULL, CK_NONE, NULL);
    }
    *out = list;
    return CK_OK;
}

int ck__rd_attachments(ck__rd *rd, ck_value content, const char *path) {
    if (ck__rd_kind(rd, content) != CK_VALUE_ARRAY) return CK_OK;
    size_t n;
    int rc = ck__rd_count(rd, content, &n);
    for (size_t j = 0; j < n && !rc; j++) {
        ck_value item, type;
        if ((rc = ck__rd_item(rd, content, j, &item))) break;
        if (ck__rd_kind(rd, item) != CK_VALUE_OBJECT) continue;
        int got = ck__rd_field(rd, item, CK_KEY_TYPE, &type);
        if (got < 0) return got;
        if (ck__rd_is(rd, item, CK_KEY_TYPE, "text") ||
            ck__rd_is(rd, item, CK_KEY_TYPE, "input_text"))
            continue;
        ck_part p;
        memset(&p, 0, sizeof p);
        /* The AI SDK's tool output content: {"type":"media","mediaType"}, image-data,
         * image-url, image-file-id. */
        int media = ck__rd_is(rd, item, CK_KEY_TYPE, "media") &&
                    fmt_starts(rd, item, CK_KEY_MEDIA_TYPE, "image/");
        p.kind = media || ck__rd_is(rd, item, CK_KEY_TYPE, "image") ||
                         ck__rd_is(rd, item, CK_KEY_TYPE, "image_url") ||
                         ck__rd_is(rd, item, CK_KEY_TYPE, "input_image") ||
                         ck__rd_is(rd, item, CK_KEY_TYPE, "image-data") ||
                         ck__rd_is(rd, item, CK_KEY_TYPE, "image-url") ||
                         ck__rd_is(rd, item, CK_KEY_TYPE, "image-file-id")
                     ? CK_PART_IMAGE
                     : CK_PART_OTHER;
        p.flags = CK_PART_ATTACHED;
        p.host = (uint32_t)j;
        (void)path;
        rc = ck__rd_part(rd, &p, item);
    }
    return rc;
}

int ck__wr_result_content(ck__wr *w, size_t msg, size_t part, const char *text, size_t len,
                          ck_value *out) {
    return ck__wr_result_content_as(w, msg, part, "text", text, len, out);
}

size_t ck__wr_attached(const ck__wr *w, size_t msg, size_t part) {
    const ck_history *h = w->h;
    const ck_part *parts = ck__msg_parts(h, msg);
    size_t n = h->msgs[msg].n_parts, attached = 0;
    while (part + 1 + attached < n && (parts[part + 1 + attached].flags & CK_PART_ATTACHED))
        attached++;
    return attached;
}

int ck__wr_result_content_as(ck__wr *w, size_t msg, size_t part, const char *type,
                             const char *text, size_t len, ck_value *out) {
    size_t attached = ck__wr_attached(w, msg, part);
    if (!attached) return ck__wr_string(w, text, len, out);
    ck_value list, item;
    int rc = w->b->array(w->b->ctx, &list);
    if (rc) return rc;
    rc = ck__wr_replaced_item(w, (ck_value){NULL, 0}, CK_KEY_TEXT, type, text, len, &item);
    if (!rc) rc = ck__wr_push(w, list, item);
    for (size_t k = 0; k < attached && !rc; k++) {
        rc = ck__wr_ref(w, ck__wr_part_value(w, msg, part + 1 + k), &item);
        if (!rc) rc = ck__wr_push(w, list, item);
    }
    if (rc) {
        ck__wr_drop(w, list);
        return rc;
    }
    *out = list;
    return CK_OK;
}

int ck__wr_content_list(ck__wr *w, const ck_out_msg *m, int (*skip)(const ck_out_part *op),
                        const char *type, ck_value *out) {
    ck_value list;
    int rc = w->b->array(w->b->ctx, &list);
    for (size_t k = 0; k < m->n_parts && !rc; k++) {
        const ck_out_part *op = &m->parts[k];
        if ((skip && skip(op)) || (op->part.flags & CK_PART_ATTACHED)) continue;
        ck_value item, own = {NULL, 0};
        if (op->src_msg != CK_NONE && op->part.host < CK__HOST_WHOLE)
            own = ck__wr_part_value(w, op->src_msg, op->src_part);
        if (own.ptr && !op->replaced)
            rc = ck__wr_ref(w, own, &item);
        else
            rc = ck__wr_replaced_item(w, own, CK_KEY_TEXT, type, op->part.text,
                                      op->part.text_len, &item);
        if (!rc) rc = ck__wr_push(w, list, item);
    }
    if (rc) {
        ck__wr_drop(w, list);
        return rc;
    }
    *out = list;
    return CK_OK;
}

int ck__rd_chat_shape(ck__rd *rd, ck_value msg, ck_value *content, size_t *n) {
    ck_value v;
    *n = 0;
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT) return 0;
    if (ck__rd_field(rd, msg, CK_KEY_ROLE, &v) <= 0) return 0;
    if (ck__rd_is(rd, msg, CK_KEY_ROLE, "tool")) return 0;
    if (ck__rd_field(rd, msg, CK_KEY_TOOL_CALLS, &v) > 0 && ck__rd_kind(rd, v) != CK_VALUE_NULL)
        return 0;
    if (ck__rd_field(rd, msg, CK_KEY_CONTENT, content) <= 0 ||
        ck__rd_kind(rd, *content) != CK_VALUE_ARRAY)
        return 1;
    return ck__rd_count(rd, *content, n) ? 0 : 1;
}

/* ---- building: the Chat Completions family (openai, langchain) and block lists ---- */

/* The part of the view that is a kept or edited tool call from the source's tool_calls. */
static int fmt_is_call(const ck_out_part *op) {
    return op->part.kind == CK_PART_TOOL_CALL && op->src_msg != CK_NONE &&
           (op->part.host & CK__HOST_CALL) && op->part.host != CK__HOST_WHOLE;
}

int ck__wr_chat_content(ck__wr *w, const ck_out_msg *m, ck_value *out, int *none) {
    size_t n_content = 0;
    const ck_out_part *only = NULL;
    *none = 0;
    for (size_t k = 0; k < m->n_parts; k++) {
        const ck_out_part *op = &m->parts[k];
        if (fmt_is_call(op) || (op->part.flags & CK_PART_ATTACHED)) continue;
        n_content++;
        if (!only) only = op;
    }
    if (!n_content) {
        *none = 1;
        return CK_OK;
    }
    /* A tool message's content is its result's text (with what is attached beside it). */
    if (m->role == CK_ROLE_TOOL && only->part.kind == CK_PART_TOOL_RESULT) {
        if (only->src_msg != CK_NONE && !only->replaced)
            return ck__wr_ref(w, ck__wr_part_value(w, only->src_msg, only->src_part), out);
        if (only->src_msg != CK_NONE)
            return ck__wr_result_content(w, only->src_msg, only->src_part, only->part.text,
                                         only->part.text_len, out);
        return ck__wr_string(w, only->part.text, only->part.text_len, out);
    }
    int whole = n_content == 1 && only->src_msg != CK_NONE && only->part.host == CK__HOST_WHOLE;
    if (whole || (m->op == CK_OP_NEW && n_content == 1)) {
        if (only->src_msg != CK_NONE && !only->replaced)
            return ck__wr_ref(w, ck__wr_part_value(w, only->src_msg, only->src_part), out);
        return ck__wr_string(w, only->part.text, only->part.text_len, out);
    }
    if (m->op == CK_OP_NEW) {
        /* Several texts of a new message join into one string. */
        ck__buf b;
        ck__buf_init(&b);
        for (size_t k = 0; k < m->n_parts; k++) {
            if (m->parts[k].part.kind != CK_PART_TEXT) continue;
            if (b.len) ck__buf_addc(&b, '\n');
            ck__buf_add(&b, m->parts[k].part.text, m->parts[k].part.text_len);
        }
        int rc = b.failed ? CK_ENOMEM : ck__wr_string(w, b.data ? b.data : "", b.len, out);
        ck__buf_dispose(&b);
        return rc;
    }
    return ck__wr_content_list(w, m, fmt_is_call, "text", out);
}

int ck__wr_chat_calls(ck__wr *w, const ck_out_msg *m, ck_value msg, ck_key key) {
    ck_value calls = {NULL, 0};
    size_t n_calls = 0;
    int rc = CK_OK;
    for (size_t k = 0; k < m->n_parts && !rc; k++) {
        const ck_out_part *op = &m->parts[k];
        if (!fmt_is_call(op)) continue;
        if (!n_calls++) rc = w->b->array(w->b->ctx, &calls);
        ck_value call;
        if (!rc) rc = ck__wr_ref(w, ck__wr_part_value(w, op->src_msg, op->src_part), &call);
        if (!rc) rc = ck__wr_push(w, calls, call);
    }
    if (!rc) return n_calls ? ck__wr_set(w, msg, key, calls) : w->b->unset(w->b->ctx, msg, key);
    if (n_calls) ck__wr_drop(w, calls);
    return rc;
}

/* Marks block `item`, written for part op, with {"type":"ephemeral"} as its cache_control: on
 * the block itself when this builder made it, else (the host's own block, by reference) on a
 * copy, so the caller's block never changes. */
static int wr_cache_mark(ck__wr *w, const ck_out_part *op, ck_value *item) {
    const ck_host_builder *b = w->b;
    int rc;
    if (op->src_msg != CK_NONE && op->part.host != CK__HOST_WHOLE && !op->replaced) {
        ck_value copy;
        ck__wr_drop(w, *item);
        *item = (ck_value){NULL, 0};
        if ((rc = b->copy(b->ctx, ck__wr_part_value(w, op->src_msg, op->src_part), &copy)))
            return rc;
        *item = copy;
    }
    ck_value mark;
    if ((rc = b->object(b->ctx, &mark))) return rc;
    rc = ck__wr_set_string(w, mark, CK_KEY_TYPE, "ephemeral", 9);
    if (rc) {
        ck__wr_drop(w, mark);
        return rc;
    }
    return ck__wr_set(w, *item, CK_KEY_CACHE_CONTROL, mark);
}

int ck__wr_block_message(ck__wr *w, const ck_out_msg *m, int new_text_string,
                         int (*block)(ck__wr *w, const ck_out_part *op, ck_value *out),
                         ck_value *out) {
    const ck_host_builder *b = w->b;
    ck_value msg, content;
    int rc;
    if (m->op == CK_OP_EDIT) {
        rc = b->copy(b->ctx, ck__wr_msg_value(w, m->src), &msg);
    } else {
        rc = b->message ? b->message(b->ctx, (ck_value){NULL, 0}, NULL, &msg)
                        : b->object(b->ctx, &msg);
        if (!rc) {
            const char *role = ck__role_name(m->role);
            rc = ck__wr_set_string(w, msg, CK_KEY_ROLE, role, strlen(role));
        }
    }
    if (rc) return rc;
    size_t visible = 0;
    const ck_out_part *only = NULL;
    for (size_t k = 0; k < m->n_parts; k++) {
        if (m->parts[k].part.flags & CK_PART_ATTACHED) continue;
        visible++;
        only = &m->parts[k];
    }
    /* A string content whose one part stays is a string again (and a new message's one text,
     * when the dialect writes those as strings). */
    int string = visible == 1 && !(m->flags & CK_MSG_CACHE_BREAKPOINT) &&
                 (m->op == CK_OP_EDIT
                      ? only->part.host == CK__HOST_WHOLE && only->src_msg == m->src &&
                            (m->flags & CK_MSG_STRING_CONTENT)
                      : new_text_string && only->part.kind == CK_PART_TEXT);
    if (string) {
        rc = only->src_msg != CK_NONE && !only->replaced
                 ? ck__wr_ref(w, ck__wr_part_value(w, only->src_msg, only->src_part), &content)
                 : ck__wr_string(w, only->part.text, only->part.text_len, &content);
    } else {
        rc = b->array(b->ctx, &content);
        for (size_t k = 0; k < m->n_parts && !rc; k++) {
            const ck_out_part *op = &m->parts[k];
            /* Attached blocks live inside their result's content. */
            if (op->part.flags & CK_PART_ATTACHED) continue;
            ck_value item;
            rc = block(w, op, &item);
            /* A block with the caller's own marker keeps it as it is (a ttl included). */
            if (!rc && op == only && (m->flags & CK_MSG_CACHE_BREAKPOINT) &&
                !(op->part.flags & CK_PART_CACHE_MARK) &&
                (rc = wr_cache_mark(w, op, &item)) && item.ptr)
                ck__wr_drop(w, item);
            if (!rc) rc = ck__wr_push(w, content, item);
        }
        if (rc) ck__wr_drop(w, content);
    }
    if (!rc) rc = ck__wr_set(w, msg, CK_KEY_CONTENT, content);
    if (rc) {
        ck__wr_drop(w, msg);
        return rc;
    }
    *out = msg;
    return CK_OK;
}

int ck__wr_copy_set(ck__wr *w, ck_value item, ck_key key, ck_value v, ck_value *out) {
    int rc = w->b->copy(w->b->ctx, item, out);
    if (rc) {
        ck__wr_drop(w, v);
        return rc;
    }
    if ((rc = ck__wr_set(w, *out, key, v))) ck__wr_drop(w, *out);
    return rc;
}

int ck__wr_plain_block(ck__wr *w, const ck_out_part *op, ck_value *out, int *rc) {
    if (op->src_msg == CK_NONE || op->part.host == CK__HOST_WHOLE) return 0;
    ck_value item = ck__wr_part_value(w, op->src_msg, op->src_part);
    if (!op->replaced) *rc = ck__wr_ref(w, item, out);
    else if (op->part.kind != CK_PART_TOOL_RESULT)
        *rc = ck__wr_replaced_item(w, item, CK_KEY_TEXT, "text", op->part.text,
                                   op->part.text_len, out);
    else return 0;
    return 1;
}
