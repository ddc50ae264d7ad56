/* config_dirs.h - runs a check over every config of a directory: the config
 * unit tests' round trips over examples/model_repository and the fuzz seed
 * corpus. Include after nr_test.h. */
#ifndef NR_TEST_CONFIG_DIRS_H
#define NR_TEST_CONFIG_DIRS_H

#include "../../src/common/alloc.h"
#include "../../src/config/model_config.h"

#include <dirent.h>

/* Calls check(cfg, path) for every config of dir (dir/<entry>/sub when sub is
 * set; files that are no config are passed over); returns how many it
 * returned > 0 for. check owns cfg. */
static int nr_test_config_dir(const char *dir, const char *sub,
                              int (*check)(nr_model_config_t *cfg, const char *path))
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        nr_test_fail(__FILE__, __LINE__, "cannot open %s (run from the repository root)", dir);
        return 0;
    }
    int ok = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *path = nr_asprintf("%s/%s%s%s", dir, e->d_name, sub ? "/" : "", sub ? sub : "");
        nr_model_config_t *cfg;
        nr_status_t *st = nr_cfg_parse_file(path, &cfg);
        if (st == NULL && check(cfg, path) > 0)
            ok++;
        nr_status_free(st);
        free(path);
    }
    closedir(d);
    return ok;
}

#endif
