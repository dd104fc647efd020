/* The evidence store (DESIGN section 4) and the audit log (section 8): file names that no id
 * can turn into a path outside its folder, files written once and atomically, paging and
 * regular-expression search over the stored lines, and an append-only JSON-lines log.
 *
 * What the store trusts: the directory the host names (store_dir), which may itself be a
 * symbolic link, resolved once when the store is made. What it does not trust: anything
 * below it, which tools, models or other processes may have planted. So every component
 * below the root is opened with openat() and O_NOFOLLOW, relative to the folder above it: a
 * symbolic link anywhere there (tool_results, a session's folder, compactions, a file) is
 * refused as an I/O error, never followed, and so a write cannot land outside the store. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "./alloc.h"
#include "./buf.h"
#include "./hash.h"
#include "./internal.h"
#include "./regex.h"
#include "./store.h"

struct ck__store {
    char *root;     /* the store directory, symbolic links resolved when the store was made */
    char *results;  /* <dir>/tool_results/<session>, or tool_results/<session> with a backend */
    char *results_real; /* <root>/tool_results/<session>, for refs that spell it otherwise */
    char *session;  /* the encoded session id */
    char *log_dir;  /* <dir>/compactions */
    char *log_path; /* <dir>/compactions/<session>.jsonl */
    ck_evidence_backend be; /* be.get NULL: evidence lives in files under `results` */
    char *rec_prefix;       /* compactions/<session>/, the records' keys in the backend */
    uint64_t seen_seq;      /* the newest record seq this store listed or wrote */
    atomic_int swept;       /* the session's folder was cleared of dead temporary files */
    int unsynced;           /* names were published in it since its last fsync (ck__store_sync) */
    uint64_t search_work;   /* the work cap of one search */
};

/* Whether the audit records live in the backend: only one with put_new and list can keep
 * them (create-only objects, found again by listing). */
static int store_records_remote(const ck__store *s) {
    return s->be.get && s->be.put_new && s->be.list;
}

/* Ids kept as themselves are at most this long; hashed ones keep a prefix of this length. */
#define STORE_PLAIN_MAX 100
#define STORE_PREFIX_MAX 40

/* Reads go through a stack chunk of this size, so paging a huge file costs no heap. */
#define STORE_CHUNK 16384

/* The work one search may do, in the matcher's units (about a byte scanned each): a second or
 * so, after which the hits found so far come back with a note that the search was cut. */
#define STORE_SEARCH_WORK ((uint64_t)1 << 27)

/* Temporary files are named ".tmp-<pid>-<counter>-<noise>": evidence names never start with
 * a dot, and the pid says whether the writer can still be alive. */
#define STORE_TMP_PREFIX ".tmp-"

/* File names persist across versions and must never mix two ids, so their hashed part is a
 * standard hash (the first 8 bytes of SHA-256, which the bindings can recompute with hashlib or
 * crypto) rather than a fast table hash whose collisions are easy to construct. */

/* ---- names and paths ---- */

static int store_safe_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

char *ck__store_encode_id(const char *id, size_t len) {
    /* "." and ".." start with a dot, so the leading-dot rule covers them, and it also keeps
     * evidence apart from the dot-named temporary files. The empty id is hashed too. */
    int plain = len > 0 && len <= STORE_PLAIN_MAX && id[0] != '.';
    for (size_t i = 0; plain && i < len; i++) plain = store_safe_byte((unsigned char)id[i]);
    if (plain) return ck__strndup(id, len);

    size_t keep = len < STORE_PREFIX_MAX ? len : STORE_PREFIX_MAX;
    char *out = ck__malloc(keep + 18);
    if (!out) return NULL;
    for (size_t i = 0; i < keep; i++)
        out[i] = store_safe_byte((unsigned char)id[i]) ? id[i] : '_';
    if (keep && out[0] == '.') out[0] = '_';
    uint64_t hash = ck__sha256_prefix64(id, len);
    out[keep] = '~';
    for (int i = 0; i < 16; i++)
        out[keep + 1 + i] = "0123456789abcdef"[(hash >> (60 - 4 * i)) & 15];
    out[keep + 17] = '\0';
    return out;
}

/* a + b + c as one new string; NULL when out of memory. */
static char *store_concat(const char *a, const char *b, const char *c) {
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *out = ck__malloc(la + lb + lc + 1);
    if (!out) return NULL;
    memcpy(out, a, la);
    memcpy(out + la, b, lb);
    memcpy(out + la + lb, c, lc + 1);
    return out;
}

/* The store directory `dir` as the file system names it now: every symbolic link resolved
 * (where the host put the store is its own choice, followed this once), or for a directory
 * not made yet, its deepest existing ancestor resolved and the rest kept as spelled. `dir`
 * as it is when it cannot be resolved: the first use then reports why. NULL on OOM. */
static char *store_resolve(const char *dir) {
    char real[PATH_MAX];
    size_t len = strlen(dir);
    char *head = ck__strndup(dir, len);
    if (!head) return NULL;
    size_t cut = len; /* head[cut..] is the part not resolved (head[cut] is '/' or NUL) */
    for (;;) {
        if (realpath(head[0] ? head : "/", real)) {
            const char *sep = cut < len && strcmp(real, "/") != 0 ? "/" : "";
            char *out = store_concat(real, sep, cut < len ? dir + cut + 1 : "");
            ck__free(head);
            return out;
        }
        char *slash = errno == ENOENT ? strrchr(head, '/') : NULL;
        if (!slash && errno == ENOENT && head[0] && strcmp(head, ".") != 0) {
            /* A relative path whose first component is missing: resolve the current folder. */
            if (!realpath(".", real)) break;
            char *out = store_concat(real, "/", dir);
            ck__free(head);
            return out;
        }
        if (!slash) break;
        *slash = '\0';
        cut = (size_t)(slash - head);
    }
    ck__free(head);
    return ck__strndup(dir, len);
}

ck__store *ck__store_new(const char *dir, const char *session_id,
                         const ck_evidence_backend *backend) {
    if (!dir || !session_id) return NULL;
    ck__store *s = ck__calloc(1, sizeof *s);
    char *base = NULL;
    if (!s || !(s->session = ck__store_encode_id(session_id, strlen(session_id)))) goto fail;
    /* Trailing slashes are dropped so that paths compare equal to what placeholders state;
     * an empty dir means the current folder rather than the root. */
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/') dlen--;
    base = dlen ? ck__strndup(dir, dlen) : ck__strndup(".", 1);
    if (!base || !(s->root = store_resolve(base))) goto fail;
    const char *sep = strcmp(base, "/") == 0 ? "" : "/";
    const char *real_sep = strcmp(s->root, "/") == 0 ? "" : "/";
    /* With a backend, keys are the same relative names the files would have. */
    char *tools = backend ? store_concat("tool_results/", "", "")
                          : store_concat(base, sep, "tool_results/");
    if (tools) s->results = store_concat(tools, s->session, "");
    ck__free(tools);
    tools = store_concat(s->root, real_sep, "tool_results/");
    if (tools) s->results_real = store_concat(tools, s->session, "");
    ck__free(tools);
    if (backend) s->be = *backend;
    if (store_records_remote(s) && !(s->rec_prefix = store_concat("compactions/", s->session, "/")))
        goto fail;
    s->search_work = STORE_SEARCH_WORK;
    s->log_dir = store_concat(base, sep, "compactions");
    if (s->log_dir) {
        char *slash = store_concat(s->log_dir, "/", s->session);
        if (slash) s->log_path = store_concat(slash, ".jsonl", "");
        ck__free(slash);
    }
    if (!s->results || !s->results_real || !s->log_dir || !s->log_path) goto fail;
    ck__free(base);
    return s;
fail:
    ck__free(base);
    ck__store_free(s);
    return NULL;
}

