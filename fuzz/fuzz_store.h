/* The store folder of a fuzz target that writes evidence: one per process, made on first use
 * and removed when the process exits normally (libFuzzer calls exit() when its runs or its
 * time are up), so neither `make fuzz` nor `make fuzz-regress` leaves folders in /tmp. A
 * crash leaves the folder in place, to look at. */
#ifndef CK_FUZZ_STORE_H_
#define CK_FUZZ_STORE_H_

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../tests/c/tree.h"

static char fuzz_store_path[64];

static void fuzz_store_remove(void) { h_remove_tree(fuzz_store_path); }

/* "<tmp>/ck_fuzz_<target>_XXXXXX", made by the first call; later calls return the same. The
 * folder is on /dev/shm where there is one: the store fsyncs every file it writes, which on a
 * disk would make each run cost milliseconds. */
static const char *fuzz_store(const char *target) {
    if (!fuzz_store_path[0]) {
        const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_store_path, sizeof fuzz_store_path, "%s/ck_fuzz_%s_XXXXXX", tmp, target);
        if (!mkdtemp(fuzz_store_path)) __builtin_trap();
        atexit(fuzz_store_remove);
    }
    return fuzz_store_path;
}

#endif
