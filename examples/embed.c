/* embed.c - nereid in a program of its own (include/nereid.h, libnereid.so): a server over a
 * model repository, in this process, with no port open; one request to `simple` (INPUT0 +
 * INPUT1 and INPUT0 - INPUT1 of two 16-element INT32 tensors), its outputs written into this
 * program's own buffers, checked, and printed.
 *
 *   build/bin/nereid-embed examples/model_repository
 *
 * Exit status 0 when every answer is right.
 */
#include <nereid.h>

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(nereid_error_t *e, const char *what)
{
    fprintf(stderr, "embed: %s: %s - %s\n", what, nereid_error_code_name(e),
            nereid_error_message(e));
    nereid_error_delete(e);
    return 1;
}

/* How many sockets this process has open (the server was asked for no port). */
static int sockets_open(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[300], target[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof(target) - 1);
        if (len > 0) {
            target[len] = '\0';
            n += strncmp(target, "socket:", 7) == 0;
        }
    }
    if (d != NULL)
        closedir(d);
    return n;
}

/* The outputs land here: this program's memory, not the backend's. */
static int32_t out_buf[2][16];

static void *alloc(void *arg, const char *name, size_t byte_size)
{
    int k = strcmp(name, "OUTPUT0") == 0 ? 0 : 1;
    return byte_size <= sizeof(out_buf[k]) ? out_buf[k] : NULL;
}

/* The completion may run on nereid's threads: hand the response over and wake main. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static nereid_response_t *answer;

static void complete(void *arg, nereid_response_t *resp)
{
    pthread_mutex_lock(&mu);
    answer = resp;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <model repository>\n", argv[0]);
        return 2;
    }
    nereid_options_t *o;
    nereid_error_t *e = nereid_options_new(&o);
    if (e == NULL)
        e = nereid_options_set(o, "model-repository", argv[1]);
    if (e == NULL) /* only what this program needs */
        e = nereid_options_set(o, "model-control-mode", "explicit");
    if (e == NULL)
        e = nereid_options_set(o, "load-model", "simple");
    if (e == NULL)
        e = nereid_options_set(o, "log-info", "false");
    if (e != NULL)
        return fail(e, "options");
    nereid_server_t *s;
    e = nereid_server_new(o, &s);
    nereid_options_delete(o);
    if (e != NULL)
        return fail(e, "server");
    printf("ready: %s, sockets open: %d\n", nereid_server_is_ready(s) ? "yes" : "no",
           sockets_open());

    int32_t a[16], b[16];
    for (int i = 0; i < 16; i++)
        a[i] = i, b[i] = 1;
    const int64_t shape[2] = {1, 16};
    nereid_request_t *r;
    e = nereid_request_new(s, "simple", -1, &r);
    if (e == NULL)
        e = nereid_request_set_id(r, "embedded-1");
    if (e == NULL)
        e = nereid_request_add_input(r, "INPUT0", "INT32", shape, 2, a, sizeof(a));
    if (e == NULL)
        e = nereid_request_add_input(r, "INPUT1", "INT32", shape, 2, b, sizeof(b));
    if (e == NULL) {
        nereid_request_set_allocator(r, alloc, NULL);
        e = nereid_infer_async(r, complete, NULL);
    }
    if (e != NULL) {
        nereid_request_delete(r);
        nereid_server_delete(s);
        return fail(e, "request");
    }
    pthread_mutex_lock(&mu);
    while (answer == NULL)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);

    int bad = 0;
    const nereid_error_t *re = nereid_response_error(answer);
    if (re != NULL) {
        fprintf(stderr, "embed: inference: %s\n", nereid_error_message(re));
        bad = 1;
    }
    for (size_t k = 0; !bad && k < nereid_response_output_count(answer); k++) {
        const char *name, *dt;
        const int64_t *dims;
        size_t nd, size;
        const void *data;
        e = nereid_response_output(answer, k, &name, &dt, &dims, &nd, &data, &size);
        if (e != NULL)
            return fail(e, "output");
        const int32_t *v = data;
        int which = strcmp(name, "OUTPUT0") == 0 ? 0 : 1;
        printf("%s %s [%lld,%lld] in %s memory:", name, dt, (long long)dims[0],
               (long long)dims[1], data == out_buf[which] ? "the program's" : "nereid's");
        for (int i = 0; i < 16; i++) {
            printf(" %d", v[i]);
            bad |= v[i] != (which == 0 ? a[i] + b[i] : a[i] - b[i]) || data != out_buf[which];
        }
        printf("\n");
    }
    printf("id: %s\n", nereid_response_id(answer));
    nereid_response_delete(answer);
    nereid_statistics_t st;
    e = nereid_model_statistics(s, "simple", -1, &st);
    if (e != NULL)
        return fail(e, "statistics");
    printf("simple: %llu inference(s), %llu execution(s)\n",
           (unsigned long long)st.inference_count, (unsigned long long)st.execution_count);
    nereid_server_delete(s);
    printf(bad ? "embed: wrong answer\n" : "embed: ok\n");
    return bad;
}
