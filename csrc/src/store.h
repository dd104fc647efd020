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
 * With a backend (ck_evidence_backend) evidence goes to it under the same relative names. When
 * that backend also has put_new and list, the audit log and the state resumed from it go
 * there too, one object per record, and nothing of the session is left on the local disk:
 *   compactions/<session>/<seq>.json      record number seq (1, 2, ...; 20 digits, zero-padded
 *                                         so byte order is number order), one JSON line
 *   compactions/.key                      the audit key (64 hex digits), shared by sessions
 * Each record is created with put_new, so a seq has exactly one writer: a second writer of
 * the same seq gets CK_ECONFLICT and nothing it wrote replaces the first one's record. The
 * objects belong to ctxkeel: the host may copy or delete whole sessions, and keys under the
 * prefix that are not "<20 digits>.json" are ignored. A backend without put_new or list keeps
 * the audit log in files under the store directory, as without a backend.
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
 * under `dir` unless the backend has put_new and list (see above). NULL when out of memory. */
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
 * partial file behind. The file's data is synced before its name appears; the name itself is
 * durable after the next ck__store_sync(). */
int ck__store_put(ck__store *s, const char *id, size_t id_len, const char *data, size_t len,
                  int *existed, ck_error *err);

/* Makes the names ck__store_put() published since the last call durable: one fsync of the
 * session's evidence folder, if any name is new (each file's data was synced before its name
 * appeared). The core calls it before a record is appended and before each public call that
 * stored evidence returns, so a ref handed out or logged always names a durable file. */
void ck__store_sync(ck__store *s);

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

/* Appends one line (a newline is added) to the session's audit log, creating it 0600; in the
 * backend, creates record `seq` (1-based) instead, or gives CK_ECONFLICT (err->where = the
 * key) when another writer created it first. Returns CK_OK, CK_ECONFLICT, CK_ENOMEM or CK_EIO
 * (err->where = the path or key). */
int ck__store_append_record(ck__store *s, uint64_t seq, const char *line, size_t len,
                            ck_error *err);

/* Whether the records live in the backend (it has put_new and list). */
int ck__store_records_remote(const ck__store *s);

/* The newest record seq in the backend, listed now (0: none, or records are local). */
int ck__store_newest_record(ck__store *s, uint64_t *seq, ck_error *err);

/* The newest record seq this store has listed or written (0 when none). */
uint64_t ck__store_records_seen(const ck__store *s);

/* The last complete line of the session's audit log (a torn last line, as after a crash, is
 * skipped), or the newest record in the backend. *out is NULL and CK_OK when there is no log or no line. Caller owns *out. */
int ck__store_last_record(ck__store *s, char **out, size_t *out_len, ck_error *err);

/* The audit log from the newest complete line that contains `needle` to its end (the whole log
 * when no line does; a torn last line is left out). In the backend: the records from the newest
 * that contains it to the newest, one per line in seq order, without the last newline. *out is NULL and CK_OK when there is no
 * log. Caller owns *out (ck__free). */
int ck__store_log_since(ck__store *s, const char *needle, char **out, size_t *out_len,
                        ck_error *err);

/* The store's key for the audit records' integrity tags (32 bytes in
 * <dir>/compactions/.key, 0600, or 64 hex digits in the backend's compactions/.key, created
 * with put_new), made when absent and `create` is set. Returns CK_OK, CK_EINVAL
 * (absent), CK_EIO or CK_ENOMEM. */
int ck__store_key(ck__store *s, int create, unsigned char key[32], ck_error *err);

/* The audit log's path. Caller owns the result (ck__free). NULL on OOM. */
char *ck__store_log_path(const ck__store *s);

#endif
