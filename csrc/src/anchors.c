/* ck_anchors: the five anchors and the summary of a checkpoint, read from a model's reply.
 *
 * A reply is untrusted text: it may be Markdown in any of the shapes models like to produce,
 * JSON, both, or neither. Parsing therefore never fails on content. It scans the text line by
 * line (each line a constant number of times, so time stays linear), tries Markdown first,
 * then fenced blocks, then a bare JSON object, and keeps whatever it recognised. */
#include "ctxkeel.h"

#include <stdint.h>
#include <string.h>

#include "./alloc.h"
#include "./json.h"

/* The summary lives in one more slot after the anchors, so that parsing can treat it as a
 * sixth section. */
#define ANCHORS_SUMMARY CK_ANCHOR_COUNT
#define ANCHORS_SLOTS (CK_ANCHOR_COUNT + 1)

/* Header titles longer than this cannot name a section; capping them keeps a 1 MB line from
 * being folded and compared. */
#define ANCHORS_NAME_MAX 128

/* A slot whose text is NULL is N/A (for the summary: empty). Texts are NUL-terminated copies,
 * but `len` is authoritative because a reply may contain NUL bytes. */
struct ck_anchors {
    char *text[ANCHORS_SLOTS];
    size_t len[ANCHORS_SLOTS];
};

static const char *const anchor_keys[CK_ANCHOR_COUNT] = {
    "user_intent", "execution_progress", "key_decisions", "tried_solutions", "next_steps",
};

static const char *const anchor_titles[CK_ANCHOR_COUNT] = {
    "User Intent", "Execution Progress", "Key Decisions", "Tried Solutions", "Next Steps",
};

/* Section names after folding (lower case, letters and digits only) in singular form. */
static const char *const folded_names[ANCHORS_SLOTS] = {
    "userintent", "executionprogress", "keydecision", "triedsolution", "nextstep", "summary",
};

/* Spellings a model uses to say "nothing here", compared after markup is stripped and case is
 * folded. The last two are Chinese ("none", "none yet"), since Chinese prompts are common. */
static const char *const na_words[] = {
    "n/a", "na", "n.a", "none", "none yet", "null", "nil", "nothing", "nothing yet",
    "not applicable", "\xe6\x97\xa0", "\xe6\x9a\x82\xe6\x97\xa0",
};

/* ------------------------------------------------------------------------------------------ */
/* Small text helpers                                                                          */
/* ------------------------------------------------------------------------------------------ */

static int is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* strchr() would match the terminator for c == 0, and NUL bytes do occur in replies. */
static int in_set(unsigned char c, const char *set) {
    return c != 0 && strchr(set, c) != NULL;
}

