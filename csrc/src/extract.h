/* Private: what the compactor extracts from history without a model: identifiers, file
 * operations, rule-stating lines, failed tool results, and the extractive summary. */
#ifndef CK_EXTRACT_H_
#define CK_EXTRACT_H_

#include "ctxkeel.h"

#include "./buf.h"

/* ---- identifiers (DESIGN section 3) ---- */

/* A ranked set of distinct identifiers: file paths (with a '/' and a dotted extension or a
 * leading '/', './', '~/'), URLs (http, https, ftp, file), commit hashes (7 to 40 hex digits
 * standing alone, with at least one digit and one letter a-f), UUIDs, error codes (shaped
 * [A-Z]{1,4}[0-9]{3,5} like E0308 or TS2304, and errno names like ENOENT) and ticket-like ids
 * (ABC-123, GH-12, #1234). */
typedef struct ck__idents ck__idents;

ck__idents *ck__idents_new(void);
void ck__idents_free(ck__idents *s);

/* Where an identifier was seen, as a rank: what the agent acted on (the user's words, the
 * agent's own calls and text) ranks above what a tool printed. */
#define CK__IDENT_OUTPUT 0u
#define CK__IDENT_ACTED 1u

/* Finds identifiers in `text` and adds them; `seq` is a position (message index) used to rank
 * newer ones first, `prio` a CK__IDENT_* rank. Returns CK_OK or CK_ENOMEM. */
int ck__idents_scan(ck__idents *s, const char *text, size_t len, size_t seq, unsigned prio);

/* Adds one identifier as it is, or raises the one there (seq and prio to the larger, counts
 * added): to carry identifiers over from an earlier checkpoint. */
int ck__idents_add(ck__idents *s, const char *id, size_t len, size_t seq, unsigned count,
                   unsigned prio);

/* Adds every identifier of `from` to `s` as ck__idents_add() does. CK_OK or CK_ENOMEM. */
int ck__idents_merge(ck__idents *s, const ck__idents *from);

/* Keeps only the `keep` best-ranked identifiers. CK_OK or CK_ENOMEM (then nothing changed). */
int ck__idents_prune_to(ck__idents *s, size_t keep);

/* Appends to `out` up to `max_items` identifiers, at most `max_bytes` bytes in all, that do not
 * occur verbatim in `summary`, in rank order (acted on first, then newest, then most frequent,
 * then by text: deterministic), one per line as "- <id>\n". Returns the number listed; *left
 * (when not NULL) gets an upper bound of how many others were not listed. */
size_t ck__idents_render(const ck__idents *s, const char *summary, size_t summary_len,
                         size_t max_items, size_t max_bytes, ck__buf *out, size_t *left);

/* Number of distinct identifiers; the i-th in ranked order (as render would list them without
 * the summary filter). Borrowed; valid until the set changes. */
size_t ck__idents_count(const ck__idents *s);
const char *ck__idents_get(const ck__idents *s, size_t i, size_t *len, size_t *seq,
                           unsigned *count, unsigned *prio);

/* ---- file operations ---- */

typedef enum ck__file_op { CK__FILE_NONE = 0, CK__FILE_READ = 1, CK__FILE_MODIFIED = 2 } ck__file_op;

/* What a tool call does to a file: its name (read, read_file, view, cat, open_file... -> read;
 * write, write_file, edit, create, str_replace, insert, apply_patch, patch... -> modified;
 * matched case-insensitively on the name or its last "_"/"." separated word) and its JSON
 * arguments (a "path", "file_path", "filename", "file" or "target_file" string; a "command"
 * argument of "view" reads, of "create"/"str_replace"/"insert"/"write" modifies, which is how
 * str_replace_based_edit_tool style tools say it). Sets *path (borrowed from `args` when it can
 * be, else from storage in `scratch`) and returns the op, or CK__FILE_NONE. */
ck__file_op ck__file_op_of(const char *name, size_t name_len, const char *args, size_t args_len,
                           ck__buf *scratch, const char **path, size_t *path_len);

/* ---- rules and failures ---- */

/* True when a line states a rule: never, always, must, do not, don't, only, avoid, from now on,
 * make sure, ensure, remember, 不要, 禁止, 必须, 务必, 一定, 只能 (case-insensitive, whole words
 * for the English ones). */
int ck__is_rule_line(const char *line, size_t len);

/* Calls `fn` for each sentence of `text` that states a rule (ck__is_rule_line), in order, with
 * the sentence trimmed of blanks and list markers. Sentences end at a line break, or at '.',
 * '!', '?' or ';' followed by a blank, or at 。！？；. A sentence longer than `max` bytes is
 * cut there (a clause of a paragraph that never ends). A non-zero return of `fn` stops the
 * walk and is returned. */
int ck__rule_sentences(const char *text, size_t len, size_t max,
                       int (*fn)(void *ctx, const char *s, size_t n), void *ctx);

/* True when a tool result looks like a failure: flagged is_error, or its text carries an error
 * signal (error:, failed, failure, exception, traceback, panic, fatal, command not found, no such
 * file, permission denied, a non-zero "exit code"/"exit status"/"returned non-zero"). */
int ck__looks_failed(const char *text, size_t len, uint32_t part_flags);

/* ck__looks_failed() of part g of `h`. With `verdicts` (one byte a part of h: 0 while unknown,
 * else 1 + the verdict), a verdict is worked out once and kept there for the next asker. */
int ck__part_failed(const ck_history *h, size_t g, unsigned char *verdicts);

/* ---- extractive summarizer ---- */

/*
 * Fills anchors from messages [start, end) of `h` (no model, deterministic):
 *   user_intent         the first user message of the whole history (the task), clipped, plus
 *                       the last user message of the span when it differs;
 *   execution_progress  the tool calls made in the span, oldest first, one line each
 *                       ("- name: <arguments clipped>"), the newest kept when over budget, with a
 *                       count line for the rest;
 *   key_decisions       short assistant statements from the span (first sentence of each
 *                       assistant text), newest kept when over budget;
 *   tried_solutions     failed tool results with the call that produced them ("- name <args>:
 *                       <first error line>");
 *   next_steps          the last assistant text of the span, clipped;
 *   summary             one line: how many messages, tool calls and failures the span held.
 * Each anchor is kept within `max_tokens` / 6 tokens (chars / 4) and cut at a line or word
 * boundary, never inside a UTF-8 sequence. Anchors with nothing to say stay N/A.
 * `failed`, when not NULL, is the verdicts table of ck__part_failed(), read and filled here.
 * Returns NULL when out of memory. Caller owns the result (ck_anchors_free).
 */
ck_anchors *ck__extractive(const ck_history *h, size_t start, size_t end, uint64_t max_tokens,
                           unsigned char *failed);

/* Cuts `len` back so that text[0..len) is at most `max` bytes, ends on a UTF-8 boundary and,
 * when possible, on a line or word boundary in the last quarter. Returns the new length. */
size_t ck__clip(const char *text, size_t len, size_t max);

#endif
