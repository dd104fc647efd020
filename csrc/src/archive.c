/* The archive of a folded span: the messages a checkpoint stands for, written to the evidence
 * store before they leave the view, as plain lines the read_evidence tool pages through and
 * its pattern search finds. */
#include <string.h>

#include "./compaction.h"
#include "./extract.h"

static const char *archive_role(ck_role r) {
    static const char *const names[] = {"system", "developer", "user", "assistant", "tool",
                                        "other"};
    return (unsigned)r <= CK_ROLE_OTHER ? names[r] : "other";
}

/* Appends text and counts its lines into *line; the text always ends with a line break. */
static void archive_text(ck__buf *b, const char *text, size_t len, uint64_t *line) {
    ck__buf_add(b, text, len);
    for (const char *p = text, *end = text + len; (p = memchr(p, '\n', (size_t)(end - p)));
         p++)
        (*line)++;
    if (!len || text[len - 1] != '\n') {
        ck__buf_addc(b, '\n');
        (*line)++;
    }
}

void ck__archive_header(ck__buf *out, const char *session, size_t from, uint64_t *line) {
    ck__buf_adds(out, "[ctxkeel archive] session ");
    ck__buf_add_inline(out, session, strlen(session), 80);
    ck__buf_printf(out, ": messages from %zu of the history, as they were before the "
                        "checkpoint replaced them\n",
                   from);
    (*line)++;
}

void ck__archive_footer(ck__buf *out, size_t from, size_t to, uint64_t *line) {
    ck__buf_printf(out, "[end of the archive of messages %zu to %zu]\n", from, to ? to - 1 : 0);
    (*line)++;
}

void ck__archive_message(ck__buf *out, const ck_history *h, size_t i,
                         const char *const *subst, const size_t *subst_len, uint64_t *line) {
    ck__buf_printf(out, "=== message %zu: %s ===\n", i, archive_role(h->msgs[i].role));
    (*line)++;
    const ck_part *parts = ck__msg_parts(h, i);
    for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
        const ck_part *p = &parts[k];
        size_t g = h->msgs[i].first_part + k;
        const char *text = subst[g] ? subst[g] : p->text;
        size_t len = subst[g] ? subst_len[g] : p->text_len;
        switch (p->kind) {
            case CK_PART_TOOL_CALL:
                ck__buf_adds(out, "--- tool call ");
                ck__buf_add_inline(out, p->name, p->name_len, 200);
                ck__buf_adds(out, " (id ");
                ck__buf_add_inline(out, p->id, p->id_len, 200);
                ck__buf_adds(out, ") ---\n");
                (*line)++;
                archive_text(out, text, len, line);
                break;
            case CK_PART_TOOL_RESULT:
                ck__buf_adds(out, "--- tool result of call ");
                ck__buf_add_inline(out, p->id, p->id_len, 200);
                ck__buf_adds(out, (p->flags & CK_PART_IS_ERROR) ? " (error) ---\n" : " ---\n");
                (*line)++;
                archive_text(out, text, len, line);
                break;
            case CK_PART_IMAGE:
                ck__buf_adds(out, "(an image)\n");
                (*line)++;
                break;
            default:
                if (len) archive_text(out, text, len, line);
        }
    }
}
