/* Removing a folder and everything in it, and counting what it holds, for the C tests and
 * the fuzz targets that make temporary stores. Symbolic links are removed, not followed; each folder is made writable
 * first, so a test that took a permission away still leaves nothing behind. */
#ifndef CK_TEST_TREE_H_
#define CK_TEST_TREE_H_

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void h_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    chmod(path, 0700);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char child[PATH_MAX];
        /* A path cut short would name something else: skip it rather than remove that. */
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child) continue;
        h_remove_tree(child);
    }
    if (d) closedir(d);
    rmdir(path);
}

/* The number of files and folders under `path` (0 when it is missing), sizes ignored: what
 * a test compares to tell that nothing was written. */
static inline long h_count_tree(const char *path) {
    DIR *d = opendir(path);
    long n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char child[PATH_MAX];
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child) continue;
        struct stat st;
        n += 1 + (lstat(child, &st) == 0 && S_ISDIR(st.st_mode) ? h_count_tree(child) : 0);
    }
    if (d) closedir(d);
    return n;
}

#endif
