/* fs.c - file-system helpers (fs.h). */
#include "fs.h"

#include "alloc.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void nr_remove_tree(const char *path)
{
    /* depth first (contents before their directory), links not followed */
    nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *nr_make_tmpdir(const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = nr_asprintf("%s/%sXXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp", prefix);
    if (mkdtemp(dir) == NULL) {
        free(dir);
        return NULL;
    }
    return dir;
}
