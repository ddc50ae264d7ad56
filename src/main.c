/* main.c - nereid: parse Triton's flags (api/options.h), bring the server up (api/boot.h:
 * load the model repositories, print the status tables, start the frontends once every model
 * finished loading), then wait for SIGINT/SIGTERM, drain in-flight requests and stop.
 */
#include "api/boot.h"
#include "api/options.h"
#include "common/log.h"
#include "core/cache.h"
#include "core/host_policy.h"
#include "core/rate_limit.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage_exit(int code)
{
    nr_opts_usage(code == 0 ? stdout : stderr);
    exit(code);
}

/* A refused option, in the form Triton's command line reports it (api/options.h). */
static void refused(const char *flag, size_t len, nr_status_t *st)
{
    switch (st->code) {
    case NR_NOT_FOUND:
        fprintf(stderr, "nereid: %s\n", st->msg);
        usage_exit(2);
        break;
    case NR_INVALID_ARG:
        nr_opts_usage(stderr);
        fprintf(stderr, "Bad option: \"--%.*s\".\n%s\n", (int)len, flag, st->msg);
        exit(2);
    case NR_UNKNOWN:
        nr_opts_usage(stderr);
        fprintf(stderr, "\nBad option: \"--%.*s\".\n%s\n\n", (int)len, flag, st->msg);
        exit(1);
    case NR_UNSUPPORTED:
        fprintf(stderr, "%s\n", st->msg);
        exit(2);
    default:
        fprintf(stderr, "%s\n", st->msg);
        exit(1);
    }
}

static void parse_args(int argc, char **argv, nr_opts_t *o)
{
    size_t n;
    const nr_cli_opt_t *t = nr_opts_flags(&n);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "nereid: unexpected argument '%s'\n", a);
            usage_exit(2);
        }
        a += 2;
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const nr_cli_opt_t *f = nr_cli_find(t, n, a, len);
        if (f == NULL) {
            fprintf(stderr, "nereid: unrecognized option '%s'\n", argv[i]);
            usage_exit(2);
        }
        const char *v = eq ? eq + 1 : NULL;
        if (f->kind == NR_CLI_FLAG) {
            if (eq) {
                fprintf(stderr, "nereid: option '--%s' doesn't allow an argument\n", f->name);
                usage_exit(2);
            }
            if (!strcmp(f->name, "help"))
                usage_exit(0);
        } else if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nereid: option '--%s' requires an argument\n", f->name);
                usage_exit(2);
            }
            v = argv[++i];
        }
        nr_status_t *st = nr_opts_set(o, a, len, v);
        if (st != NULL)
            refused(a, len, st);
    }
}

int main(int argc, char **argv)
{
    nr_opts_t o;
    nr_opts_init(&o);
    parse_args(argc, argv, &o);
    int rc = 1;
    nr_status_t *st = nr_opts_finish(&o);
    if (st != NULL) { /* (Triton exits 1 on these) */
        fprintf(stderr, "%s\n", st->msg);
        nr_status_free(st);
        goto out;
    }
    st = nr_opts_apply_log(&o);
    if (st != NULL) {
        fprintf(stderr, "error: %s\n", st->msg);
        nr_status_free(st);
        goto out;
    }
    /* Block the stop signals before any thread starts so that only sigwait sees them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    nr_boot_t *b;
    bool frontend_failed;
    st = nr_boot_start(&o, &frontend_failed, &b);
    if (st != NULL) {
        if (!frontend_failed) /* (a frontend's failure is logged already) */
            fprintf(stderr, "error: creating server: %s - %s\n", nr_status_code_name(st->code),
                    st->msg);
        nr_status_free(st);
        goto out;
    }
    int sig = 0;
    sigwait(&stop, &sig);
    NR_LOG_INFO("Signal (%d) received.", sig);
    if (!nr_boot_drain(b)) { /* as Triton: a request that never ends does not hold the exit */
        NR_LOG_ERROR("Exit timeout expired. Exiting immediately.");
        fflush(NULL);
        _exit(1); /* the Python stubs end with their sockets */
    }
    nr_boot_stop(b);
    rc = 0;
out: /* the options' lists and the host policies: what every exit still holds */
    nr_opts_free(&o);
    nr_host_policy_clear();
    nr_rl_clear();
    nr_cache_clear();
    return rc;
}