void ck__store_free(ck__store *s) {
    if (!s) return;
    ck__free(s->root);
    ck__free(s->results);
    ck__free(s->results_real);
    ck__free(s->session);
    ck__free(s->log_dir);
    ck__free(s->log_path);
    ck__free(s->rec_prefix);
    ck__free(s);
}

/* The evidence file name of `id`: its encoded form and ".txt". NULL on OOM. */
static char *store_file_name(const char *id, size_t id_len) {
    char *name = ck__store_encode_id(id, id_len);
    char *file = name ? store_concat(name, ".txt", "") : NULL;
    ck__free(name);
    return file;
}

char *ck__store_path(const ck__store *s, const char *id, size_t id_len) {
    char *name = store_file_name(id, id_len);
    char *path = name ? store_concat(s->results, "/", name) : NULL;
    ck__free(name);
    return path;
}

void ck__store_set_search_work(ck__store *s, uint64_t work) {
    s->search_work = work ? work : STORE_SEARCH_WORK;
}

char *ck__store_log_path(const ck__store *s) {
    return ck__strndup(s->log_path, strlen(s->log_path));
}

int ck_backend_timeout(double seconds, double *effective, ck_error *err) {
    ck__error_clear(err);
    if (seconds == 0) seconds = CK_BACKEND_TIMEOUT_DEFAULT;
    /* Written so that NaN fails. */
    if (!(seconds > 0 && seconds <= CK_BACKEND_TIMEOUT_MAX))
        return ck__fail(err, CK_EINVAL, "must be a number of seconds in (0, 86400]", CK_NONE,
                        "backend_timeout");
    if (effective) *effective = seconds;
    return CK_OK;
}

/* ---- low-level I/O ---- */

/* A static description of an I/O failure, since errno itself is not part of the API. */
static const char *store_io_msg(int e) {
    switch (e) {
        case ENOSPC:
        case EFBIG:
#ifdef EDQUOT
        case EDQUOT:
#endif
            return "no space left for the file";
        case EACCES:
        case EPERM:
            return "permission denied";
        case EROFS:
            return "read-only file system";
        case ENOTDIR:
        case EEXIST:
            return "a file is where a folder should be";
        case ENOENT:
            return "a folder on the path does not exist";
        default:
            return "input/output error";
    }
}

static int store_io_fail(ck_error *err, int e, const char *path) {
    return ck__fail(err, CK_EIO, store_io_msg(e), CK_NONE, "%s", path);
}

static const char STORE_SYMLINK_MSG[] =
    "a symbolic link inside the store was refused (the store follows none below its folder)";

/* A symbolic link found at `rel` (a path from the store's folder). */
static int store_symlink_fail(ck_error *err, const char *rel) {
    return ck__fail(err, CK_EIO, STORE_SYMLINK_MSG, CK_NONE, "symlink refused: %s", rel);
}

