/* fs_util.h - model directories for the unit tests that load from a real repository
 * (test_repository.c, test_ensemble.c): a file written with its folders, a tree removed. */
#ifndef NR_TEST_FS_UTIL_H
#define NR_TEST_FS_UTIL_H

#include "../../src/common/alloc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void put_file(const char *dir, const char *rel, const char *text)
{
    char *path = nr_asprintf("%s/%s", dir, rel);
    for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
    free(path);
}

static inline void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char *sub = nr_asprintf("%s/%s", path, e->d_name);
            remove_tree(sub);
            free(sub);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

#endif
