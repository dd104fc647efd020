/* Removing a folder and everything in it, for the C tests and the fuzz targets that make
 * temporary stores. Symbolic links are removed, not followed; each folder is made writable
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

#endif