/* After openat() of `name` in `dir` failed with `e`: whether a symbolic link is there. */
static int store_is_symlink(int dir, const char *name, int e) {
    struct stat st;
    return (e == ELOOP || e == ENOTDIR || e == EMLINK) &&
           fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

/* After a failed mkdir(): 0 when it failed because the folder is there already, else -1 with
 * errno set (ENOTDIR when a non-folder is in the way). */
static int store_mkdir_failed(const char *path) {
    struct stat st;
    if (errno != EEXIST) return -1;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    errno = ENOTDIR;
    return -1;
}

/* Creates the store's own folder `path` and its missing parents, each 0700. These are the
 * host's folders, named by the host, so they are made by path. Returns 0, or -1 with errno. */
static int store_mkdirs(char *path) {
    /* Backs up to the deepest folder that exists, cutting the string at each '/', then makes
     * the ones below it on the way forward, restoring each cut. */
    size_t n = strlen(path), end = n;
    int rc;
    while ((rc = mkdir(path, 0700)) != 0 && errno == ENOENT) {
        char *slash = strrchr(path, '/');
        if (!slash || slash == path) break;
        *slash = '\0';
        end = (size_t)(slash - path);
    }
    if (rc) rc = store_mkdir_failed(path);
    while (end < n) {
        path[end] = '/';
        end += strlen(path + end);
        if (!rc && mkdir(path, 0700) != 0) rc = store_mkdir_failed(path);
    }
    return rc;
}

static int store_write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        size_t chunk = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
        ssize_t n = write(fd, data, chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int store_pread_all(int fd, char *buf, size_t len, off_t at) {
    while (len > 0) {
        ssize_t n = pread(fd, buf, len, at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1; /* an error, or the file shrank under us */
        buf += n;
        len -= (size_t)n;
        at += n;
    }
    return 0;
}

static ssize_t store_read_some(int fd, char *buf, size_t len) {
    ssize_t n;
    do n = read(fd, buf, len);
    while (n < 0 && errno == EINTR);
    return n;
}

static int store_openat(int dir, const char *name, int flags, mode_t mode) {
    int fd;
    do fd = openat(dir, name, flags | O_CLOEXEC | O_NOFOLLOW, mode);
    while (fd < 0 && errno == EINTR);
    return fd;
}

/* ---- folders, opened below the root without following links ---- */

/* Outcomes of opening, beside an fd and the ck_status codes (which are all above -100). */
enum { STORE_MISSING = -100, STORE_REFUSED = -101 };

/* The two folders the store uses, as components below the root. */
typedef enum { STORE_EVIDENCE, STORE_LOG } store_folder;

/* Opens the store's own folder (making it when `create`): the fd, STORE_MISSING, or an error
 * code with err naming `shown`. */
static int store_open_root(const ck__store *s, int create, const char *shown, ck_error *err) {
    int fd;
    do fd = open(s->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0 && errno == ENOENT && create) {
        char *path = ck__strndup(s->root, strlen(s->root));
        if (!path) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        int made = store_mkdirs(path);
        int e = errno;
        ck__free(path);
        if (made) return store_io_fail(err, e, shown);
        do fd = open(s->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
    }
    if (fd >= 0) return fd;
    int e = errno;
    if (e == ENOENT && !create) return STORE_MISSING;
    struct stat st;
    /* The folder was resolved when the store was made; a link put there since is not. */
    if (lstat(s->root, &st) == 0 && S_ISLNK(st.st_mode))
        return ck__fail(err, CK_EIO, STORE_SYMLINK_MSG, CK_NONE, "symlink refused: %s", s->root);
    return store_io_fail(err, e, shown);
}

/* Opens `which` (making missing folders 0700 when `create`): the fd, STORE_MISSING (some
 * folder is not there and !create), or an error code with err filled: a symbolic link on the
 * way is refused with its path from the root, other failures name `shown` (the folder as
 * placeholders spell it). A folder made here is made durable by syncing its parent. */
static int store_open_folder(ck__store *s, store_folder which, int create, const char *shown,
                             ck_error *err) {
    const char *names[2] = {"tool_results", s->session};
    size_t depth = 2;
    if (which == STORE_LOG) {
        names[0] = "compactions";
        depth = 1;
    }
    int fd = store_open_root(s, create, shown, err);
    for (size_t i = 0; fd >= 0 && i < depth; i++) {
        int next = store_openat(fd, names[i], O_RDONLY | O_DIRECTORY, 0);
        if (next < 0 && errno == ENOENT && create) {
            /* EEXIST: another writer made it a moment ago. Any other failure keeps errno. */
            int made = mkdirat(fd, names[i], 0700) == 0;
            if (made) (void)fsync(fd);
            if (made || errno == EEXIST)
                next = store_openat(fd, names[i], O_RDONLY | O_DIRECTORY, 0);
        }
        if (next >= 0) {
            close(fd);
            fd = next;
            continue;
        }
        int e = errno;
        if (store_is_symlink(fd, names[i], e)) {
            char rel[160];
            snprintf(rel, sizeof rel, "%s%s%s", names[0], i ? "/" : "", i ? names[1] : "");
            next = store_symlink_fail(err, rel);
        } else if (e == ENOENT && !create) {
            next = STORE_MISSING;
        } else {
            next = store_io_fail(err, e, shown);
        }
        close(fd);
        fd = next;
    }
    return fd;
}

/* Opens file `name` of folder `dir` for reading when it is a regular file: the fd, or
 * STORE_MISSING, or STORE_REFUSED (a FIFO, a socket, a folder...), or an error code with err
 * filled (a symbolic link, refused; an I/O error naming `shown`). O_NONBLOCK keeps a FIFO
 * planted there from hanging the call; it does nothing to regular files. */
static int store_open_file(int dir, const char *name, const char *rel, const char *shown,
                           ck_error *err) {
    int fd = store_openat(dir, name, O_RDONLY | O_NONBLOCK, 0);
    int e = errno;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) != 0) {
        e = errno;
        close(fd);
        return store_io_fail(err, e, shown);
    }
    if (fd < 0) {
        if (store_is_symlink(dir, name, e)) return store_symlink_fail(err, rel);
        if (e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG) return STORE_MISSING;
        if (e == ELOOP || e == EMLINK || e == ENXIO) return STORE_REFUSED;
        return store_io_fail(err, e, shown);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return STORE_REFUSED;
    }
    return fd;
}

/* Removes the temporary files that writers which are no longer running left in the
 * session's folder (killed during a write), once per store: a name that starts ".tmp-<pid>-"
 * whose process is gone. The files of live writers, this process's included, stay. */
static void store_sweep(ck__store *s, int dir) {
    if (atomic_exchange(&s->swept, 1)) return;
    int fd = store_openat(dir, ".", O_RDONLY | O_DIRECTORY, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    long self = (long)getpid();
    struct dirent *ent;
    size_t plen = strlen(STORE_TMP_PREFIX);
    while ((ent = readdir(d)) != NULL) {
        const char *name = ent->d_name;
        if (strncmp(name, STORE_TMP_PREFIX, plen) != 0) continue;
        char *end = NULL;
        errno = 0;
        long pid = strtol(name + plen, &end, 10);
        if (errno || end == name + plen || *end != '-' || pid <= 0 || pid == self ||
            pid > (long)INT32_MAX)
            continue;
        /* kill(pid, 0) fails with ESRCH only when no such process exists (EPERM: it does,
         * under another user). */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        (void)unlinkat(dir, name, 0);
    }
    closedir(d);
}

/* Only the name-uniqueness of temporary files depends on this counter; O_EXCL is what makes
 * them safe, so the counter being shared by every store in the process is harmless. */
static atomic_uint store_temp_counter;

/* Creates a fresh temporary file in folder `dir`, writing its name into `tmp` (64 bytes).
 * Returns the fd or -1 with errno set. */
static int store_temp_open(int dir, char *tmp, size_t tmp_size) {
    for (int attempt = 0; attempt < 32; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t noise = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^
                         (uint64_t)(uintptr_t)tmp ^ ((uint64_t)attempt << 48);
        noise ^= noise >> 31;
        noise *= 0xbf58476d1ce4e5b9ull;
        noise ^= noise >> 29;
        unsigned count = atomic_fetch_add(&store_temp_counter, 1u);
        snprintf(tmp, tmp_size, STORE_TMP_PREFIX "%ld-%u-%016llx", (long)getpid(), count,
                 (unsigned long long)noise);
        int fd = store_openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd >= 0 || (errno != EEXIST && errno != EINTR)) return fd;
    }
    errno = EEXIST;
    return -1;
}

/* ---- the backend ---- */

/* A backend call's failure as a store error: the callback's reason (in err->where) is kept. */
static int store_backend_fail(ck_error *err, int rc, const char *what, const char *key) {
    if (rc == CK_ENOMEM) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    char why[sizeof err->where];
    snprintf(why, sizeof why, "%s", err && err->where[0] ? err->where : ck_strerror(rc));
    return ck__fail(err, CK_EIO, what, CK_NONE, "%s: %s", key, why);
}

/* The backend's text under `key`: *out NULL when nothing is stored. */
static int store_backend_get(const ck__store *s, const char *key, char **out, size_t *out_len,
                             ck_error *err) {
    *out = NULL;
    *out_len = 0;
    ck__error_clear(err);
    if (err) err->where[0] = '\0';
    int rc = s->be.get(s->be.ctx, key, out, out_len, err);
    if (rc != CK_OK) {
        ck__free(*out);
        *out = NULL;
        return store_backend_fail(err, rc, "the evidence backend could not read", key);
    }
    if (!*out) *out_len = 0;
    return CK_OK;
}

static int store_backend_put(ck__store *s, const char *id, size_t id_len, const char *data,
                             size_t len, int *existed, ck_error *err) {
    char *key = ck__store_path(s, id, id_len);
    if (!key) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    char *have;
    size_t have_len;
    int rc = store_backend_get(s, key, &have, &have_len, err);
    if (!rc && have) *existed = 1;
    ck__free(have);
    if (!rc && !*existed) {
        if (err) err->where[0] = '\0';
        rc = s->be.put(s->be.ctx, key, data, len, err);
        if (rc) rc = store_backend_fail(err, rc, "the evidence backend could not store", key);
    }
    ck__free(key);
    return rc;
}

/* ---- writing evidence ---- */

/* Publishes temporary file `tmp` of folder `dir` as `name`. link() publishes the file only if
 * the name is still free, so a racing writer of the same id can never replace a file already
 * there; file systems without hard links fall back to rename(), which is atomic but may
 * replace a twin written a moment earlier. Returns 0 (*existed set when the name was taken),
 * or -1 with errno set. The temporary name is gone either way. */
static int store_publish(int dir, const char *tmp, const char *name, int *existed) {
    int rc = 0;
    if (linkat(dir, tmp, dir, name, 0) != 0) {
        int e = errno;
        struct stat st;
        if (e == EEXIST) {
            *existed = 1;
        } else if (e == EPERM || e == ENOTSUP || e == EOPNOTSUPP || e == EXDEV || e == EMLINK ||
                   e == ENOSYS) {
            if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                *existed = 1;
            } else if (renameat(dir, tmp, dir, name) == 0) {
                return 0;
            } else {
                e = errno;
                rc = -1;
            }
        } else {
            rc = -1;
        }
        errno = e;
    }
    int e = errno;
    (void)unlinkat(dir, tmp, 0);
    errno = e;
    return rc;
}

int ck__store_put(ck__store *s, const char *id, size_t id_len, const char *data, size_t len,
                  int *existed, ck_error *err) {
    ck__error_clear(err);
    int ignored;
    if (!existed) existed = &ignored;
    *existed = 0;
    if (s->be.get) return store_backend_put(s, id, id_len, data, len, existed, err);
    char *name = store_file_name(id, id_len);
    char *path = name ? store_concat(s->results, "/", name) : NULL;
    char rel[STORE_PLAIN_MAX * 3 + 64];
    int rc = CK_OK, fd = -1, dir = -1;
    if (!path) {
        rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        goto done;
    }
    snprintf(rel, sizeof rel, "tool_results/%s/%s", s->session, name);
    dir = store_open_folder(s, STORE_EVIDENCE, 1, s->results, err);
    if (dir < 0) {
        rc = dir;
        goto done;
    }
    store_sweep(s, dir);
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) rc = store_symlink_fail(err, rel);
        else *existed = 1;
        goto done;
    }
    char tmp[64];
    fd = store_temp_open(dir, tmp, sizeof tmp);
    if (fd < 0) {
        rc = store_io_fail(err, errno, path);
        goto done;
    }
    /* The data reaches the disk before the name appears, so a crash never leaves a named but
     * partial file: readers see the whole evidence or none. */
    int failed = store_write_all(fd, data, len) || fsync(fd);
    int e = errno;
    if (close(fd) != 0 && errno != EINTR && !failed) {
        failed = 1;
        e = errno;
    }
    fd = -1;
    if (failed) {
        (void)unlinkat(dir, tmp, 0);
        rc = store_io_fail(err, e, path);
        goto done;
    }
    if (store_publish(dir, tmp, name, existed) != 0) {
        rc = store_io_fail(err, errno, path);
        goto done;
    }
    /* A name planted as a link a moment ago took the place: the output stays in the view. */
    if (*existed && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        *existed = 0;
        rc = store_symlink_fail(err, rel);
        goto done;
    }
    /* The new name becomes durable at the next ck__store_sync(): one folder fsync for all the
     * files of a compaction, not one per file. */
    s->unsynced = 1;
