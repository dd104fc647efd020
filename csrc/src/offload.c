/* Offloading: the evidence a compaction writes and what stays in the view in its place. */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "./alloc.h"
#include "./extract.h"
#include "./internal.h"
#include "./offload.h"

const char CK__OFFLOAD_MARK[] = "[ctxkeel: tool output offloaded]";

int ck__is_placeholder(const char *text, size_t len) {
    size_t n = sizeof CK__OFFLOAD_MARK - 1;
    return len >= n && memcmp(text, CK__OFFLOAD_MARK, n) == 0;
}

/* How much of a caller's string (an id, a tool name) a header shows: at most `max` bytes, cut
 * on a UTF-8 boundary, and never past a control byte, so a hostile id cannot break the
 * placeholder's lines. */
static size_t offload_shown(const char *s, size_t len, size_t max) {
    size_t n = ck__clip(s, len, max);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return i;
    return n;
}

/* Printable: valid UTF-8 without control bytes, short enough to quote. */
int ck__ref_is_id(const char *s, size_t len) {
    if (len == 0 || len > 120 || ck__utf8_valid_prefix(s, len) != len) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '"' || s[i] == '\\') return 0;
    return 1;
}

/* "<id>#<16 hex digits>": the alternate id of an output whose id already held another. */
static int offload_alt_id(ck__buf *b, const char *id, size_t id_len, uint64_t hash) {
    ck__buf_add(b, id, id_len);
    ck__buf_printf(b, "#%016llx", (unsigned long long)hash);
    return b->failed ? CK_ENOMEM : CK_OK;
}

char *ck__evidence_ref(const ck__store *s, const char *id, size_t id_len, int alt,
                       uint64_t hash) {
    ck__buf b;
    ck__buf_init(&b);
    if (alt) offload_alt_id(&b, id, id_len, hash);
    else ck__buf_add(&b, id, id_len);
    if (b.failed) {
        ck__buf_dispose(&b);
        return NULL;
    }
    char *out;
    if (ck__ref_is_id(b.data ? b.data : "", b.len)) {
        out = ck__buf_take(&b, NULL);
    } else {
        out = ck__store_path(s, b.data ? b.data : "", b.len);
        ck__buf_dispose(&b);
    }
    return out;
}

/* True when the store already holds exactly `text` under `id`. */
static int offload_stored_equals(ck__store *s, const char *id, size_t id_len,
                                 const char *text, size_t len) {
    char *path = ck__store_path(s, id, id_len), *have = NULL;
    size_t have_len = 0;
    ck_error err;
    int same = path &&
               ck__store_read(s, path, strlen(path), 0, (size_t)-1, &have, &have_len, &err) ==
                   CK_OK &&
               have_len == len && (len == 0 || memcmp(have, text, len) == 0);
    ck__free(have);
    ck__free(path);
    return same;
}

int ck__evidence_put(ck__store *s, const char *id, size_t id_len, const char *text, size_t len,
                     uint64_t hash, char **ref, char **path, ck_error *err) {
    *ref = *path = NULL;
    int existed = 0, alt = 0;
    int rc = ck__store_put(s, id, id_len, text, len, &existed, err);
    if (rc) return rc;
    ck__buf altid;
    ck__buf_init(&altid);
    if (existed && !offload_stored_equals(s, id, id_len, text, len)) {
        alt = 1;
        if (offload_alt_id(&altid, id, id_len, hash)) return CK_ENOMEM;
        rc = ck__store_put(s, altid.data, altid.len, text, len, &existed, err);
        if (rc) {
            ck__buf_dispose(&altid);
            return rc;
        }
    }
    *ref = ck__evidence_ref(s, id, id_len, alt, hash);
    *path = alt ? ck__store_path(s, altid.data, altid.len) : ck__store_path(s, id, id_len);
    ck__buf_dispose(&altid);
    if (!*ref || !*path) {
        ck__free(*ref);
        ck__free(*path);
        *ref = *path = NULL;
        return CK_ENOMEM;
    }
    return CK_OK;
}

int ck__offload_store(ck__store *s, const ck_part *p, const char *tool, size_t tool_len,
                      uint64_t hash, ck__offload *o, ck_error *err) {
    memset(o, 0, sizeof *o);
    int rc = ck__evidence_put(s, p->id, p->id_len, p->text, p->text_len, hash, &o->ref, &o->path,
                              err);
    if (rc) return rc;
    o->id = ck__strndup(p->id, p->id_len);
    o->id_len = p->id_len;
    o->tool = ck__strndup(tool, tool_len);
    o->tool_len = tool_len;
    o->bytes = p->text_len;
    o->lines = ck__count_lines(p->text, p->text_len);
    o->hash = hash;
    if (!o->id || !o->tool) {
        ck__offload_dispose(o);
        return CK_ENOMEM;
    }
    return CK_OK;
}