static unsigned char lower(unsigned char c) {
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

static void trim_span(const char **s, size_t *n) {
    while (*n && is_space((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && is_space((unsigned char)(*s)[*n - 1])) (*n)--;
}

/* True for a Markdown thematic break ("---", "***", "_ _ _"), which models put between
 * sections and which must not end up at the end of an anchor. */
static int is_rule_line(const char *s, size_t n) {
    size_t marks = 0;
    char mark = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\r') continue;
        if (c != '-' && c != '*' && c != '_') return 0;
        if (mark && c != mark) return 0;
        mark = c;
        marks++;
    }
    return marks >= 3;
}

/* Trims a section's text and drops thematic breaks at its end. */
static void trim_section(const char **s, size_t *n) {
    trim_span(s, n);
    while (*n) {
        size_t start = *n;
        while (start && (*s)[start - 1] != '\n') start--;
        if (!is_rule_line(*s + start, *n - start)) break;
        *n = start;
        trim_span(s, n);
    }
}

/* Length of a "1." / "12)" list number and the blanks after it, or 0 when there is none. */
static size_t number_prefix(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && i < 3 && s[i] >= '0' && s[i] <= '9') i++;
    if (i == 0 || i >= n || (s[i] != '.' && s[i] != ')')) return 0;
    i++;
    if (i < n && s[i] != ' ' && s[i] != '\t') return 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    return i;
}

/* The slot that a section title or JSON key names, or -1. Case, spaces, underscores, dashes,
 * markup, emoji, a list number, a trailing "(...)" and a plural "s" are all ignored, so
 * "## 2. execution-progress", "Key Decision", "userIntent" and "next_steps" all match. */
static int name_slot(const char *s, size_t n) {
    char folded[ANCHORS_NAME_MAX + 1];
    size_t k = 0;
    trim_span(&s, &n);
    while (n && in_set((unsigned char)*s, "*_`#")) {
        s++;
        n--;
    }
    size_t skip = number_prefix(s, n);
    s += skip;
    n -= skip;
    trim_span(&s, &n);
    if (n > ANCHORS_NAME_MAX) return -1;
    if (n && s[n - 1] == ')') {
        size_t open = n;
        while (open && s[open - 1] != '(') open--;
        if (open) n = open - 1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = lower((unsigned char)s[i]);
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) folded[k++] = (char)c;
    }
    if (k == 0) return -1;
    folded[k] = '\0';
    /* A plural compares as its singular ("summaries", "next steps"), but only after the name
     * as written failed, because "progress" ends in "s" too. */
    for (int pass = 0;; pass++) {
        for (int slot = 0; slot < ANCHORS_SLOTS; slot++)
            if (strcmp(folded, folded_names[slot]) == 0) return slot;
        if (pass == 1) break;
        if (k >= 3 && memcmp(folded + k - 3, "ies", 3) == 0) {
            folded[k - 3] = 'y';
            k -= 2;
        } else if (folded[k - 1] == 's') {
            k--;
        } else {
            break;
        }
        folded[k] = '\0';
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* N/A                                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* Blanks and the markup characters in `set`, which ck_is_na() peels off both ends. */
static int na_markup(unsigned char c, const char *set) { return is_space(c) || in_set(c, set); }

int ck_is_na(const char *text, size_t len) {
    if (!text) return 1;
    const char *s = text;
    size_t n = len;
    /* Bullets, emphasis, quotes, brackets and a final period do not change what the word says:
     * "- N/A", "*None*", "(none)", "n/a." and "None。" all mean N/A. */
    for (;;) {
        size_t before = n;
        while (n && na_markup((unsigned char)*s, "-*+_`(>\"'")) {
            s++;
            n--;
        }
        while (n && na_markup((unsigned char)s[n - 1], ".*_`)\"'")) n--;
        if (n >= 3 && memcmp(s + n - 3, "\xe3\x80\x82", 3) == 0) n -= 3;
        if (n == before) break;
    }
    if (n == 0) return 1;
    for (size_t w = 0; w < sizeof na_words / sizeof na_words[0]; w++) {
        const char *word = na_words[w];
        if (strlen(word) != n) continue;
        size_t i = 0;
        while (i < n && lower((unsigned char)s[i]) == (unsigned char)word[i]) i++;
        if (i == n) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Lifecycle and access                                                                       */
/* ------------------------------------------------------------------------------------------ */

ck_anchors *ck_anchors_new(void) { return ck__calloc(1, sizeof(ck_anchors)); }

void ck_anchors_free(ck_anchors *self) {
    if (!self) return;
    for (int slot = 0; slot < ANCHORS_SLOTS; slot++) ck__free(self->text[slot]);
    ck__free(self);
}

/* Stores a copy of exactly these bytes. The old value is released only once the copy exists,
 * so that running out of memory leaves the slot as it was. */
static int slot_store(ck_anchors *self, int slot, const char *s, size_t n) {
    char *copy = NULL;
    if (s && n) {
        copy = ck__strndup(s, n);
        if (!copy) return CK_ENOMEM;
    }
    ck__free(self->text[slot]);
    self->text[slot] = copy;
    self->len[slot] = copy ? n : 0;
    return CK_OK;
}

const char *ck_anchors_get(const ck_anchors *self, ck_anchor which, size_t *len) {
    if (len) *len = 0;
    if (!self || (unsigned)which >= CK_ANCHOR_COUNT || !self->text[which]) return NULL;
    if (len) *len = self->len[which];
    return self->text[which];
}

const char *ck_anchors_summary(const ck_anchors *self, size_t *len) {
    if (len) *len = 0;
    if (!self || !self->text[ANCHORS_SUMMARY]) return "";
    if (len) *len = self->len[ANCHORS_SUMMARY];
    return self->text[ANCHORS_SUMMARY];
}

int ck_anchors_set(ck_anchors *self, ck_anchor which, const char *text, size_t len) {
    if (!self || (unsigned)which >= CK_ANCHOR_COUNT) return CK_EINVAL;
    if (!text || ck_is_na(text, len)) return slot_store(self, (int)which, NULL, 0);
    trim_span(&text, &len);
    return slot_store(self, (int)which, text, len);
}

int ck_anchors_set_summary(ck_anchors *self, const char *text, size_t len) {
    if (!self) return CK_EINVAL;
    return slot_store(self, ANCHORS_SUMMARY, text, text ? len : 0);
}

ck_anchors *ck_anchors_merge(const ck_anchors *older, const ck_anchors *newer) {
    ck_anchors *out = ck_anchors_new();
    if (!out) return NULL;
    for (int slot = 0; slot < ANCHORS_SLOTS; slot++) {
        const ck_anchors *from = (newer && newer->text[slot]) ? newer : older;
        if (!from || !from->text[slot]) continue;
        if (slot_store(out, slot, from->text[slot], from->len[slot]) != CK_OK) {
            ck_anchors_free(out);
            return NULL;
        }
    }
    return out;
}

const char *ck_anchor_key(ck_anchor which) {
    return (unsigned)which < CK_ANCHOR_COUNT ? anchor_keys[which] : NULL;
}

const char *ck_anchor_title(ck_anchor which) {
    return (unsigned)which < CK_ANCHOR_COUNT ? anchor_titles[which] : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Collecting sections                                                                        */
/* ------------------------------------------------------------------------------------------ */

typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

/* What a parse has gathered so far. A section named twice is kept twice, joined by a blank
 * line, because dropping either could lose what the model meant to carry forward. */
typedef struct section_acc {
    text_buf slot[ANCHORS_SLOTS];
    size_t found; /* sections or keys recognised, N/A ones included */
} section_acc;

/* Makes room for `extra` more bytes plus a terminator. */
static int buf_reserve(text_buf *b, size_t extra) {
    if (extra > SIZE_MAX - 1 - b->len) return -1;
    void *data = b->data;
    if (ck__grow(&data, &b->cap, b->len + extra + 1, 1)) return -1;
    b->data = data;
    return 0;
}

static int buf_add(text_buf *b, const char *s, size_t n) {
    if (buf_reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

/* Records one section's text for `slot`: trimmed, N/A dropped, CRLF turned into LF. */
static int section_add(section_acc *acc, int slot, const char *s, size_t n) {
    acc->found++;
    trim_section(&s, &n);
    if (ck_is_na(s, n)) return 0;
    text_buf *b = &acc->slot[slot];
    if (b->len && buf_add(b, "\n\n", 2)) return -1;
    if (buf_reserve(b, n)) return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') continue;
        b->data[b->len++] = s[i];
    }
    b->data[b->len] = '\0';
    return 0;
}

static void acc_dispose(section_acc *acc) {
    for (int slot = 0; slot < ANCHORS_SLOTS; slot++) ck__free(acc->slot[slot].data);
}

/* ------------------------------------------------------------------------------------------ */
/* Markdown                                                                                   */
/* ------------------------------------------------------------------------------------------ */

#define HEAD_TEXT (-2)  /* an ordinary line */
#define HEAD_OTHER (-1) /* the header of a section we do not know */

/* The parts of a header's text: "1. **Next Steps:** run tests" has a bold name, a colon and
 * an inline body starting at "run". */
typedef struct title_info {
    int slot;
    int bold, colon;
    size_t body; /* offset of the inline text; the length of the input when there is none */
} title_info;

/* True when only blanks and closing emphasis remain, as in "*Next Steps:*". */
static int only_markup(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!in_set((unsigned char)s[i], " \t*_")) return 0;
    return 1;
}

static title_info split_title(const char *s, size_t n) {
    title_info t = {-1, 0, 0, n};
    size_t i = 0, name_end = n, rest = n;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    i += number_prefix(s + i, n - i);
    size_t name = i;
    if (i + 1 < n && (s[i] == '*' || s[i] == '_') && s[i + 1] == s[i]) {
        size_t k = i + 2;
        while (k + 1 < n && !(s[k] == s[i] && s[k + 1] == s[i])) k++;
        if (k + 1 < n) {
            t.bold = 1;
            name = i + 2;
            name_end = k;
            rest = k + 2;
        }
    }
    if (!t.bold) {
        const char *colon = memchr(s + i, ':', n - i);
        name_end = colon ? (size_t)(colon - s) : n;
        rest = colon ? name_end + 1 : n;
        t.colon = colon != NULL;
    } else {
        /* "**Key Decisions:**" and "**Key Decisions**:" are the same header. */
        size_t end = name_end;
        while (end > name && (s[end - 1] == ' ' || s[end - 1] == '\t')) end--;
        if (end > name && s[end - 1] == ':') {
            t.colon = 1;
            name_end = end - 1;
        }
        while (rest < n && (s[rest] == ' ' || s[rest] == '\t')) rest++;
        if (rest < n && s[rest] == ':') {
            t.colon = 1;
            rest++;
        }
    }
    while (rest < n && (s[rest] == ' ' || s[rest] == '\t')) rest++;
    t.body = only_markup(s + rest, n - rest) ? n : rest;
    t.slot = name_slot(s + name, name_end - name);
    return t;
}

/* Classifies one line (without its line break). Returns a slot, HEAD_OTHER or HEAD_TEXT; for
 * headers also sets `*body` (where inline text starts, `n` when none) and `*level`, which
 * orders header styles from strongest to weakest: "#" to "####" are 1 to 4, a bold line
 * alone 5, a bold label with inline text or a plain "Name:" line 6, a bulleted bold label 7.
 * An unknown header only ends a section opened by a header of its level or a weaker one, so
 * "### Done" under "## Execution Progress" stays part of it. */
static int classify_line(const char *p, size_t n, size_t *body, int *level) {
    size_t i = 0, hashes = 0;
    int bullet = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t')) i++;
    while (i + hashes < n && p[i + hashes] == '#') hashes++;
    if (hashes > 4) return HEAD_TEXT;
    if (hashes == 0 && i + 1 < n && in_set((unsigned char)p[i], "-*+") &&
        (p[i + 1] == ' ' || p[i + 1] == '\t')) {
        bullet = 1;
        i += 2;
    }
    /* Only a blank after the hashes makes an unknown header: "#include" is not one. */
    int spaced = hashes && (i + hashes == n || p[i + hashes] == ' ' || p[i + hashes] == '\t');
    i += hashes;
    title_info t = split_title(p + i, n - i);
    int inline_text = t.body < n - i;
    *body = i + t.body;
    if (hashes) {
        *level = (int)hashes;
        return t.slot >= 0 ? t.slot : (spaced ? HEAD_OTHER : HEAD_TEXT);
    }
    if (bullet && !t.bold) return HEAD_TEXT;
    if (t.bold) {
        *level = bullet ? 7 : (inline_text ? 6 : 5);
        if (t.slot >= 0 && (t.colon || !inline_text)) return t.slot;
        return t.colon ? HEAD_OTHER : HEAD_TEXT;
    }
    /* A quoted name is a JSON key on a line of its own, not a header. */
    *level = 6;
    if (i < n && p[i] == '"') return HEAD_TEXT;
    return (t.slot >= 0 && t.colon && !inline_text) ? t.slot : HEAD_TEXT;
}

/* Recognises a code fence line ("```json", "~~~"): returns the fence character, or 0, and
 * sets the length of its run and the offset of its info string. */
static char fence_open(const char *p, size_t n, size_t *run, size_t *info) {
    size_t i = 0, k;
    while (i < n && i < 3 && p[i] == ' ') i++;
    if (i >= n || (p[i] != '`' && p[i] != '~')) return 0;
    for (k = i; k < n && p[k] == p[i]; k++) continue;
    if (k - i < 3) return 0;
    /* As in CommonMark, "```a``` b" is inline code, not a fence. */
    if (p[i] == '`' && memchr(p + k, '`', n - k)) return 0;
    *run = k - i;
    *info = k;
    return p[i];
}

int ck__anchors_line_is_markup(const char *p, size_t n) {
    size_t body, run, info;
    int level;
    return classify_line(p, n, &body, &level) != HEAD_TEXT || fence_open(p, n, &run, &info);
}

static int fence_closes(const char *p, size_t n, char ch, size_t run) {
    size_t r = 0, info = 0;
    if (fence_open(p, n, &r, &info) != ch || r < run) return 0;
    while (info < n && (p[info] == ' ' || p[info] == '\t')) info++;
    return info == n;
}

/* Whether a block fenced with this info string may hold Markdown sections. Code blocks may
 * not: a "# next steps" comment in a Python block is no header. */
static int prose_fence(const char *s, size_t n) {
    static const char *const langs[] = {"markdown", "md", "text", "txt"};
    trim_span(&s, &n);
    if (n == 0) return 1;
    for (size_t w = 0; w < sizeof langs / sizeof langs[0]; w++) {
        size_t k = strlen(langs[w]), i = 0;
        if (n < k || (n > k && !is_space((unsigned char)s[k]))) continue;
        while (i < k && lower((unsigned char)s[i]) == (unsigned char)langs[w][i]) i++;
        if (i == k) return 1;
    }
    return 0;
}

/* One line of `text` starting at `pos`: its length without "\r\n", and where the next starts. */
static size_t line_at(const char *text, size_t len, size_t pos, size_t *next) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - text) : len;
    *next = nl ? end + 1 : len;
    if (end > pos && text[end - 1] == '\r') end--;
    return end - pos;
}

/* Reads Markdown sections into `acc`. Lines inside code fences are never headers, so a shell
 * comment such as "# next steps" in a code block stays where it is. Returns -1 on OOM. */
static int scan_markdown(section_acc *acc, const char *text, size_t len) {
    int cur = HEAD_TEXT, cur_level = 0;
    size_t start = 0, pos = 0, next, run = 0, info;
    char fence = 0;
    while (pos < len) {
        size_t n = line_at(text, len, pos, &next), body = n;
        const char *line = text + pos;
        int level = 0, kind;
        if (fence) {
            if (fence_closes(line, n, fence, run)) fence = 0;
            kind = HEAD_TEXT;
        } else if ((fence = fence_open(line, n, &run, &info)) != 0) {
            kind = HEAD_TEXT;
        } else {
            kind = classify_line(line, n, &body, &level);
            if (kind == HEAD_OTHER && (cur == HEAD_TEXT || level > cur_level)) kind = HEAD_TEXT;
        }
        if (kind != HEAD_TEXT) {
            if (cur >= 0 && section_add(acc, cur, text + start, pos - start)) return -1;
            cur = kind;
            cur_level = level;
            start = body < n ? pos + body : next;
        }
        pos = next;
    }
    if (cur >= 0 && section_add(acc, cur, text + start, len - start)) return -1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* JSON                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Appends a JSON value that is not a string as compact JSON text. */
static int add_printed(text_buf *b, const ck__jval *item) {
    ck__buf out;
    ck__buf_init(&out);
    ck__jwriter w;
    ck__jw_init(&w, &out, 0);
    ck__jw_value(&w, item);
    int rc = out.failed ? -1 : buf_add(b, out.data ? out.data : "", out.len);
    ck__buf_dispose(&out);
    return rc;
}

/* Adds one recognised key: a string as it is (NUL bytes and all), null as N/A, an array as
 * "- item" lines, any other value as its JSON text. */
static int add_json_value(section_acc *acc, int slot, const ck__jval *item) {
    size_t n = 0;
    const char *str = ck__jstr(item, &n);
    if (str) return section_add(acc, slot, str, n);
    if (ck__jis(item, CK__JNULL)) return section_add(acc, slot, "", 0);
    text_buf tmp = {NULL, 0, 0};
    int rc = 0;
    if (ck__jis(item, CK__JARRAY)) {
        for (size_t i = 0; i < ck__jcount(item) && rc == 0; i++) {
            const ck__jval *el = ck__jat(item, i);
            if (tmp.len) rc = buf_add(&tmp, "\n", 1);
            if (rc == 0) rc = buf_add(&tmp, "- ", 2);
            if (rc == 0 && (str = ck__jstr(el, &n)) != NULL) rc = buf_add(&tmp, str, n);
            else if (rc == 0) rc = add_printed(&tmp, el);
        }
    } else {
        rc = add_printed(&tmp, item);
    }
    if (rc == 0) rc = section_add(acc, slot, tmp.data ? tmp.data : "", tmp.len);
    ck__free(tmp.data);
    return rc;
}

/* Reads a JSON object starting at `s` into `acc`; text after the object is ignored, and text
 * that is not an object with a known key adds nothing. A repeated key adds to its section, in
 * document order. Returns -1 on OOM. */
static int scan_json(section_acc *acc, const char *s, size_t n) {
    /* A model's reply is not ours to refuse: bytes that are not UTF-8 stay as they are. */
    ck__jread_options o = {CK__JREAD_TRAILING | CK__JREAD_ANY_BYTES, 0};
    ck_error err;
    ck__jdoc *doc = ck__jread(s, n, o, &err);
    if (!doc) return err.code == CK_ENOMEM ? -1 : 0;
    const ck__jval *root = ck__jdoc_root(doc);
    size_t count = ck__jis(root, CK__JOBJECT) ? ck__jcount(root) : 0;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        const ck__jmember *m = ck__jmember_at(root, i);
        int slot = m ? name_slot(m->key, m->key_len) : -1;
        if (slot >= 0) rc = add_json_value(acc, slot, &m->value);
    }
    ck__jdoc_free(doc);
    return rc;
}

/* Reads the body of one fenced block: JSON when it looks like an object, else Markdown when
 * the fence is a prose one (a reply wrapped whole in "```markdown" is common). */
static int scan_block(section_acc *acc, const char *s, size_t n, int prose) {
    const char *t = s;
    size_t tn = n;
    trim_span(&t, &tn);
    if (tn && *t == '{') return scan_json(acc, t, tn);
    return prose ? scan_markdown(acc, s, n) : 0;
}

/* Tries each fenced block in turn until one yields a section. An unterminated fence runs to
 * the end of the text. */
static int scan_fences(section_acc *acc, const char *text, size_t len) {
    size_t pos = 0, next, run = 0, info = 0;
    while (pos < len && acc->found == 0) {
        size_t n = line_at(text, len, pos, &next);
        char fence = fence_open(text + pos, n, &run, &info);
        int prose = fence && prose_fence(text + pos + info, n - info);
        pos = next;
        if (!fence) continue;
        size_t start = pos, end = len;
        while (pos < len) {
            n = line_at(text, len, pos, &next);
            if (fence_closes(text + pos, n, fence, run)) {
                end = pos;
                pos = next;
                break;
            }
            pos = next;
        }
        if (scan_block(acc, text + start, end - start, prose)) return -1;
    }
    return 0;
}

/* Tries one bare object: the first line that starts with "{", else the first "{" at all.
 * Only one attempt is made, so a reply full of braces cannot make parsing quadratic. */
static int scan_bare_json(section_acc *acc, const char *text, size_t len) {
    size_t pos = 0, next;
    while (pos < len) {
        size_t n = line_at(text, len, pos, &next), i = 0;
        while (i < n && is_space((unsigned char)text[pos + i])) i++;
        if (i < n && text[pos + i] == '{') return scan_json(acc, text + pos + i, len - pos - i);
        pos = next;
    }
    const char *brace = len ? memchr(text, '{', len) : NULL;
    return brace ? scan_json(acc, brace, len - (size_t)(brace - text)) : 0;
}

ck_anchors *ck_anchors_parse(const char *text, size_t len) {
    section_acc acc;
    memset(&acc, 0, sizeof acc);
    if (!text) len = 0;
    /* A byte-order mark would hide a header on the first line. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
        text += 3;
        len -= 3;
    }
    int rc = scan_markdown(&acc, text, len);
    if (rc == 0 && acc.found == 0) rc = scan_fences(&acc, text, len);
    if (rc == 0 && acc.found == 0) rc = scan_bare_json(&acc, text, len);
    ck_anchors *self = rc == 0 ? ck_anchors_new() : NULL;
    if (!self) {
        acc_dispose(&acc);
        return NULL;
    }
    /* The gathered buffers become the anchors' texts as they are; no second copy is made. */
    for (int slot = 0; slot < ANCHORS_SLOTS; slot++) {
        if (acc.slot[slot].len) {
            self->text[slot] = acc.slot[slot].data;
            self->len[slot] = acc.slot[slot].len;
        } else {
            ck__free(acc.slot[slot].data);
        }
    }
    return self;
}