done:
    if (dir >= 0) close(dir);
    ck__free(name);
    ck__free(path);
    return rc;
}

void ck__store_sync(ck__store *s) {
    if (!s || !s->unsynced) return;
    s->unsynced = 0;
    ck_error err;
    int dir = store_open_folder(s, STORE_EVIDENCE, 0, s->results, &err);
    /* A failure here loses nothing already written: the files' data is on disk. */
    if (dir < 0) return;
    (void)fsync(dir);
    close(dir);
}

/* ---- resolving a ref ---- */

/* What a read goes through: an open file, or a text a backend returned. */
typedef struct store_src {
    int fd;    /* -1 for text */
    char *mem; /* owned */
    size_t len, pos;
} store_src;

static ssize_t store_src_read(store_src *src, char *buf, size_t n) {
    if (src->fd >= 0) return store_read_some(src->fd, buf, n);
    size_t left = src->len - src->pos;
    if (n > left) n = left;
    if (n) memcpy(buf, src->mem + src->pos, n);
    src->pos += n;
    return (ssize_t)n;
}

static void store_src_close(store_src *src) {
    if (src->fd >= 0) close(src->fd);
    ck__free(src->mem);
    src->fd = -1;
    src->mem = NULL;
}

/* True when `name` can be an evidence file name: one component, not dot-led, ending ".txt". */
static int store_evidence_name(const char *name, size_t len) {
    return len > 4 && name[0] != '.' && !memchr(name, '/', len) && !memchr(name, '\0', len) &&
           memcmp(name + len - 4, ".txt", 4) == 0;
}

/* True when the folder `dir` (NUL-terminated) is this session's evidence folder, either as
 * spelled in placeholders or after resolving symbolic links, "..", "//" and relative forms.
 * Only the name is taken from a ref; the file is then opened below the store's own folder. */
static int store_is_results_dir(const ck__store *s, const char *dir) {
    if (strcmp(dir, s->results) == 0) return 1;
    char got[PATH_MAX];
    return realpath(dir[0] ? dir : "/", got) && strcmp(s->results_real, got) == 0;
}

static int store_no_ref(ck_error *err, const char *ref, size_t ref_len) {
    return ck__fail(err, CK_EINVAL, "no evidence for this ref in this session", CK_NONE,
                    "%.*s", (int)(ref_len < 111 ? ref_len : 111), ref ? ref : "");
}

/* The backend's evidence for `ref`: an id, a key as placeholders state it, or a bare hashed
 * name. */
static int store_open_key(const ck__store *s, const char *ref, size_t ref_len, store_src *src,
                          char **path, ck_error *err) {
    *path = ck__store_path(s, ref, ref_len);
    if (!*path) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    int rc = store_backend_get(s, *path, &src->mem, &src->len, err);
    if (rc || src->mem) return rc;
    ck__free(*path);
    *path = NULL;
    size_t dir = strlen(s->results);
    const char *name = NULL;
    size_t name_len = 0;
    if (ref_len > dir + 1 && memcmp(ref, s->results, dir) == 0 && ref[dir] == '/') {
        name = ref + dir + 1;
        name_len = ref_len - dir - 1;
    } else if (memchr(ref, '~', ref_len)) {
        name = ref;
        name_len = ref_len;
    }
    if (!name || !store_evidence_name(name, name_len)) return store_no_ref(err, ref, ref_len);
    char *bare = ck__strndup(name, name_len);
    *path = bare ? store_concat(s->results, "/", bare) : NULL;
    ck__free(bare);
    if (!*path) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    rc = store_backend_get(s, *path, &src->mem, &src->len, err);
    if (rc || src->mem) return rc;
    return store_no_ref(err, ref, ref_len);
}

/* The file name a ref names when it is not an id: the last component of a path into this
 * session's folder, or a bare hashed name (what session-wide search reports). NULL when it
 * names nothing; *oom on OOM. Caller owns the result. */
static char *store_ref_name(const ck__store *s, const char *ref, size_t ref_len, int *oom) {
    *oom = 0;
    if (memchr(ref, '\0', ref_len)) return NULL;
    char *copy = ck__strndup(ref, ref_len);
    if (!copy) {
        *oom = 1;
        return NULL;
    }
    char *slash = strrchr(copy, '/'), *name = NULL;
    if (slash && store_evidence_name(slash + 1, strlen(slash + 1))) {
        *slash = '\0';
        if (store_is_results_dir(s, copy)) name = slash + 1;
    } else if (!slash && memchr(copy, '~', ref_len) && store_evidence_name(copy, ref_len)) {
        name = copy;
    }
    char *out = name ? ck__strndup(name, strlen(name)) : NULL;
    if (name && !out) *oom = 1;
    ck__free(copy);
    return out;
}

/* Opens file `name` of the session's folder into *src: CK_OK, or STORE_MISSING (nothing
 * there), or an error code (err filled) for a refused or unreadable file. *path is its
 * path. */
static int store_open_named(ck__store *s, const char *name, store_src *src, char **path,
                            const char *ref, size_t ref_len, ck_error *err) {
    *path = store_concat(s->results, "/", name);
    if (!*path) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    int dir = store_open_folder(s, STORE_EVIDENCE, 0, s->results, err);
    if (dir < 0) return dir;
    store_sweep(s, dir);
    char rel[STORE_PLAIN_MAX * 3 + 64];
    snprintf(rel, sizeof rel, "tool_results/%s/%s", s->session, name);
    int fd = store_open_file(dir, name, rel, *path, err);
    close(dir);
    if (fd >= 0) {
        src->fd = fd;
        return CK_OK;
    }
    if (fd == STORE_REFUSED)
        return ck__fail(err, CK_EINVAL, "ref is not a regular evidence file", CK_NONE, "%.*s",
                        (int)(ref_len < 111 ? ref_len : 111), ref);
    return fd;
}

/* Opens the evidence that `ref` names: first as an id, then as a path inside this session's
 * folder, then as a bare hashed file name. Sets *src and *path (the file's path or key,
 * caller frees). */
static int store_open_ref(ck__store *s, const char *ref, size_t ref_len, store_src *src,
                          char **path, ck_error *err) {
    src->fd = -1;
    src->mem = NULL;
    src->len = src->pos = 0;
    *path = NULL;
    if (!ref) return store_no_ref(err, "", 0);
    if (s->be.get) return store_open_key(s, ref, ref_len, src, path, err);
    char *name = store_file_name(ref, ref_len);
    if (!name) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    int rc = store_open_named(s, name, src, path, ref, ref_len, err);
    ck__free(name);
    if (rc != STORE_MISSING) return rc;
    ck__free(*path);
    *path = NULL;
    int oom;
    name = store_ref_name(s, ref, ref_len, &oom);
    if (oom) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    if (!name) return store_no_ref(err, ref, ref_len);
    rc = store_open_named(s, name, src, path, ref, ref_len, err);
    ck__free(name);
    return rc == STORE_MISSING ? store_no_ref(err, ref, ref_len) : rc;
}

