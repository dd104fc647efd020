/* Private: moving text out of the view into the evidence store, and what stays in its place:
 * the placeholder of an offloaded tool output, the excerpt (head and tail) of an over-long
 * message, and the refs by which the model reads the full text back. */
#ifndef CK_OFFLOAD_H_
#define CK_OFFLOAD_H_

#include "ctxkeel.h"

#include "./buf.h"
#include "./session.h"
#include "./store.h"

/* The marker that starts every placeholder: an output that starts with it is never offloaded
 * again. */
extern const char CK__OFFLOAD_MARK[];
/* True when a tool result's text is a placeholder already. */
int ck__is_placeholder(const char *text, size_t len);

/* The lines of s[0..len): its newlines, plus a last line that has none. */
uint64_t ck__count_lines(const char *s, size_t len);

/* True when an id is its own ref (printable UTF-8 of at most 120 bytes, no quote or
 * backslash); other ids are named by their file's path. */
int ck__ref_is_id(const char *id, size_t len);

/* The ref the model uses for evidence stored under `id` (alternate when `alt`): the id itself
 * (or "<id>#<hash>") when it is printable UTF-8 of at most 120 bytes, else the file's path,
 * which the store keeps short and safe. Caller owns the result (ck__free); NULL when out of
 * memory. */
char *ck__evidence_ref(const ck__store *s, const char *id, size_t id_len, int alt,
                       uint64_t hash);

/* Stores `text` under `id` (written once): when the id already holds the same text that is
 * the evidence; when it holds another text, it goes under the alternate "<id>#<hash>", so one
 * never hides the other. Sets *ref (ck__evidence_ref) and *path, both owned by the caller.
 * Returns CK_OK, CK_ENOMEM, or a store error with `err` filled (the caller fails open). */
int ck__evidence_put(ck__store *s, const char *id, size_t id_len, const char *text, size_t len,
                     uint64_t hash, char **ref, char **path, ck_error *err);

/* Stores a tool output (part p, of tool `tool`) and fills `o` (owned by the caller, release
 * with ck__offload_dispose). Returns as ck__evidence_put(). */
int ck__offload_store(ck__store *s, const ck_part *p, const char *tool, size_t tool_len,
                      uint64_t hash, ck__offload *o, ck_error *err);

/* The policy for a tool's outputs: the first whose pattern matches (NUL-terminated name), or
 * NULL. */
const ck_retention *ck__retention_for(const ck_retention *policies, size_t n, const char *tool);
/* True when a policy keeps this tool's outputs in the view. */
int ck__never_offloaded(const ck_retention *policies, size_t n, const char *tool,
                        size_t tool_len);

/* Renders the placeholder of an offloaded output: where the full text is, its size, a preview
 * capped in lines and in bytes, and how to read the rest. `failed`: the output looks like a
 * failed command (keeps error lines and the last lines too, when no policy says otherwise).
 * `minimal` leaves the preview out (the last resort of a view that must fit). Returns CK_OK or
 * CK_ENOMEM. */
int ck__render_placeholder(ck__buf *b, const ck_part *p, const ck__offload *o,
                           const ck_retention *policy, int failed, size_t max_lines,
                           size_t max_bytes, int minimal);

/* Renders the excerpt of an over-long text: its first and last bytes (about keep / 2 each,
 * cut at line or word boundaries) around a line that says how much was left out and where the
 * full text is (`ref`). With `rules` (a user's message), the rule sentences of the part left
 * out follow that line verbatim (at most 8, and at most `keep` bytes of them), so a rule
 * stated in the middle of a long message stays in the view. Returns CK_OK or CK_ENOMEM. */
int ck__render_excerpt(ck__buf *b, const char *text, size_t len, size_t keep, int rules,
                       const char *ref);

/* The name of the tool that made call `id`, searched backwards from message `before` (the
 * result's own `name` first, when it has one). "tool" when none is found. */
const char *ck__tool_name_of(const ck_history *h, const ck_part *result, size_t before,
                             size_t *len);

#endif
