/* The evidence store (DESIGN section 4) and the audit log (section 8): file names that no id
 * can turn into a path outside its folder, files written once and atomically, paging and
 * regular-expression search over the stored lines, and an append-only JSON-lines log. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
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
#include "./internal.h"
#include "./store.h"

struct ck__store {
    char *results;  /* <dir>/tool_results/<session>, or tool_results/<session> with a backend */
    char *log_dir;  /* <dir>/compactions */
    char *log_path; /* <dir>/compactions/<session>.jsonl */
    ck_evidence_backend be; /* be.get NULL: evidence lives in files under `results` */
};

/* Ids kept as themselves are at most this long; hashed ones keep a prefix of this length. */
#define STORE_PLAIN_MAX 100
#define STORE_PREFIX_MAX 40

/* Reads go through a stack chunk of this size, so paging a huge file costs no heap. */
#define STORE_CHUNK 16384

/* ---- SHA-256, for the hashed part of file names ----
 * File names persist across versions and must never mix two ids, so the hash is a standard one
 * (the first 8 bytes of SHA-256, which the bindings can recompute with hashlib or crypto) rather
 * than a fast table hash whose collisions are easy to construct. */

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t sha256_rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(uint32_t st[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = sha256_rotr(w[i - 15], 7) ^ sha256_rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = sha256_rotr(w[i - 2], 17) ^ sha256_rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = st[0], b = st[1], c = st[2], d = st[3];
    uint32_t e = st[4], f = st[5], g = st[6], h = st[7];
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = sha256_rotr(e, 6) ^ sha256_rotr(e, 11) ^ sha256_rotr(e, 25);
        uint32_t t1 = h + s1 + ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
        uint32_t s0 = sha256_rotr(a, 2) ^ sha256_rotr(a, 13) ^ sha256_rotr(a, 22);
        uint32_t t2 = s0 + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    st[0] += a;
    st[1] += b;
    st[2] += c;
    st[3] += d;
    st[4] += e;
    st[5] += f;
    st[6] += g;
    st[7] += h;
}

/* The first 64 bits of SHA-256 of `data`, big-endian as the hex digest spells them. */
static uint64_t sha256_prefix64(const char *data, size_t len) {
    uint32_t st[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = (const unsigned char *)data;
    size_t left = len;
    for (; left >= 64; left -= 64, p += 64) sha256_block(st, p);
    unsigned char tail[128] = {0};
    if (left) memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t tail_len = left < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) tail[tail_len - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha256_block(st, tail);
    if (tail_len == 128) sha256_block(st, tail + 64);
    return (uint64_t)st[0] << 32 | st[1];
}

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
    uint64_t hash = sha256_prefix64(id, len);
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

ck__store *ck__store_new(const char *dir, const char *session_id,
                         const ck_evidence_backend *backend) {
    if (!dir || !session_id) return NULL;
    ck__store *s = ck__calloc(1, sizeof *s);
    char *session = ck__store_encode_id(session_id, strlen(session_id));
    char *base = NULL;
    if (!s || !session) goto fail;
    /* Trailing slashes are dropped so that paths compare equal to what placeholders state;
     * an empty dir means the current folder rather than the root. */
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/') dlen--;
    base = dlen ? ck__strndup(dir, dlen) : ck__strndup(".", 1);
    if (!base) goto fail;
    const char *sep = strcmp(base, "/") == 0 ? "" : "/";
    /* With a backend, keys are the same relative names the files would have. */
    char *tools = backend ? store_concat("tool_results/", "", "")
                          : store_concat(base, sep, "tool_results/");
    if (tools) s->results = store_concat(tools, session, "");
    ck__free(tools);
    if (backend) s->be = *backend;
    s->log_dir = store_concat(base, sep, "compactions");
    if (s->log_dir) {
        char *slash = store_concat(s->log_dir, "/", session);
        if (slash) s->log_path = store_concat(slash, ".jsonl", "");
        ck__free(slash);
    }
    if (!s->results || !s->log_dir || !s->log_path) goto fail;
    ck__free(base);
    ck__free(session);
    return s;
fail:
    ck__free(base);
    ck__free(session);
    ck__store_free(s);
    return NULL;
}

void ck__store_free(ck__store *s) {
    if (!s) return;
    ck__free(s->results);
    ck__free(s->log_dir);
    ck__free(s->log_path);
    ck__free(s);
}

char *ck__store_path(const ck__store *s, const char *id, size_t id_len) {
    char *name = ck__store_encode_id(id, id_len);
    if (!name) return NULL;
    char *path = store_concat(s->results, "/", name);
    ck__free(name);
    if (!path) return NULL;
    char *full = store_concat(path, ".txt", "");
    ck__free(path);
    return full;
}

char *ck__store_log_path(const ck__store *s) {
    return ck__strndup(s->log_path, strlen(s->log_path));
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

/* After a failed mkdir(): 0 when it failed because the folder is there already, else -1 with
 * errno set (ENOTDIR when a non-folder is in the way). */
static int store_mkdir_failed(const char *path) {
    struct stat st;
    if (errno != EEXIST) return -1;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    errno = ENOTDIR;
    return -1;
}

/* Creates `path` and its missing parents, each 0700. Returns 0, or -1 with errno set. */
static int store_mkdirs(char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        errno = ENOTDIR;
        return -1;
    }
    /* Backs up to the deepest folder that exists, cutting the string at each '/', then makes
     * the ones below it on the way forward, restoring each cut: a new session's folder costs
     * one mkdir(), not one per component of the path. */
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

/* Only the name-uniqueness of temporary files depends on this counter; O_EXCL is what makes
 * them safe, so the counter being shared by every store in the process is harmless. */
static atomic_uint store_temp_counter;

/* Creates a fresh temporary file in `folder`, writing its path into `tmp` (room for the folder
 * plus 80 bytes). The name starts with a dot, which no evidence name does. Returns the fd or
 * -1 with errno set. */
static int store_temp_open(const char *folder, char *tmp, size_t tmp_size) {
    for (int attempt = 0; attempt < 32; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t noise = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^
                         (uint64_t)(uintptr_t)tmp ^ ((uint64_t)attempt << 48);
        noise ^= noise >> 31;
        noise *= 0xbf58476d1ce4e5b9ull;
        noise ^= noise >> 29;
        unsigned count = atomic_fetch_add(&store_temp_counter, 1u);
        snprintf(tmp, tmp_size, "%s/.tmp-%ld-%u-%016llx", folder, (long)getpid(), count,
                 (unsigned long long)noise);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 || (errno != EEXIST && errno != EINTR)) return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Makes a rename or link inside `folder` durable; a failure here loses nothing already
 * written, so it is not reported. */
static void store_sync_folder(const char *folder) {
    int fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

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

int ck__store_put(ck__store *s, const char *id, size_t id_len, const char *data, size_t len,
                  int *existed, ck_error *err) {
    ck__error_clear(err);
    int ignored;
    if (!existed) existed = &ignored;
    *existed = 0;
    char *path = ck__store_path(s, id, id_len);
    if (!path) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    if (s->be.get) {
        char *have;
        size_t have_len;
        int rc = store_backend_get(s, path, &have, &have_len, err);
        if (!rc && have) *existed = 1;
        ck__free(have);
        if (!rc && !*existed) {
            if (err) err->where[0] = '\0';
            rc = s->be.put(s->be.ctx, path, data, len, err);
            if (rc) rc = store_backend_fail(err, rc, "the evidence backend could not store", path);
        }
        ck__free(path);
        return rc;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        *existed = 1;
        ck__free(path);
        return CK_OK;
    }
    int rc = CK_OK;
    size_t tmp_size = strlen(s->results) + 80;
    char *tmp = ck__malloc(tmp_size);
    int fd = -1;
    if (!tmp) {
        rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        goto done;
    }
    /* The folder is made only when the file cannot be made in it, which saves a stat() on
     * every put but the first; a failure is then reported as the folder's, as it would have
     * been had the folder been made first. */
    fd = store_temp_open(s->results, tmp, tmp_size);
    if (fd < 0 && store_mkdirs(s->results)) {
        rc = store_io_fail(err, errno, s->results);
        goto done;
    }
    if (fd < 0) fd = store_temp_open(s->results, tmp, tmp_size);
    if (fd < 0) {
        rc = store_io_fail(err, errno, path);
        goto done;
    }
    /* The data reaches the disk before the name appears, so a crash never leaves a named but
     * partial file: readers see the whole evidence or none. */
    if (store_write_all(fd, data, len) || fsync(fd)) {
        int e = errno;
        close(fd);
        unlink(tmp);
        rc = store_io_fail(err, e, path);
        goto done;
    }
    if (close(fd) && errno != EINTR) {
        int e = errno;
        unlink(tmp);
        rc = store_io_fail(err, e, path);
        goto done;
    }
    /* link() publishes the file only if the name is still free, so a racing writer of the same
     * id can never replace a file already there. File systems without hard links fall back to
     * rename(), which is atomic but may replace a twin written a moment earlier. */
    int keep_tmp = 0;
    if (link(tmp, path) != 0) {
        int e = errno;
        if (e == EEXIST) {
            *existed = 1;
        } else if (e == EPERM || e == ENOTSUP || e == EOPNOTSUPP || e == EXDEV || e == EMLINK ||
                   e == ENOSYS) {
            if (lstat(path, &st) == 0) {
                *existed = 1;
            } else if (rename(tmp, path) == 0) {
                keep_tmp = 1;
            } else {
                e = errno;
                unlink(tmp);
                rc = store_io_fail(err, e, path);
                goto done;
            }
        } else {
            unlink(tmp);
            rc = store_io_fail(err, e, path);
            goto done;
        }
    }
    if (!keep_tmp) unlink(tmp);
    store_sync_folder(s->results);
done:
    ck__free(tmp);
    ck__free(path);
    return rc;
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

enum { STORE_OPENED = 0, STORE_MISSING = -1, STORE_REFUSED = -2, STORE_IO = -3 };

/* Opens `path` for reading when it is a regular file that is not a symbolic link. O_NONBLOCK
 * keeps a FIFO planted in the folder from hanging the call; it does nothing to regular files.
 * Returns the fd or one of the negative STORE_ outcomes (errno set for STORE_IO). */
static int store_open_regular(const char *path) {
    int fd;
    do fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG) return STORE_MISSING;
        if (errno == ELOOP || errno == EMLINK || errno == ENXIO) return STORE_REFUSED;
        return STORE_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return STORE_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return STORE_REFUSED;
    }
    return fd;
}

/* True when `name` can be an evidence file name: one component, not dot-led, ending ".txt". */
static int store_evidence_name(const char *name, size_t len) {
    return len > 4 && name[0] != '.' && !memchr(name, '/', len) && !memchr(name, '\0', len) &&
           memcmp(name + len - 4, ".txt", 4) == 0;
}

/* True when the folder `dir` (NUL-terminated) is this session's evidence folder, either as
 * spelled in placeholders or after resolving symbolic links, "..", "//" and relative forms. */
static int store_is_results_dir(const ck__store *s, const char *dir) {
    if (strcmp(dir, s->results) == 0) return 1;
    char want[PATH_MAX], got[PATH_MAX];
    return realpath(s->results, want) && realpath(dir[0] ? dir : "/", got) &&
           strcmp(want, got) == 0;
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

/* Opens the evidence that `ref` names: first as an id, then as a path inside this session's
 * folder, then as a bare hashed file name (what session-wide search reports). Sets *src and
 * *path (the file's path or key, caller frees). */
static int store_open_ref(const ck__store *s, const char *ref, size_t ref_len, store_src *src,
                          char **path, ck_error *err) {
    src->fd = -1;
    src->mem = NULL;
    src->len = src->pos = 0;
    if (s->be.get) return store_open_key(s, ref, ref_len, src, path, err);
    *path = ck__store_path(s, ref, ref_len);
    if (!*path) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    int got = store_open_regular(*path);
    if (got == STORE_MISSING) {
        ck__free(*path);
        *path = NULL;
        char *copy = ck__strndup(ref, ref_len);
        if (!copy) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        char *slash = memchr(copy, '\0', ref_len) ? NULL : strrchr(copy, '/');
        const char *name = NULL;
        if (slash && store_evidence_name(slash + 1, strlen(slash + 1))) {
            *slash = '\0';
            if (store_is_results_dir(s, copy)) name = slash + 1;
        } else if (!slash && memchr(copy, '~', ref_len) && store_evidence_name(copy, ref_len)) {
            name = copy;
        }
        if (name) *path = store_concat(s->results, "/", name);
        ck__free(copy);
        if (!name) return store_no_ref(err, ref, ref_len);
        if (!*path) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        got = store_open_regular(*path);
    }
    if (got >= 0) {
        src->fd = got;
        return CK_OK;
    }
    int e = errno;
    if (got == STORE_IO) return store_io_fail(err, e, *path);
    if (got == STORE_REFUSED)
        return ck__fail(err, CK_EINVAL, "ref is not a regular evidence file", CK_NONE, "%.*s",
                        (int)(ref_len < 111 ? ref_len : 111), ref ? ref : "");
    return store_no_ref(err, ref, ref_len);
}

int ck__store_read(const ck__store *s, const char *ref, size_t ref_len, size_t offset,
                   size_t limit, char **out, size_t *out_len, ck_error *err) {
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

/* Whether `re` matches the line `text` (`len` bytes, NUL at text[len]). regexec stops at a NUL,
 * so a line with NUL bytes is matched piece by piece; REG_NOTBOL and REG_NOTEOL keep '^' and '$'
 * meaning the ends of the whole line. Empty inner pieces are skipped: a pattern that matches
 * the empty string there matches at the start of the first piece too. */
static int store_line_matches(const regex_t *re, const char *text, size_t len) {
    size_t start = 0;
    for (;;) {
        size_t piece = strlen(text + start);
        int last = start + piece >= len;
        if (start == 0 || piece > 0 || last) {
            int flags = (start ? REG_NOTBOL : 0) | (last ? 0 : REG_NOTEOL);
            if (regexec(re, text + start, 0, NULL, flags) == 0) return 1;
        }
        if (last) return 0;
        start += piece + 1;
    }
}

typedef struct store_grep {
    const regex_t *re;
    size_t max_hits, hits;
    ck__buf *json;
    ck__buf line; /* the current line, reused across lines and files */
} store_grep;

static void store_grep_check(store_grep *g, const char *ref, size_t ref_len, size_t line_no) {
    if (!store_line_matches(g->re, g->line.data, g->line.len)) return;
    if (g->hits) ck__buf_addc(g->json, ',');
    ck__buf_add(g->json, "{\"ref\":", 7);
    store_json_string(g->json, ref, ref_len);
    ck__buf_printf(g->json, ",\"line\":%zu,\"text\":", line_no);
    store_json_string(g->json, g->line.data, g->line.len);
    ck__buf_addc(g->json, '}');
    g->hits++;
}

/* Searches one opened evidence. Returns CK_OK, CK_ENOMEM, or CK_EIO (errno set). */
static int store_grep_src(store_grep *g, store_src *src, const char *ref, size_t ref_len) {
    char chunk[STORE_CHUNK];
    size_t line_no = 0;
    ssize_t n;
    g->line.len = 0;
    while (g->hits < g->max_hits && (n = store_src_read(src, chunk, sizeof chunk)) != 0) {
        if (n < 0) return CK_EIO;
        size_t i = 0;
        while (i < (size_t)n && g->hits < g->max_hits) {
            char *nl = memchr(chunk + i, '\n', (size_t)n - i);
            size_t stop = nl ? (size_t)(nl - chunk) : (size_t)n;
            ck__buf_add(&g->line, chunk + i, stop - i);
            if (g->line.failed) return CK_ENOMEM;
            if (!nl) break;
            i = stop + 1;
            store_grep_check(g, ref, ref_len, ++line_no);
            g->line.len = 0;
        }
    }
    /* A last line without a newline is still a line. */
    if (g->line.len > 0 && g->hits < g->max_hits) store_grep_check(g, ref, ref_len, ++line_no);
    return g->json->failed ? CK_ENOMEM : CK_OK;
}

static int store_name_order(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The evidence file names of folder `dir`, sorted. A missing folder has none. */
static int store_list_names(const char *dir, char ***names, size_t *count, ck_error *err) {
    *names = NULL;
    *count = 0;
    size_t cap = 0;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? CK_OK : store_io_fail(err, errno, dir);
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
    if (!rc && errno) rc = store_io_fail(err, errno, dir);
    closedir(d);
    if (!rc && *count > 1) qsort(*names, *count, sizeof **names, store_name_order);
    return rc;
}

/* Searches every evidence file of the session, in name order. An id kept as itself is
 * reported as the id; a hashed name as the file name, which store_open_ref accepts back. */
static int store_grep_session(const ck__store *s, store_grep *g, ck_error *err) {
    char **names;
    size_t count;
    int rc = store_list_names(s->results, &names, &count, err);
    for (size_t i = 0; !rc && i < count && g->hits < g->max_hits; i++) {
        char *path = store_concat(s->results, "/", names[i]);
        if (!path) {
            rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
            break;
        }
        store_src src = {store_open_regular(path), NULL, 0, 0};
        if (src.fd == STORE_IO) rc = store_io_fail(err, errno, path);
        if (src.fd >= 0) {
            size_t len = strlen(names[i]);
            if (!strchr(names[i], '~')) len -= 4;
            rc = store_grep_src(g, &src, names[i], len);
            int e = errno;
            store_src_close(&src);
            if (rc == CK_EIO) rc = store_io_fail(err, e, path);
            else if (rc) rc = ck__fail(err, rc, NULL, CK_NONE, NULL);
        }
        ck__free(path);
    }
    for (size_t i = 0; i < count; i++) ck__free(names[i]);
    ck__free(names);
    return rc;
}

static int store_grep_ref(const ck__store *s, store_grep *g, const char *ref, size_t ref_len,
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

int ck__store_search(const ck__store *s, const char *ref, size_t ref_len, const char *pattern,
                     size_t max_hits, const char *const *refs, size_t n_refs, char **out,
                     size_t *out_len, ck_error *err) {
    ck__error_clear(err);
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!pattern) return ck__fail(err, CK_EINVAL, "no pattern", CK_NONE, "pattern");
    regex_t re;
    int bad = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
    if (bad == REG_ESPACE) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    if (bad) {
        return ck__fail(err, CK_EINVAL, "not a valid POSIX extended regular expression", CK_NONE,
                        "pattern");
    }
    ck__buf json;
    ck__buf_init(&json);
    ck__buf_addc(&json, '[');
    store_grep g = {&re, max_hits, 0, &json, {NULL, 0, 0, 0}};
    int rc;
    if (ref) {
        rc = store_grep_ref(s, &g, ref, ref_len, err);
    } else if (s->be.get) {
        /* A backend cannot be listed: the session's evidence is what the caller knows of. */
        rc = CK_OK;
        for (size_t i = 0; !rc && i < n_refs && g.hits < max_hits; i++)
            rc = store_grep_ref(s, &g, refs[i], strlen(refs[i]), err);
    } else {
        rc = store_grep_session(s, &g, err);
    }
    regfree(&re);
    ck__buf_dispose(&g.line);
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

/* ---- audit log ---- */

static int store_open_log(const char *path) {
    int fd;
    do fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    while (fd < 0 && errno == EINTR);
    return fd;
}

int ck__store_append_record(ck__store *s, const char *line, size_t len, ck_error *err) {
    ck__error_clear(err);
    if (len > SIZE_MAX - 2) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    /* One buffer holds an optional leading newline, the record and its newline, so that one
     * write() puts the whole line down and O_APPEND keeps concurrent appenders from splicing
     * into each other. A newline inside the record would split it into two log lines; in JSON
     * text a raw newline can only be whitespace, so it becomes a space. */
    char *rec = ck__malloc(len + 2);
    if (!rec) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    rec[0] = '\n';
    for (size_t i = 0; i < len; i++) rec[i + 1] = line[i] == '\n' ? ' ' : line[i];
    rec[len + 1] = '\n';
    int rc = CK_OK;
    /* As for evidence, the folder is made only when the log cannot be opened without it. */
    int fd = store_open_log(s->log_path);
    if (fd < 0 && store_mkdirs(s->log_dir)) {
        rc = store_io_fail(err, errno, s->log_dir);
        ck__free(rec);
        return rc;
    }
    if (fd < 0) fd = store_open_log(s->log_path);
    if (fd < 0) {
        rc = store_io_fail(err, errno, s->log_path);
        ck__free(rec);
        return rc;
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
    close(fd);
    ck__free(rec);
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

int ck__store_last_record(const ck__store *s, char **out, size_t *out_len, ck_error *err) {
    ck__error_clear(err);
    *out = NULL;
    if (out_len) *out_len = 0;
    int fd;
    do fd = open(s->log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return CK_OK;
        return store_io_fail(err, errno, s->log_path);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno ? errno : EIO;
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
