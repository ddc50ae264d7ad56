/* capi_load.c - requests through the C API (include/nereid.h), for bench/capi.py: a server
 * over a repository with no port open, identity_fp32 on 16 floats, the output copied into
 * this program's buffer (the allocator), one request at a time from one thread, each waited
 * for. Prints the process's CPU time per request (user + system, getrusage: the server and
 * its caller are one process here) and requests/s.
 *
 *   build/bin/bench-capi-load <repository> <requests>
 */
#include <nereid.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static float out[16];
static void *alloc(void *arg, const char *name, size_t size)
{
    return size <= sizeof(out) ? out : NULL;
}

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

static int one(nereid_server_t *s, const float *in)
{
    static const int64_t shape[2] = {1, 16};
    nereid_request_t *r;
    nereid_error_t *e = nereid_request_new(s, "identity_fp32", -1, &r);
    if (e == NULL)
        e = nereid_request_add_input(r, "INPUT0", "FP32", shape, 2, in, 64);
    if (e == NULL) {
        nereid_request_set_allocator(r, alloc, NULL);
        e = nereid_infer_async(r, complete, NULL);
    }
    if (e != NULL) {
        fprintf(stderr, "request: %s\n", nereid_error_message(e));
        return 1;
    }
    pthread_mutex_lock(&mu);
    while (answer == NULL)
        pthread_cond_wait(&cv, &mu);
    nereid_response_t *resp = answer;
    answer = NULL;
    pthread_mutex_unlock(&mu);
    int bad = nereid_response_error(resp) != NULL || memcmp(out, in, 64) != 0;
    nereid_response_delete(resp);
    return bad;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return fprintf(stderr, "usage: %s <repository> <requests>\n", argv[0]), 2;
    long n = atol(argv[2]);
    nereid_options_t *o;
    nereid_server_t *s;
    nereid_error_t *e = nereid_options_new(&o);
    if (e == NULL)
        e = nereid_options_set(o, "model-repository", argv[1]);
    if (e == NULL)
        e = nereid_options_set(o, "log-info", "false");
    if (e == NULL)
        e = nereid_server_new(o, &s);
    nereid_options_delete(o);
    if (e != NULL)
        return fprintf(stderr, "server: %s\n", nereid_error_message(e)), 1;
    float in[16];
    for (int i = 0; i < 16; i++)
        in[i] = (float)i / 10;
    int bad = 0;
    for (int i = 0; i < 2000; i++) /* warm up: sessions, caches, the inline path */
        bad |= one(s, in);
    double c0 = cpu_s(), w0 = wall_s();
    for (long i = 0; i < n; i++)
        bad |= one(s, in);
    double cpu = cpu_s() - c0, wall = wall_s() - w0;
    printf("cpu_us_per_request=%.2f rps=%.0f\n", cpu / (double)n * 1e6, (double)n / wall);
    nereid_server_delete(s);
    return bad;
}
