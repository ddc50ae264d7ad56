/* replay_main.c - runs a fuzz driver's LLVMFuzzerTestOneInput over files,
 * without libFuzzer, so that `make unit` (any compiler) and `make asan`
 * replay the seed corpus and every kept crasher as regression tests.
 * Arguments: files or directories; with none, tests/fuzz/corpus/<name>/ and
 * tests/fuzz/regress/<name>/ (NR_FUZZ_NAME, relative to NR_SRC_ROOT).
 * Ends with "<name>: N passed, 0 failed" (a failing input crashes or aborts).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t n_run;

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (nb == NULL)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf == NULL) {
        fprintf(stderr, "%s: out of memory\n", path);
        exit(1);
    }
    /* an exact-size copy, so that ASan sees reads past the end of the input */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    n_run++;
}

static void run_path(const char *path, int must_exist)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (must_exist) {
            perror(path);
            exit(1);
        }
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        run_file(path);
        return;
    }
    struct dirent **ents;
    int n = scandir(path, &ents, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        if (ents[i]->d_name[0] != '.') {
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
            run_path(p, 1);
        }
        free(ents[i]);
    }
    free(ents);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            run_path(argv[i], 1);
    } else {
        run_path(NR_SRC_ROOT "/tests/fuzz/corpus/" NR_FUZZ_NAME, 1);
        run_path(NR_SRC_ROOT "/tests/fuzz/regress/" NR_FUZZ_NAME, 0);
    }
    printf("replay_%s: %zu passed, 0 failed\n", NR_FUZZ_NAME, n_run);
    return 0;
}
