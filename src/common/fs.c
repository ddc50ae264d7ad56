/* fs.c - file-system helpers (fs.h). */
#include "fs.h"

#include "alloc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void nr_remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *sub = nr_asprintf("%s/%s", path, de->d_name);
        nr_remove_tree(sub);
        free(sub);
    }
    if (d != NULL)
        closedir(d);
    rmdir(path);
}
