/* py_env.c - the interpreter a Python model runs with: the machine's python3, or the one of
 * its execution environment (the EXECUTION_ENV_PATH parameter, as Triton reads it): a
 * directory used as it is, or a packed environment (conda-pack's .tar.gz, any archive
 * libarchive reads) unpacked once into a directory of its own under $TMPDIR (or /tmp), again
 * when the archive changes, and removed when the server ends. As in Triton, the first
 * $$TRITON_MODEL_DIRECTORY in the path is the model's directory.
 *
 * Threads: models load on several threads; the unpacked environments are a list under a
 * mutex, held while one unpacks (two models naming one archive unpack it once).
 */
#include "py_int.h"

#include "../../common/alloc.h"
#include "../../common/fs.h"
#include "../../common/log.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef NR_PYTHON_DEFAULT
#define NR_PYTHON_DEFAULT "/usr/bin/python3"
#endif

typedef struct unpacked_s {
    struct unpacked_s *next;
    char *archive;     /* canonical path */
    struct timespec mtime;
    char *dir;         /* where it was unpacked */
} unpacked_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static unpacked_t *g_unpacked;
static bool g_cleanup_registered;

static void remove_all(void)
{
    for (unpacked_t *u = g_unpacked; u != NULL; u = u->next)
        nr_remove_tree(u->dir);
}

/* Unpacks `archive` into the new directory `dir`. */
static nr_status_t *unpack(const char *archive, const char *dir)
{
    struct archive *in = archive_read_new(), *out = archive_write_disk_new();
    archive_read_support_filter_all(in);
    archive_read_support_format_all(in);
    /* entries land under dir whatever their path says; none climbs out with ".." or writes
     * through a symbolic link it made */
    archive_write_disk_set_options(out, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                            ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                            ARCHIVE_EXTRACT_SECURE_SYMLINKS);
    archive_write_disk_set_standard_lookup(out);
    nr_status_t *st = NULL;
    const char *why = NULL;
    int rc = ARCHIVE_OK;
    if (archive_read_open_filename(in, archive, 1 << 16) != ARCHIVE_OK) {
        why = archive_error_string(in);
        goto done;
    }
    struct archive_entry *e;
    while ((rc = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
        char *path = nr_asprintf("%s/%s", dir, archive_entry_pathname(e));
        archive_entry_set_pathname(e, path);
        const char *link = archive_entry_hardlink(e);
        char *hard = link != NULL ? nr_asprintf("%s/%s", dir, link) : NULL;
        if (hard != NULL)
            archive_entry_set_hardlink(e, hard);
        free(path);
        free(hard);
        if (archive_write_header(out, e) != ARCHIVE_OK) {
            why = archive_error_string(out);
            goto done;
        }
        const void *buf;
        size_t size;
        la_int64_t off;
        while ((rc = archive_read_data_block(in, &buf, &size, &off)) == ARCHIVE_OK)
            if (archive_write_data_block(out, buf, size, off) != ARCHIVE_OK) {
                why = archive_error_string(out);
                goto done;
            }
        if (rc != ARCHIVE_EOF) {
            why = archive_error_string(in);
            goto done;
        }
        if (archive_write_finish_entry(out) != ARCHIVE_OK) {
            why = archive_error_string(out);
            goto done;
        }
    }
    if (rc != ARCHIVE_EOF)
        why = archive_error_string(in);
done:
    if (why != NULL || rc < ARCHIVE_WARN)
        st = nr_status_new(NR_INVALID_ARG, "failed to unpack the Python execution environment "
                           "'%s': %s", archive, why != NULL ? why : "unreadable archive");
    archive_read_free(in);
    archive_write_free(out);
    return st;
}

/* The directory of the environment at canonical path `real`: itself, or where it is
 * unpacked. */
static nr_status_t *env_dir(const char *real, const struct stat *sb, char **out)
{
    if (S_ISDIR(sb->st_mode)) {
        *out = nr_strdup(real);
        return NULL;
    }
    pthread_mutex_lock(&g_mu);
    unpacked_t *u = g_unpacked;
    while (u != NULL && strcmp(u->archive, real) != 0)
        u = u->next;
    nr_status_t *st = NULL;
    if (u == NULL || u->mtime.tv_sec != sb->st_mtim.tv_sec ||
        u->mtime.tv_nsec != sb->st_mtim.tv_nsec) { /* new, or changed since */
        char *dir = nr_make_tmpdir("python_env_");
        if (dir == NULL) {
            st = nr_status_new(NR_INTERNAL, "unable to make a directory for the Python "
                               "execution environment '%s': %s", real, strerror(errno));
        } else if ((st = unpack(real, dir)) != NULL) {
            nr_remove_tree(dir);
            free(dir);
        } else {
            NR_LOG_INFO("unpacked the Python execution environment %s into %s", real, dir);
            if (u == NULL) {
                u = nr_calloc(1, sizeof(*u));
                u->archive = nr_strdup(real);
                u->next = g_unpacked;
                g_unpacked = u;
            } else { /* the old one stays until the end: a running stub may use it */
                unpacked_t *old = nr_calloc(1, sizeof(*old));
                old->archive = nr_strdup("");
                old->dir = u->dir;
                old->next = g_unpacked;
                g_unpacked = old;
            }
            u->dir = dir;
            u->mtime = sb->st_mtim;
            if (!g_cleanup_registered)
                g_cleanup_registered = atexit(remove_all) == 0;
        }
    }
    if (st == NULL)
        *out = nr_strdup(u->dir);
    pthread_mutex_unlock(&g_mu);
    return st;
}

nr_status_t *nr_py_env_python(const char *env, const char *model_dir, char **out)
{
    if (env == NULL || env[0] == '\0') {
        *out = nr_strdup(access(NR_PYTHON_DEFAULT, X_OK) == 0 ? NR_PYTHON_DEFAULT : "python3");
        return NULL;
    }
    static const char var[] = "$$TRITON_MODEL_DIRECTORY";
    const char *at = strstr(env, var);
    char *path = at ? nr_asprintf("%.*s%s%s", (int)(at - env), env, model_dir, at + strlen(var))
                    : nr_strdup(env);
    char real[PATH_MAX];
    struct stat sb;
    if (realpath(path, real) == NULL || stat(real, &sb) != 0) {
        nr_status_t *st = nr_status_new(NR_INVALID_ARG, "Failed to get the canonical path for "
                                        "%s.", path);
        free(path);
        return st;
    }
    free(path);
    NR_LOG_INFO("Using Python execution env %s", real);
    char *dir = NULL;
    nr_status_t *st = env_dir(real, &sb, &dir);
    if (st != NULL)
        return st;
    char *py = nr_asprintf("%s/bin/python3", dir);
    free(dir);
    if (access(py, X_OK) != 0) {
        st = nr_status_new(NR_INVALID_ARG, "EXECUTION_ENV_PATH: no Python interpreter at '%s': "
                           "%s", py, strerror(errno));
        free(py);
        return st;
    }
    *out = py;
    return NULL;
}