int ck__store_read(ck__store *s, const char *ref, size_t ref_len, size_t offset, size_t limit,
                   char **out, size_t *out_len, ck_error *err) {
    ck__error_clear(err);
    *out = NULL;
    if (out_len) *out_len = 0;
    store_src src;
    char *path;
    int rc = store_open_ref(s, ref, ref_len, &src, &path, err);
    if (rc) {
        store_src_close(&src);
        ck__free(path);
        return rc;
    }
    size_t end = limit > SIZE_MAX - offset ? SIZE_MAX : offset + limit;
    ck__buf text;
    ck__buf_init(&text);
    char chunk[STORE_CHUNK];
    size_t line = 0;
    ssize_t n = 0;
    /* Lines before `offset` are only counted; bytes are copied from the first wanted line on,
     * and reading stops as soon as the last wanted line is complete. */
    while (line < end && (n = store_src_read(&src, chunk, sizeof chunk)) > 0) {
        size_t i = 0;
        while (i < (size_t)n && line < end) {
            char *nl = memchr(chunk + i, '\n', (size_t)n - i);
            size_t stop = nl ? (size_t)(nl - chunk) + 1 : (size_t)n;
            if (line >= offset) ck__buf_add(&text, chunk + i, stop - i);
            if (nl) line++;
            i = stop;
        }
    }
    int e = errno;
    store_src_close(&src);
    if (n < 0) rc = store_io_fail(err, e, path);
    ck__free(path);
    if (rc) {
        ck__buf_dispose(&text);
        return rc;
    }
    /* An empty add makes sure an empty result is a NUL-terminated "" (ck__buf_take alone can
     * hand out an unterminated buffer when nothing was ever added). */
    ck__buf_add(&text, "", 0);
    size_t len = 0;
    *out = ck__buf_take(&text, &len);
    if (!*out) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    if (out_len) *out_len = len;
    return CK_OK;
}

/* ---- search ---- */

/* Appends `s` as a JSON string: quotes, backslashes and control characters escaped, each byte
 * that is not part of valid UTF-8 replaced by U+FFFD so the result is always valid JSON. */
