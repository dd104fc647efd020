/* The store folder of a fuzz target that writes evidence: one per process, made on first use
 * and removed when the process exits normally (libFuzzer calls exit() when its runs or its
 * time are up), so neither `make fuzz` nor `make fuzz-regress` leaves folders in /tmp. A
 * crash leaves the folder in place, to look at. */
#ifndef CK_FUZZ_STORE_H_
#define CK_FUZZ_STORE_H_

#include <stdio.h>
#include <stdlib.h>

#include "../tests/c/tree.h"

static char fuzz_store_path[64];

static void fuzz_store_remove(void) { h_remove_tree(fuzz_store_path); }

/* "/tmp/ck_fuzz_<target>_XXXXXX", made by the first call; later calls return the same. */
static const char *fuzz_store(const char *target) {
    if (!fuzz_store_path[0]) {
        snprintf(fuzz_store_path, sizeof fuzz_store_path, "/tmp/ck_fuzz_%s_XXXXXX", target);
        if (!mkdtemp(fuzz_store_path)) __builtin_trap();
        atexit(fuzz_store_remove);
    }
    return fuzz_store_path;
}

#endif