const ck_retention *ck__retention_for(const ck_retention *policies, size_t n, const char *tool) {
    for (size_t k = 0; k < n; k++) {
        const ck_retention *r = &policies[k];
        if (!r->tool || fnmatch(r->tool, tool, 0) == 0) return r;
    }
    return NULL;
}

int ck__never_offloaded(const ck_retention *policies, size_t n, const char *tool,
                        size_t tool_len) {
    if (!n) return 0;
    char *name = ck__strndup(tool, tool_len);
    /* Out of memory here only means the output is offloaded as if no policy said otherwise. */
    const ck_retention *r = name ? ck__retention_for(policies, n, name) : NULL;
    ck__free(name);
    return r && (r->flags & CK_RETAIN_NEVER_OFFLOAD);
}

const char *ck__tool_name_of(const ck_history *h, const ck_part *result, size_t before,
                             size_t *len) {
    if (result->name_len) {
        *len = result->name_len;
        return result->name;
    }
    for (size_t i = before + 1; i-- > 0;) {
        if (h->msgs[i].role != CK_ROLE_ASSISTANT) continue;
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            if (parts[k].kind == CK_PART_TOOL_CALL && parts[k].id_len == result->id_len &&
                memcmp(parts[k].id, result->id, result->id_len) == 0) {
                *len = parts[k].name_len;
                return parts[k].name;
            }
        }
    }
    *len = 4;
    return "tool";
}

/* The lines of s[0..len): its newlines, plus a last line that has none. Outputs run to
 * megabytes of short lines, so newlines are counted eight bytes at a time: a byte of w is zero
 * where the text has '\n', and t gets the high bit of exactly those bytes (the additions
 * cannot carry from one byte into the next), which the multiplication sums. */
uint64_t ck__count_lines(const char *s, size_t len) {
    const uint64_t ones = 0x0101010101010101ull, low7 = 0x7F7F7F7F7F7F7F7Full;
    uint64_t n = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        w ^= ones * '\n';
        uint64_t t = ~(((w & low7) + low7) | w) & ~low7;
        n += ((t >> 7) * ones) >> 56;
    }
    for (; i < len; i++) n += s[i] == '\n';
    return n + (len && s[len - 1] != '\n');
}


/* Renders the placeholder for an offloaded tool output: where the full text is, its size, a
 * preview capped in lines and in bytes (so one huge line cannot come back whole), and how to
 * read the rest. The tool's retention policy says which lines the preview keeps; without one,
 * outputs that look like command, test or build results (`failed`: ck__looks_failed() of the
 * part, read only then) also keep their error lines and their last lines, which is where such
 * output says what happened. */