static void store_json_string(ck__buf *b, const char *s, size_t len) {
    ck__buf_addc(b, '"');
    size_t i = 0;
    while (i < len) {
        size_t good = i + ck__utf8_valid_prefix(s + i, len - i);
        size_t run = i;
        for (; i < good; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c >= 0x20 && c != '"' && c != '\\') continue;
            ck__buf_add(b, s + run, i - run);
            run = i + 1;
            switch (c) {
                case '"': ck__buf_add(b, "\\\"", 2); break;
                case '\\': ck__buf_add(b, "\\\\", 2); break;
                case '\n': ck__buf_add(b, "\\n", 2); break;
                case '\r': ck__buf_add(b, "\\r", 2); break;
                case '\t': ck__buf_add(b, "\\t", 2); break;
                case '\b': ck__buf_add(b, "\\b", 2); break;
                case '\f': ck__buf_add(b, "\\f", 2); break;
                default: ck__buf_printf(b, "\\u%04x", c); break;
            }
        }
        ck__buf_add(b, s + run, good - run);
        if (i < len) {
            ck__buf_add(b, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
    ck__buf_addc(b, '"');
}

typedef struct store_grep {
    ck__regex *re;
    size_t max_hits, hits;
    uint64_t budget; /* the matcher's work left */
    int cut;         /* the budget ran out */
    ck__buf *json;
    ck__buf line; /* the current line, reused across lines and files */
} store_grep;

/* Matches the current line; NUL bytes in it are characters like any other. */
static void store_grep_check(store_grep *g, const char *ref, size_t ref_len, size_t line_no) {
    int got = ck__regex_search(g->re, g->line.data ? g->line.data : "", g->line.len, &g->budget);
    if (got == CK__REGEX_CUT) g->cut = 1;
    if (got != CK__REGEX_MATCH) return;
    if (g->hits) ck__buf_addc(g->json, ',');
    ck__buf_add(g->json, "{\"ref\":", 7);
    store_json_string(g->json, ref, ref_len);
    ck__buf_printf(g->json, ",\"line\":%zu,\"text\":", line_no);
    store_json_string(g->json, g->line.data, g->line.len);
    ck__buf_addc(g->json, '}');
    g->hits++;
}

static int store_grep_more(const store_grep *g) { return g->hits < g->max_hits && !g->cut; }

/* Searches one opened evidence. Returns CK_OK, CK_ENOMEM, or CK_EIO (errno set). */
static int store_grep_src(store_grep *g, store_src *src, const char *ref, size_t ref_len) {
    char chunk[STORE_CHUNK];
    size_t line_no = 0;
    ssize_t n;
    g->line.len = 0;
    while (store_grep_more(g) && (n = store_src_read(src, chunk, sizeof chunk)) != 0) {
        if (n < 0) return CK_EIO;
        size_t i = 0;
        while (i < (size_t)n && store_grep_more(g)) {
            char *nl = memchr(chunk + i, '\n', (size_t)n - i);
            size_t stop = nl ? (size_t)(nl - chunk) : (size_t)n;
            ck__buf_add(&g->line, chunk + i, stop - i);
            if (g->line.failed) return CK_ENOMEM;
            if (!nl) break;
            i = stop + 1;
            store_grep_check(g, ref, ref_len, line_no++);
            g->line.len = 0;
        }
    }
    /* A last line without a newline is still a line. */
    if (g->line.len > 0 && store_grep_more(g)) store_grep_check(g, ref, ref_len, line_no++);
    return g->json->failed ? CK_ENOMEM : CK_OK;
}

static int store_name_order(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The evidence file names of the session's folder `dir`, sorted. */
static int store_list_names(ck__store *s, int dir, char ***names, size_t *count, ck_error *err) {
    *names = NULL;
    *count = 0;
    size_t cap = 0;
    int fd = store_openat(dir, ".", O_RDONLY | O_DIRECTORY, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = errno;
        if (fd >= 0) close(fd);
        return store_io_fail(err, e, s->results);
    }
    int rc = CK_OK;
    struct dirent *ent;
    for (;;) {
        errno = 0;
        if (!(ent = readdir(d))) break;
        size_t len = strlen(ent->d_name);
        if (!store_evidence_name(ent->d_name, len)) continue;
        char *copy = NULL;
        if (ck__grow((void **)names, &cap, *count + 1, sizeof **names) ||
            !(copy = ck__strndup(ent->d_name, len))) {
            rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
            break;
        }
        (*names)[(*count)++] = copy;
    }
    if (!rc && errno) rc = store_io_fail(err, errno, s->results);
    closedir(d);
    if (!rc && *count > 1) qsort(*names, *count, sizeof **names, store_name_order);
    return rc;
}

/* Searches every evidence file of the session, in name order. An id kept as itself is
 * reported as the id; a hashed name as the file name, which store_open_ref accepts back. A
 * FIFO or a folder named like evidence is skipped; a symbolic link is refused. */
static int store_grep_session(ck__store *s, store_grep *g, ck_error *err) {
    int dir = store_open_folder(s, STORE_EVIDENCE, 0, s->results, err);
    if (dir == STORE_MISSING) return CK_OK;
    if (dir < 0) return dir;
    store_sweep(s, dir);
    char **names;
    size_t count;
    int rc = store_list_names(s, dir, &names, &count, err);
    for (size_t i = 0; !rc && i < count && store_grep_more(g); i++) {
        char *path = store_concat(s->results, "/", names[i]);
        if (!path) {
            rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
            break;
        }
        char rel[STORE_PLAIN_MAX * 3 + 64];
        snprintf(rel, sizeof rel, "tool_results/%s/%s", s->session, names[i]);
        store_src src = {store_open_file(dir, names[i], rel, path, err), NULL, 0, 0};
        if (src.fd >= 0) {
            size_t len = strlen(names[i]);
            if (!strchr(names[i], '~')) len -= 4;
            rc = store_grep_src(g, &src, names[i], len);
            int e = errno;
            store_src_close(&src);
            if (rc == CK_EIO) rc = store_io_fail(err, e, path);
            else if (rc) rc = ck__fail(err, rc, NULL, CK_NONE, NULL);
        } else if (src.fd != STORE_MISSING && src.fd != STORE_REFUSED) {
            rc = src.fd;
        }
        src.fd = -1;
        ck__free(path);
    }
    for (size_t i = 0; i < count; i++) ck__free(names[i]);
    ck__free(names);
    close(dir);
    return rc;
}

static int store_grep_ref(ck__store *s, store_grep *g, const char *ref, size_t ref_len,
                          ck_error *err) {
    store_src src;
    char *path;
    int rc = store_open_ref(s, ref, ref_len, &src, &path, err);
    if (!rc) {
        rc = store_grep_src(g, &src, ref, ref_len);
        int e = errno;
        if (rc == CK_EIO) rc = store_io_fail(err, e, path);
        else if (rc) rc = ck__fail(err, rc, NULL, CK_NONE, NULL);
    }
    store_src_close(&src);
    ck__free(path);
    return rc;
}

int ck__store_search(ck__store *s, const char *ref, size_t ref_len, const char *pattern,
                     size_t max_hits, const char *const *refs, size_t n_refs, char **out,
                     size_t *out_len, ck_error *err) {
    ck__error_clear(err);
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!pattern) return ck__fail(err, CK_EINVAL, "no pattern", CK_NONE, "pattern");
    ck__regex *re = NULL;
    int rc = ck__regex_new(pattern, strlen(pattern), &re, err);
    if (rc) return rc;
    ck__buf json;
    ck__buf_init(&json);
    ck__buf_addc(&json, '[');
    store_grep g = {re, max_hits, 0, s->search_work, 0, &json, {NULL, 0, 0, 0}};
    if (ref) {
        rc = store_grep_ref(s, &g, ref, ref_len, err);
    } else if (s->be.get) {
        /* A backend cannot be listed: the session's evidence is what the caller knows of. */
        for (size_t i = 0; !rc && i < n_refs && store_grep_more(&g); i++)
            rc = store_grep_ref(s, &g, refs[i], strlen(refs[i]), err);
    } else {
        rc = store_grep_session(s, &g, err);
    }
    ck__regex_free(re);
    ck__buf_dispose(&g.line);
    if (g.cut) {
        /* The hits found so far, and a last entry that says the rest was not searched. */
        ck__buf_printf(&json,
                       "%s{\"ref\":\"\",\"line\":0,\"text\":\"search stopped at its work "
                       "limit (about %llu MB scanned): give a ref or a narrower pattern to "
                       "search the rest\",\"cut\":true}",
                       g.hits ? "," : "", (unsigned long long)(s->search_work >> 20));
    }
    ck__buf_addc(&json, ']');
    if (rc) {
        ck__buf_dispose(&json);
        return rc;
    }
    size_t len = 0;
    *out = ck__buf_take(&json, &len);
    if (!*out) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    if (out_len) *out_len = len;
    return CK_OK;
}

/* ---- audit records in the backend ---- */

/* The key of record `seq`: compactions/<session>/<20-digit seq>.json. NULL on OOM. */
static char *store_record_key(const ck__store *s, uint64_t seq) {
    char name[40];
    snprintf(name, sizeof name, "%020llu.json", (unsigned long long)seq);
    return store_concat(s->rec_prefix, name, "");
}

typedef struct store_seqs {
    const char *prefix;
    size_t prefix_len;
    uint64_t *v;
    size_t n, cap;
    int oom;
} store_seqs;

/* The seq of a record key, 0 for any other key under the prefix (never written by us). */
static uint64_t store_record_seq(const char *name, size_t len) {
    if (len != 25 || memcmp(name + 20, ".json", 5) != 0) return 0;
    uint64_t seq = 0;
    for (size_t i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9' || seq > (UINT64_MAX - 9) / 10) return 0;
        seq = seq * 10 + (uint64_t)(name[i] - '0');
    }
    return seq;
}

static int store_seqs_each(void *ctx, const char *key, size_t len) {
    store_seqs *l = ctx;
    if (len <= l->prefix_len || memcmp(key, l->prefix, l->prefix_len) != 0) return 0;
    uint64_t seq = store_record_seq(key + l->prefix_len, len - l->prefix_len);
    if (!seq) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        uint64_t *v = cap < SIZE_MAX / sizeof *v ? ck__realloc(l->v, cap * sizeof *v) : NULL;
        if (!v) {
            l->oom = 1;
            return 1;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = seq;
    return 0;
}

/* The seqs of the session's records, rising (the listing is in byte order and the seqs have
 * one width). The caller frees l->v. */
static int store_list_records(ck__store *s, store_seqs *l, ck_error *err) {
    memset(l, 0, sizeof *l);
    l->prefix = s->rec_prefix;
    l->prefix_len = strlen(s->rec_prefix);
    ck__error_clear(err);
    if (err) err->where[0] = '\0';
    int rc = s->be.list(s->be.ctx, s->rec_prefix, NULL, store_seqs_each, l, err);
    if (l->oom) rc = CK_ENOMEM;
    if (rc) {
        ck__free(l->v);
        l->v = NULL;
        return store_backend_fail(err, rc, "the backend could not list the audit records",
                                  s->rec_prefix);
    }
    if (l->n && l->v[l->n - 1] > s->seen_seq) s->seen_seq = l->v[l->n - 1];
    return CK_OK;
}

int ck__store_newest_record(ck__store *s, uint64_t *seq, ck_error *err) {
    ck__error_clear(err);
    *seq = 0;
    if (!store_records_remote(s)) return CK_OK;
    store_seqs l;
    int rc = store_list_records(s, &l, err);
    if (!rc && l.n) *seq = l.v[l.n - 1];
    ck__free(l.v);
    return rc;
}

uint64_t ck__store_records_seen(const ck__store *s) { return s->seen_seq; }

int ck__store_records_remote(const ck__store *s) { return store_records_remote(s); }

/* Creates record `seq` with put_new. A failed call may still have stored it (put_new's
 * contract), so the key is read back: our bytes there count as stored, another's as a
 * conflict. */
static int store_remote_append(ck__store *s, uint64_t seq, const char *line, size_t len,
                               ck_error *err) {
    char *key = store_record_key(s, seq);
    char *rec = len < SIZE_MAX ? ck__malloc(len + 1) : NULL;
    if (!key || !rec) {
        ck__free(key);
        ck__free(rec);
        return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    }
    /* One line, as in the local log, so that the objects concatenated are JSON lines. */
    for (size_t i = 0; i < len; i++) rec[i] = line[i] == '\n' ? ' ' : line[i];
    rec[len] = '\n';
    if (err) err->where[0] = '\0';
    int rc = s->be.put_new(s->be.ctx, key, rec, len + 1, err);
    if (rc != CK_OK && rc != CK_ECONFLICT && rc != CK_ENOMEM) {
        ck_error gerr;
        char *have = NULL;
        size_t have_len = 0;
        if (store_backend_get(s, key, &have, &have_len, &gerr) == CK_OK && have)
            rc = have_len == len + 1 && memcmp(have, rec, len + 1) == 0 ? CK_OK : CK_ECONFLICT;
        ck__free(have);
        if (rc != CK_OK && rc != CK_ECONFLICT)
            rc = store_backend_fail(err, rc, "the backend could not store the audit record", key);
    }
    if (rc == CK_ECONFLICT)
        rc = ck__fail(err, CK_ECONFLICT, "another writer recorded this session first", CK_NONE,
                      "%s", key);
    else if (rc == CK_ENOMEM) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    else if (rc == CK_OK && seq > s->seen_seq) s->seen_seq = seq;
    ck__free(key);
    ck__free(rec);
    return rc;
}

/* The records from the newest that holds `needle` (NULL: the newest alone) to the newest,
 * one per line, as the local log would hold them. *out NULL when there is none. */
static int store_remote_since(ck__store *s, const char *needle, char **out, size_t *out_len,
                              ck_error *err) {
    store_seqs l;
    int rc = store_list_records(s, &l, err);
    if (rc) return rc;
    char **texts = l.n ? ck__calloc(l.n, sizeof *texts) : NULL;
    size_t *lens = l.n ? ck__calloc(l.n, sizeof *lens) : NULL;
    size_t from = l.n;
    if (l.n && (!texts || !lens)) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    /* Backwards from the newest; a record deleted since the listing is passed over. */
    for (size_t i = l.n; i > 0 && !rc; i--) {
        char *key = store_record_key(s, l.v[i - 1]);
        if (!key) {
            rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
            break;
        }
        rc = store_backend_get(s, key, &texts[i - 1], &lens[i - 1], err);
        ck__free(key);
        if (rc || !texts[i - 1]) continue;
        from = i - 1;
        if (!needle) break;
        size_t nl = strlen(needle);
        const char *t = texts[i - 1];
        int has = 0;
        for (size_t k = 0; !has && k + nl <= lens[i - 1]; k++)
            has = t[k] == needle[0] && memcmp(t + k, needle, nl) == 0;
        if (has) break;
    }
    ck__buf b;
    ck__buf_init(&b);
    for (size_t i = from; !rc && i < l.n; i++) {
        if (!texts[i]) continue;
        size_t n = lens[i];
        while (n && texts[i][n - 1] == '\n') n--;
        for (size_t k = 0; k < n; k++) ck__buf_addc(&b, texts[i][k] == '\n' ? ' ' : texts[i][k]);
        ck__buf_addc(&b, '\n');
    }
    for (size_t i = 0; texts && i < l.n; i++) ck__free(texts[i]);
    ck__free(texts);
    ck__free(lens);
    ck__free(l.v);
    if (!rc && b.failed) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    if (!rc && b.len) {
        b.len--; /* the last newline, as the local log's text leaves it out */
        *out = ck__buf_take(&b, out_len);
        if (!*out) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    }
    ck__buf_dispose(&b);
    return rc;
}

/* `n` random bytes for an audit key. CK_OK or CK_EIO. */
static int store_random(unsigned char *out, size_t n, ck_error *err) {
    int urandom = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = urandom >= 0 ? store_read_some(urandom, (char *)out, n) : -1;
    if (urandom >= 0) close(urandom);
    if (got == (ssize_t)n) return CK_OK;
    return ck__fail(err, CK_EIO, "no randomness for the audit key", CK_NONE, "/dev/urandom");
}

static int store_hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The audit key in the backend, "compactions/.key" (64 hex digits), made with put_new when
 * absent, so that racing makers all end with the one that was stored first. */
static int store_remote_key(ck__store *s, int create, unsigned char key[32], ck_error *err) {
    static const char name[] = "compactions/.key";
    for (int attempt = 0; attempt < 2; attempt++) {
        char *text = NULL;
        size_t len = 0;
        int rc = store_backend_get(s, name, &text, &len, err);
        if (rc) return rc;
        if (text) {
            int ok = len == 64;
            for (size_t i = 0; ok && i < 64; i++) {
                int d = store_hex_digit(text[i]);
                ok = d >= 0;
                if (i % 2 == 0) key[i / 2] = (unsigned char)(d << 4);
                else key[i / 2] |= (unsigned char)d;
            }
            ck__free(text);
            return ok ? CK_OK
                      : ck__fail(err, CK_EIO, "the audit key is damaged", CK_NONE, "%s", name);
        }
        if (!create) return ck__fail(err, CK_EINVAL, "no audit key", CK_NONE, "%s", name);
        unsigned char fresh[32];
        if (store_random(fresh, sizeof fresh, err)) return CK_EIO;
        char hex[65];
        ck__hex(fresh, sizeof fresh, hex);
        if (err) err->where[0] = '\0';
        rc = s->be.put_new(s->be.ctx, name, hex, 64, err);
        if (rc == CK_ENOMEM) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        /* Stored, taken by another maker, or unknown: what is there now is the key. */
    }
    return ck__fail(err, CK_EIO, "the audit key could not be stored", CK_NONE, "%s", name);
}

/* ---- audit log ---- */

/* Opens the session's log in the compactions folder `dir` for appending, making it 0600 (and
 * durable in the folder) when it is new. Returns the fd, or -1 with errno set. */
static int store_open_log(ck__store *s, int dir, const char *name) {
    (void)s;
    int fd = store_openat(dir, name, O_RDWR | O_APPEND, 0);
    if (fd < 0 && errno == ENOENT) {
        fd = store_openat(dir, name, O_RDWR | O_APPEND | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) (void)fsync(dir);
        else if (errno == EEXIST) fd = store_openat(dir, name, O_RDWR | O_APPEND, 0);
    }
    return fd;
}

int ck__store_append_record(ck__store *s, uint64_t seq, const char *line, size_t len,
                            ck_error *err) {
    ck__error_clear(err);
    if (store_records_remote(s)) return store_remote_append(s, seq, line, len, err);
    if (len > SIZE_MAX - 2) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    /* The evidence a record names is durable before the record is. */
    ck__store_sync(s);
    /* One buffer holds an optional leading newline, the record and its newline, so that one
     * write() puts the whole line down and O_APPEND keeps concurrent appenders from splicing
     * into each other. A newline inside the record would split it into two log lines; in JSON
     * text a raw newline can only be whitespace, so it becomes a space. */
    char *rec = ck__malloc(len + 2);
    char *name = store_concat(s->session, ".jsonl", "");
    if (!rec || !name) {
        ck__free(rec);
        ck__free(name);
        return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    }
    rec[0] = '\n';
    for (size_t i = 0; i < len; i++) rec[i + 1] = line[i] == '\n' ? ' ' : line[i];
    rec[len + 1] = '\n';
    int rc = CK_OK, fd = -1;
    int dir = store_open_folder(s, STORE_LOG, 1, s->log_dir, err);
    if (dir < 0) {
        rc = dir;
        goto done;
    }
    fd = store_open_log(s, dir, name);
    if (fd < 0) {
        int e = errno;
        char rel[STORE_PLAIN_MAX * 2 + 64];
        snprintf(rel, sizeof rel, "compactions/%s", name);
        rc = store_is_symlink(dir, name, e) ? store_symlink_fail(err, rel)
                                            : store_io_fail(err, e, s->log_path);
        goto done;
    }
    /* After a crash the log may end in a torn line; a newline first keeps this record from
     * being glued onto it, so the record is still found whole. A write lock keeps a line that
     * another process is still writing from looking torn. Where locks are unsupported, or for
     * threads of one process, the append goes ahead: the worst case is an empty line, which
     * readers skip. Closing the fd releases the lock. */
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    while (fcntl(fd, F_SETLKW, &lock) != 0 && errno == EINTR) continue;
    struct stat st;
    char last = '\n';
    int ok = fstat(fd, &st) == 0;
    if (ok && !S_ISREG(st.st_mode)) {
        errno = EINVAL;
        ok = 0;
    }
    if (ok && st.st_size > 0 && store_pread_all(fd, &last, 1, st.st_size - 1)) {
        if (errno == 0) errno = EIO;
        ok = 0;
    }
    int torn = last != '\n';
    if (!ok || store_write_all(fd, rec + !torn, len + 1 + (size_t)torn) || fsync(fd))
        rc = store_io_fail(err, errno, s->log_path);
done:
    if (fd >= 0) close(fd);
    if (dir >= 0) close(dir);
    ck__free(rec);
    ck__free(name);
    return rc;
}

/* The offset of the last '\n' before `before`, -1 when there is none, -2 on a read error. */
static off_t audit_newline_before(int fd, off_t before) {
    char chunk[8192];
    while (before > 0) {
        size_t n = before < (off_t)sizeof chunk ? (size_t)before : sizeof chunk;
        off_t at = before - (off_t)n;
        if (store_pread_all(fd, chunk, n, at)) return -2;
        for (size_t i = n; i > 0; i--)
            if (chunk[i - 1] == '\n') return at + (off_t)(i - 1);
        before = at;
    }
    return -1;
}

int ck__store_last_record(ck__store *s, char **out, size_t *out_len, ck_error *err) {
    ck__error_clear(err);
    *out = NULL;
    if (out_len) *out_len = 0;
    if (store_records_remote(s)) {
        size_t ignored;
        return store_remote_since(s, NULL, out, out_len ? out_len : &ignored, err);
    }
    char *name = store_concat(s->session, ".jsonl", "");
    if (!name) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    char rel[STORE_PLAIN_MAX * 2 + 64];
    snprintf(rel, sizeof rel, "compactions/%s", name);
    int dir = store_open_folder(s, STORE_LOG, 0, s->log_dir, err);
    int fd = dir;
    if (dir >= 0) {
        fd = store_open_file(dir, name, rel, s->log_path, err);
        close(dir);
    }
    ck__free(name);
    if (fd == STORE_MISSING) return CK_OK;
    if (fd == STORE_REFUSED) return store_io_fail(err, EINVAL, s->log_path);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return store_io_fail(err, e, s->log_path);
    }
    /* The log is read backwards from its end: whatever follows the last newline is a torn
     * line and is skipped, and so are empty lines. */
    int rc = CK_OK;
    off_t end = audit_newline_before(fd, st.st_size);
    while (end >= 0) {
        off_t start = audit_newline_before(fd, end);
        if (start < -1) break;
        start++;
        if (end > start) {
            size_t len = (size_t)(end - start);
            char *line = ck__malloc(len + 1);
            if (!line) {
                rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
            } else if (store_pread_all(fd, line, len, start)) {
                ck__free(line);
                end = -2;
            } else {
                line[len] = '\0';
                *out = line;
                if (out_len) *out_len = len;
            }
            break;
        }
        end = start - 1;
    }
    if (end < -1 || (end >= 0 && !*out && !rc)) rc = store_io_fail(err, errno, s->log_path);
    close(fd);
    return rc;
}

/* Whether line [start, end) of the log holds `needle`, read in chunks that overlap by the
 * needle's length so no occurrence is missed. -1 on a read error. */
static int audit_line_has(int fd, off_t start, off_t end, const char *needle) {
    char chunk[8192];
    size_t nl = strlen(needle);
    if (nl == 0 || nl > sizeof chunk / 2) return 0;
    for (off_t at = start; at < end;) {
        size_t n = end - at < (off_t)sizeof chunk ? (size_t)(end - at) : sizeof chunk;
        if (store_pread_all(fd, chunk, n, at)) return -1;
        for (size_t i = 0; i + nl <= n; i++)
            if (chunk[i] == needle[0] && memcmp(chunk + i, needle, nl) == 0) return 1;
        if (at + (off_t)n >= end) break;
        at += (off_t)(n - nl + 1);
    }
    return 0;
}

/* Opens the session's audit log for reading: the fd, STORE_MISSING, or an error code. */
static int store_open_log_read(ck__store *s, ck_error *err) {
    char *name = store_concat(s->session, ".jsonl", "");
    if (!name) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    char rel[STORE_PLAIN_MAX * 2 + 64];
    snprintf(rel, sizeof rel, "compactions/%s", name);
    int dir = store_open_folder(s, STORE_LOG, 0, s->log_dir, err);
    int fd = dir;
    if (dir >= 0) {
        fd = store_open_file(dir, name, rel, s->log_path, err);
        close(dir);
    }
    ck__free(name);
    if (fd == STORE_REFUSED) return store_io_fail(err, EINVAL, s->log_path);
    return fd;
}

int ck__store_log_since(ck__store *s, const char *needle, char **out, size_t *out_len,
                        ck_error *err) {
    ck__error_clear(err);
    *out = NULL;
    *out_len = 0;
    if (store_records_remote(s)) return store_remote_since(s, needle, out, out_len, err);
    int fd = store_open_log_read(s, err);
    if (fd == STORE_MISSING) return CK_OK;
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return store_io_fail(err, e, s->log_path);
    }
    /* Backwards from the last complete line to the newest one holding the needle; a torn
     * last line is left out. */
    off_t last = audit_newline_before(fd, st.st_size);
    off_t from = 0, end = last;
    int rc = CK_OK;
    while (end >= 0) {
        off_t start = audit_newline_before(fd, end);
        if (start < -1) {
            rc = store_io_fail(err, EIO, s->log_path);
            break;
        }
        int has = audit_line_has(fd, start + 1, end, needle);
        if (has < 0) {
            rc = store_io_fail(err, EIO, s->log_path);
            break;
        }
        if (has) {
            from = start + 1;
            break;
        }
        end = start;
    }
    if (!rc && last > from) {
        size_t len = (size_t)(last - from);
        char *text = ck__malloc(len + 1);
        if (!text) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        else if (store_pread_all(fd, text, len, from)) {
            ck__free(text);
            rc = store_io_fail(err, EIO, s->log_path);
        } else {
            text[len] = '\0';
            *out = text;
            *out_len = len;
        }
    }
    close(fd);
    return rc;
}

int ck__store_key(ck__store *s, int create, unsigned char key[32], ck_error *err) {
    ck__error_clear(err);
    if (store_records_remote(s)) return store_remote_key(s, create, key, err);
    char shown[STORE_PLAIN_MAX * 2 + 64];
    snprintf(shown, sizeof shown, "%s/.key", s->log_dir);
    int dir = store_open_folder(s, STORE_LOG, create, s->log_dir, err);
    if (dir == STORE_MISSING) return ck__fail(err, CK_EINVAL, "no audit key", CK_NONE, "%s", shown);
    if (dir < 0) return dir;
    int rc = CK_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = store_open_file(dir, ".key", "compactions/.key", shown, err);
        if (fd >= 0) {
            ssize_t n = store_read_some(fd, (char *)key, 32);
            close(fd);
            rc = n == 32 ? CK_OK : ck__fail(err, CK_EIO, "the audit key is damaged", CK_NONE, "%s",
                                            shown);
            break;
        }
        if (fd != STORE_MISSING || !create) {
            rc = fd == STORE_MISSING   ? ck__fail(err, CK_EINVAL, "no audit key", CK_NONE, "%s", shown)
                 : fd == STORE_REFUSED ? store_io_fail(err, EINVAL, shown)
                                       : fd;
            break;
        }
        /* A new key: 32 random bytes, written under a temporary name and linked into place,
         * so two processes making one at once end with one key that both read. */
        unsigned char fresh[32];
        if (store_random(fresh, sizeof fresh, err)) {
            rc = CK_EIO;
            break;
        }
        char tmp[80];
        int wfd = store_temp_open(dir, tmp, sizeof tmp);
        int ok = wfd >= 0 && store_write_all(wfd, (const char *)fresh, sizeof fresh) == 0 &&
                 fsync(wfd) == 0;
        int e = errno;
        if (wfd >= 0) close(wfd);
        if (ok && linkat(dir, tmp, dir, ".key", 0) != 0 && errno != EEXIST) {
            ok = 0;
            e = errno;
        }
        if (wfd >= 0) (void)unlinkat(dir, tmp, 0);
        if (!ok) {
            rc = store_io_fail(err, e, shown);
            break;
        }
        /* Read back what is there now: ours, or the one another process linked first. */
    }
    close(dir);
    return rc;
}
