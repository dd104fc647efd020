/* Private: the local evidence store (DESIGN section 4) and the session's audit log (section 8).
 *
 * Layout under the store directory:
 *   tool_results/<session>/<file>.txt    one evidence file per id, written once
 *   compactions/<session>.jsonl          one JSON line per compaction
 * where <session> and <file> are encoded ids (ck__store_encode_id): no id can name a path
 * outside its folder and two different ids never share a file. Directories are created 0700
 * and files 0600 on first use; files are written to a temporary name (".tmp-<pid>-...", which
 * no evidence name can be) and published with link(). Temporary files of writers that died
 * are removed the first time a store opens the session's folder.
 *
 * The store directory is resolved once, when the store is made (it may be a symbolic link:
 * the host's choice). Below it nothing is followed: every folder and file is opened relative
 * to the one above with O_NOFOLLOW, and a symbolic link anywhere there fails the operation
 * with CK_EIO and err->where = "symlink refused: <path from the store directory>". Like any
 * store error, the compactor then leaves the output in the view and records why. */
#ifndef CK_STORE_H_
#define CK_STORE_H_

#include "ctxkeel.h"

typedef struct ck__store ck__store;

/* A store over `dir` for `session_id` (both NUL-terminated, copied). Creates nothing yet.
 * With a backend (copied; NULL for none), evidence goes to it under keys
 * "tool_results/<session>/<file>.txt", which ck__store_path then returns; the audit log stays
 * under `dir`. NULL when out of memory. */
ck__store *ck__store_new(const char *dir, const char *session_id,
                         const ck_evidence_backend *backend);
void ck__store_free(ck__store *s);

/* The file-name form of an id: the id itself when it is made only of [A-Za-z0-9._-], is not
 * "." or "..", does not start with '.', and is at most 100 bytes; otherwise a readable,
 * sanitized prefix of the id followed by '~' and 16 hex digits of a hash of the whole id (case
 * included). Since '~' never appears in an id kept as itself, the two forms cannot collide, and
 * ids that differ only in case stay apart (distinct names on case-sensitive file systems, and
 * hashed when the id has characters outside the safe set). NULL when out of memory.
 * Caller owns the result; release it with ck__free(). */
char *ck__store_encode_id(const char *id, size_t len);

/* The path of the evidence file for `id`. Caller owns the result (ck__free). NULL on OOM. */
char *ck__store_path(const ck__store *s, const char *id, size_t id_len);

/* Stores `data` under `id` unless a file for that id exists already (then *existed is 1 and
 * nothing is written). Returns CK_OK, CK_ENOMEM, or CK_EIO with err->where naming the path
 * (read-only or full disk, a file where a folder should be...). A failed write leaves no
 * partial file behind. */
int ck__store_put(ck__store *s, const char *id, size_t id_len, const char *data, size_t len,
                  int *existed, ck_error *err);

/* Reads lines [offset, offset + limit) of the evidence named by `ref`: an id, or the path of a
 * file inside this session's tool_results folder (as a placeholder states it). The text is
 * exactly the stored bytes of those lines, newlines included; "" past the end. A ref naming
 * nothing gives CK_EINVAL with err->where = the ref; a path outside the store is refused the
 * same way. Caller owns *out (ck__free). */
int ck__store_read(ck__store *s, const char *ref, size_t ref_len, size_t offset, size_t limit,
                   char **out, size_t *out_len, ck_error *err);

/* Lines that contain a match of `pattern` (see regex.h: POSIX extended syntax, matched in
 * linear time) in the evidence named by `ref`, or in every evidence file of the session when
 * ref is NULL. The result is a JSON array text of {"ref": id-or-file-name, "line": the line's number counted
 * from 0 (the offset that reads it), "text": the line without its newline}, at most `max_hits` entries, files in name
 * order. A backend cannot be listed, so with one the session's evidence is `refs` (n_refs
 * NUL-terminated refs, in that order). The work of one call is capped (STORE_SEARCH_WORK);
 * a search that reaches the cap ends its array with {"ref": "", "line": 0, "text": why,
 * "cut": true}. CK_EINVAL for a bad pattern (err->where = "pattern", err->offset the byte
 * in it) or an unknown ref. Caller owns *out (ck__free). */
int ck__store_search(ck__store *s, const char *ref, size_t ref_len, const char *pattern,
                     size_t max_hits, const char *const *refs, size_t n_refs, char **out,
                     size_t *out_len, ck_error *err);

/* Sets the work cap of each later search (0: the default, STORE_SEARCH_WORK), so that tests
 * can reach it without searching hundreds of megabytes. */
void ck__store_set_search_work(ck__store *s, uint64_t work);

/* Appends one line (a newline is added) to the session's audit log, creating it 0600.
 * Returns CK_OK, CK_ENOMEM or CK_EIO (err->where = the path). */
int ck__store_append_record(ck__store *s, const char *line, size_t len, ck_error *err);

/* The last complete line of the session's audit log (a torn last line, as after a crash, is
 * skipped). *out is NULL and CK_OK when there is no log or no line. Caller owns *out. */
int ck__store_last_record(ck__store *s, char **out, size_t *out_len, ck_error *err);

/* The audit log from the newest complete line that contains `needle` to its end (the whole log
 * when no line does; a torn last line is left out). *out is NULL and CK_OK when there is no
 * log. Caller owns *out (ck__free). */
int ck__store_log_since(ck__store *s, const char *needle, char **out, size_t *out_len,
                        ck_error *err);

/* The store's key for the audit records' integrity tags (32 bytes in
 * <dir>/compactions/.key, 0600), made when absent and `create` is set. Returns CK_OK, CK_EINVAL
 * (absent), CK_EIO or CK_ENOMEM. */
int ck__store_key(ck__store *s, int create, unsigned char key[32], ck_error *err);

/* The audit log's path. Caller owns the result (ck__free). NULL on OOM. */
char *ck__store_log_path(const ck__store *s);

#endif