int ck__render_placeholder(ck__buf *b, const ck_part *p, const ck__offload *o,
                           const ck_retention *policy, int failed, size_t max_lines,
                           size_t max_bytes, int minimal) {
    /* Ids are the caller's: a huge one is shown cut, and the model is pointed at the path,
     * which the store keeps short, so the header stays small whatever the id. */
    size_t id_show = offload_shown(p->id, p->id_len, 120);
    size_t tool_show = offload_shown(o->tool, o->tool_len, 80);
    ck__buf_adds(b, CK__OFFLOAD_MARK);
    ck__buf_adds(b, "\ntool: ");
    ck__buf_add(b, o->tool, tool_show);
    ck__buf_adds(b, ", call ");
    ck__buf_add(b, p->id, id_show);
    ck__buf_printf(b, "%s: %llu lines, %zu bytes\nfull text: %s\n",
                   id_show < p->id_len ? "..." : "", (unsigned long long)o->lines, p->text_len,
                   o->path);
    ck__buf_printf(b, "read more with read_evidence(ref=\"%s\", offset=LINE, limit=N), "
                      "lines counted from 0\n",
                   o->ref);
    if (minimal) return b->failed ? CK_ENOMEM : CK_OK;
    size_t head, tail_n, errors_max;
    if (policy) {
        head = policy->head;
        tail_n = policy->tail;
        errors_max = policy->error_lines;
        if (policy->max_bytes) max_bytes = policy->max_bytes > SIZE_MAX ? SIZE_MAX
                                                                          : policy->max_bytes;
    } else {
        int commandish = failed;
        head = commandish ? max_lines / 2 : max_lines;
        tail_n = commandish ? max_lines - head : 0;
        errors_max = commandish ? 5 : 0;
    }
    max_lines = head + tail_n + errors_max;
    if (!max_lines) {
        ck__buf_adds(b, "preview: none (retention policy)\n");
        return b->failed ? CK_ENOMEM : CK_OK;
    }
    /* Line starts of the head, the error lines and the tail, chosen without copying. Each of
     * the three has its share of the byte cap, so a long head cannot crowd out the lines that
     * say what happened. */
    size_t per_line = max_bytes / max_lines;
    if (per_line < 160) per_line = 160; /* typical log lines whole; huge ones cut */
    size_t share[3] = {max_bytes / max_lines * head, max_bytes / max_lines * errors_max, 0};
    share[2] = max_bytes - share[0] - share[1];
    /* A line costs its bytes and its newline: both count against the cap. */
    size_t spent[3] = {0, 0, 0};
    size_t line_no = 0;
    const char *s = p->text, *end = p->text + p->text_len;
    ck__buf_printf(b, "preview (%s%s%s%s%s):\n", head ? "first lines" : "",
                   head && errors_max ? ", " : "", errors_max ? "error lines" : "",
                   (head || errors_max) && tail_n ? ", " : "", tail_n ? "last lines" : "");
    size_t errors_shown = 0;
    /* The tail region starts at the tail_n-th line from the end (a final newline does not
     * open another line). Only the tail is walked, so huge outputs cost little here. */
    const char *tail_from = end;
    if (tail_n) {
        const char *q = end;
        if (q > s && q[-1] == '\n') q--;
        size_t seen = 0;
        while (q > s && !(q[-1] == '\n' && ++seen == tail_n)) q--;
        tail_from = q;
    }
    size_t skipped = 0;
    while (s < end) {
        if (line_no >= head && errors_shown >= errors_max && s < tail_from) {
            /* Nothing before the tail can be kept now: skip to it, counting its lines. */
            size_t n = (size_t)ck__count_lines(s, (size_t)(tail_from - s));
            skipped += n;
            line_no += n;
            s = tail_from;
            continue;
        }
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        int pool = line_no < head ? 0 : s >= tail_from ? 2
                   : errors_shown < errors_max && ck__looks_failed(s, len, 0) ? 1 : -1;
        if (pool == 1) errors_shown++;
        if (pool >= 0 && spent[pool] < share[pool]) {
            if (skipped) {
                ck__buf_printf(b, "[... %zu lines ...]\n", skipped);
                skipped = 0;
            }
            size_t room = share[pool] - spent[pool] - 1;
            size_t keep = ck__clip(s, len, per_line < room ? per_line : room);
            ck__buf_add(b, s, keep);
            if (keep < len) ck__buf_printf(b, " [... %zu more bytes on this line]", len - keep);
            ck__buf_addc(b, '\n');
            spent[pool] += keep + 1;
        } else {
            skipped++;
        }
        line_no++;
        s = nl ? nl + 1 : end;
    }
    if (skipped) ck__buf_printf(b, "[... %zu lines ...]\n", skipped);
    return b->failed ? CK_ENOMEM : CK_OK;
}


/* The rule sentences of the part an excerpt leaves out, gathered for its note. */
typedef struct excerpt_rules {
    ck__buf *b;
    const char *text;
    size_t from, to; /* the part left out */
    size_t n, room;  /* rules written; bytes they may still take */
} excerpt_rules;

#define EXCERPT_RULES_MAX 8
#define EXCERPT_RULE_MAX 500

static int excerpt_add_rule(void *ctx, const char *s, size_t n) {
    excerpt_rules *r = ctx;
    size_t at = (size_t)(s - r->text);
    /* Only a sentence the head or the tail does not show whole. */
    if (at + n <= r->from || at >= r->to) return 0;
    if (r->n == EXCERPT_RULES_MAX || n + 3 > r->room) return 1;
    static const char first[] = "[ctxkeel: rules stated in the part left out, verbatim:\n- ";
    if (r->n) ck__buf_add(r->b, "\n- ", 3);
    else ck__buf_add(r->b, first, sizeof first - 1);
    ck__buf_add(r->b, s, n);
    r->n++;
    r->room -= n + 3;
    return 0;
}

int ck__render_excerpt(ck__buf *b, const char *text, size_t len, size_t keep, int rules,
                       const char *ref) {
    if (keep < 64) keep = 64;
    size_t head = ck__clip(text, len, keep / 2);
    /* The tail starts on a UTF-8 boundary, after a line break when one is near. */
    size_t from = len > keep / 2 ? len - keep / 2 : 0;
    if (from < head) from = head;
    while (from < len && ((unsigned char)text[from] & 0xC0) == 0x80) from++;
    for (size_t i = from; i < len && i < from + keep / 8; i++) {
        if (text[i] == '\n') {
            from = i + 1;
            break;
        }
    }
    ck__buf_add(b, text, head);
    ck__buf_printf(b, "\n[ctxkeel: %zu of %zu bytes of this message left out here; the full "
                      "text: read_evidence(ref=\"%s\")]\n",
                   from - head, len, ref);
    if (rules && from > head) {
        excerpt_rules r = {b, text, head, from, 0, keep};
        ck__rule_sentences(text, len, EXCERPT_RULE_MAX, excerpt_add_rule, &r);
        if (r.n) ck__buf_add(b, "]\n", 2);
    }
    ck__buf_add(b, text + from, len - from);
    return b->failed ? CK_ENOMEM : CK_OK;
}
