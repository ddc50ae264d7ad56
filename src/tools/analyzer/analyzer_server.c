/* analyzer_server.c - the server nereid-analyzer measures (analyzer.h).
 *
 * Local launch mode (Model Analyzer's default): one nereid process for the whole profile,
 * started with --model-control-mode=explicit on free loopback ports, its log in
 * <export-path>/nereid.log; each variant is loaded into it with a config override and
 * unloaded after its sweep (Model Analyzer restarts its server for every variant; nereid's
 * repository API makes that unnecessary, and the process's memory is read between loads).
 * Remote mode: a server already running in explicit mode; no memory or CPU figures then.
 */
#include "analyzer.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"
#include "../../common/json.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A loopback port nobody listens on now. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* The nereid beside this program (build/bin/), else the one on PATH. */
static char *default_server_path(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            strcpy(slash + 1, "nereid");
            if (access(self, X_OK) == 0)
                return nr_strdup(self);
        }
    }
    return nr_strdup("nereid");
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The last lines of the server's log, for an error message. */
static void log_tail(const char *path, char *out, size_t len)
{
    out[0] = '\0';
    nr_buf_t b;
    nr_buf_init(&b);
    if (path && nr_buf_read_file(&b, path, 1 << 20) == 0 && b.len > 0) {
        size_t start = b.len > 400 ? b.len - 400 : 0;
        snprintf(out, len, "%.*s", (int)(b.len - start), b.data + start);
    }
    nr_buf_free(&b);
}

static nr_status_t *wait_ready(az_server_t *s, int seconds)
{
    for (int i = 0; i < seconds * 10; i++) {
        perf_resp_t r;
        nr_status_t *st = perf_exchange(&s->conn, "GET", "/v2/health/ready", NULL, NULL, 0, &r);
        if (st == NULL && r.status == 200)
            return NULL;
        nr_status_free(st);
        if (s->pid > 0) {
            int ws;
            if (waitpid(s->pid, &ws, WNOHANG) == s->pid) {
                s->pid = 0;
                char tail[512];
                log_tail(s->log_path, tail, sizeof(tail));
                return nr_status_new(NR_INTERNAL, "the server exited before it was ready; "
                                     "the end of %s:\n%s", s->log_path, tail);
            }
        }
        sleep_ms(100);
    }
    return nr_status_new(NR_UNAVAILABLE, "the server at %s was not ready within %d s",
                         s->http_url, seconds);
}

/* Starts the server (local mode: a new process; its log truncated on the first start and
 * appended to after a restart). */
static nr_status_t *start(az_server_t *s, const az_opts_t *o, bool restart)
{
    memset(s, 0, sizeof(*s));
    s->conn.fd = -1;
    nr_status_t *st;
    if (strcmp(o->launch_mode, "remote") == 0) {
        snprintf(s->http_url, sizeof(s->http_url), "%s", o->http_endpoint);
        snprintf(s->url, sizeof(s->url), "%s", o->http_endpoint);
        if ((st = perf_conn_init(&s->conn, s->http_url)) != NULL)
            return st;
        return wait_ready(s, 10);
    }
    int http = free_port(), grpc = free_port();
    if (http < 0 || grpc < 0)
        return nr_status_new(NR_INTERNAL, "no free port: %s", strerror(errno));
    bool use_grpc = strcmp(o->protocol, "grpc") == 0;
    snprintf(s->http_url, sizeof(s->http_url), "127.0.0.1:%d", http);
    snprintf(s->url, sizeof(s->url), "127.0.0.1:%d", use_grpc ? grpc : http);
    nr_buf_t lp;
    nr_buf_init(&lp);
    nr_buf_printf(&lp, "%s/nereid.log", o->export_path);
    s->log_path = nr_buf_steal(&lp, NULL);
    char *bin = o->server_path ? nr_strdup(o->server_path) : default_server_path();
    char a_repo[PATH_MAX + 32], a_http[32], a_grpc[32], a_allow[32];
    snprintf(a_repo, sizeof(a_repo), "--model-repository=%s", o->repo);
    snprintf(a_http, sizeof(a_http), "--http-port=%d", http);
    snprintf(a_grpc, sizeof(a_grpc), "--grpc-port=%d", grpc);
    snprintf(a_allow, sizeof(a_allow), "--allow-grpc=%s", use_grpc ? "true" : "false");
    char *fixed[] = {bin, a_repo, "--model-control-mode=explicit", a_http,
                     "--http-address=127.0.0.1", a_grpc, "--grpc-address=127.0.0.1", a_allow,
                     "--allow-metrics=false"};
    int logfd = open(s->log_path, O_WRONLY | O_CREAT | (restart ? O_APPEND : O_TRUNC) | O_CLOEXEC,
                     0644);
    if (logfd < 0) {
        st = nr_status_new(NR_INVALID_ARG, "cannot write %s: %s", s->log_path, strerror(errno));
        free(bin);
        return st;
    }
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        close(logfd);
        free(bin);
        return nr_status_new(NR_INTERNAL, "pipe: %s", strerror(errno));
    }
    size_t n_fixed = sizeof(fixed) / sizeof(fixed[0]), n_pin = 0;
    char **pin = NULL; /* the host policies the pinned variants name, for any instance count */
    for (int k = 2; o->refine[AZ_TUNE_PIN] && k <= (o->max_inst > 4 ? o->max_inst : 4); k++) {
        az_policy_t pol[AZ_MAX_POLICIES];
        az_pin_flags(pol, az_pin_layout(k, pol, AZ_MAX_POLICIES), &pin, &n_pin);
    }
    char **argv = nr_calloc(n_fixed + n_pin + 1, sizeof(*argv));
    memcpy(argv, fixed, sizeof(fixed));
    if (n_pin)
        memcpy(argv + n_fixed, pin, n_pin * sizeof(*pin));
    pid_t pid = fork();
    if (pid == 0) {
        dup2(logfd, 1);
        dup2(logfd, 2);
        execvp(bin, argv);
        int e = errno;
        (void)!write(errpipe[1], &e, sizeof(e));
        _exit(127);
    }
    for (size_t i = 0; i < n_pin; i++)
        free(pin[i]);
    free(pin);
    free(argv);
    close(errpipe[1]);
    close(logfd);
    int e = 0;
    ssize_t got = pid > 0 ? read(errpipe[0], &e, sizeof(e)) : 0;
    close(errpipe[0]);
    if (pid < 0 || got == (ssize_t)sizeof(e)) {
        if (pid > 0)
            waitpid(pid, NULL, 0);
        st = nr_status_new(NR_INVALID_ARG,
                           "cannot start the server '%s': %s (--triton-server-path)", bin,
                           strerror(pid < 0 ? errno : e));
        free(bin);
        return st;
    }
    free(bin);
    s->pid = pid;
    if ((st = perf_conn_init(&s->conn, s->http_url)) != NULL)
        return st;
    return wait_ready(s, 60);
}

nr_status_t *az_server_start(az_server_t *s, const az_opts_t *o)
{
    return start(s, o, false);
}

bool az_server_exited(az_server_t *s, unsigned wait_ms, char *how, size_t len)
{
    int ws = 0;
    pid_t got = 0;
    for (unsigned waited = 0; s->pid > 0; waited += 20) {
        if ((got = waitpid(s->pid, &ws, WNOHANG)) != 0 || waited >= wait_ms)
            break;
        sleep_ms(20); /* a killed process closes its sockets before it can be reaped */
    }
    if (s->pid <= 0 || got != s->pid)
        return false;
    s->pid = 0;
    if (WIFSIGNALED(ws))
        snprintf(how, len, "killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    else
        snprintf(how, len, "exit status %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    return true;
}

nr_status_t *az_server_restart(az_server_t *s, const az_opts_t *o)
{
    az_server_stop(s);
    return start(s, o, true);
}

void az_server_stop(az_server_t *s)
{
    perf_conn_close(&s->conn);
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int ws;
        for (int i = 0; i < 100 && waitpid(s->pid, &ws, WNOHANG) == 0; i++)
            sleep_ms(100);
        if (waitpid(s->pid, &ws, WNOHANG) == 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &ws, 0);
        }
        s->pid = 0;
    }
    free(s->log_path);
    s->log_path = NULL;
}

static nr_status_t *post(az_server_t *s, const char *path, const nr_buf_t *body, const char *what)
{
    perf_resp_t r;
    nr_status_t *st = perf_exchange(&s->conn, "POST", path, NULL, body ? body->data : NULL,
                                    body ? body->len : 0, &r);
    if (st)
        return st;
    if (r.status != 200) {
        char *text = perf_error_text(&r);
        st = nr_status_new(NR_INVALID_ARG, "%s: %s", what, text);
        free(text);
    }
    return st;
}

nr_status_t *az_server_load(az_server_t *s, const char *model, const char *config_json)
{
    char path[512];
    snprintf(path, sizeof(path), "/v2/repository/models/%s/load", model);
    nr_buf_t b;
    nr_buf_init(&b);
    if (config_json) {
        nr_buf_puts(&b, "{\"parameters\":{\"config\":");
        nr_buf_json_str(&b, config_json, strlen(config_json));
        nr_buf_puts(&b, "}}");
    }
    s->loads++;
    nr_status_t *st = post(s, path, config_json ? &b : NULL, "failed to load the model");
    nr_buf_free(&b);
    return st;
}

/* Whether the repository index still shows `model` UNLOADING (its last requests finishing,
 * its memory not yet freed). */
static bool still_unloading(az_server_t *s, const char *model)
{
    perf_resp_t r;
    nr_status_t *st = perf_exchange(&s->conn, "POST", "/v2/repository/index", NULL, "{}", 2, &r);
    if (st != NULL || r.status != 200) {
        nr_status_free(st);
        return false;
    }
    nr_json_doc_t *doc;
    const nr_jv_t *root;
    bool unloading = false;
    if ((st = nr_json_parse(r.body, r.body_len, &doc, &root)) == NULL) {
        for (size_t i = 0; root->type == NR_JV_ARRAY && i < root->n; i++) {
            const nr_jv_t *name = nr_jv_get(&root->u.items[i], "name");
            const nr_jv_t *state = nr_jv_get(&root->u.items[i], "state");
            if (name && state && name->type == NR_JV_STRING && state->type == NR_JV_STRING &&
                name->n == strlen(model) && memcmp(name->u.str, model, name->n) == 0 &&
                state->n == 9 && memcmp(state->u.str, "UNLOADING", 9) == 0)
                unloading = true;
        }
        nr_json_free(doc);
    }
    nr_status_free(st);
    return unloading;
}

/* Returns once the model is unloaded (at most 60 s), so that the next variant's memory is
 * measured from a server without it. */
nr_status_t *az_server_unload(az_server_t *s, const char *model)
{
    char path[512];
    snprintf(path, sizeof(path), "/v2/repository/models/%s/unload", model);
    nr_status_t *st = post(s, path, NULL, "failed to unload the model");
    for (int i = 0; st == NULL && i < 600 && still_unloading(s, model); i++)
        sleep_ms(100);
    return st;
}

nr_status_t *az_server_config(az_server_t *s, const char *model, char **json)
{
    char path[512];
    snprintf(path, sizeof(path), "/v2/models/%s/config", model);
    size_t len;
    return perf_get_body(&s->conn, path, json, &len);
}

/* A "Vm...:  <n> kB" line of /proc/<pid>/status, in bytes. */
static uint64_t status_kb(const az_server_t *s, const char *key)
{
    if (s->pid <= 0)
        return 0;
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)s->pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

uint64_t az_server_rss(const az_server_t *s)
{
    return status_kb(s, "VmRSS");
}

uint64_t az_server_peak_rss(const az_server_t *s)
{
    return status_kb(s, "VmHWM");
}

void az_server_reset_peak(const az_server_t *s)
{
    if (s->pid <= 0)
        return;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)s->pid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, "5", 1); /* resets VmHWM to the current RSS */
        close(fd);
    }
}

uint64_t az_server_cpu_ns(const az_server_t *s)
{
    if (s->pid <= 0)
        return 0;
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)s->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p == NULL)
        return 0;
    unsigned long long utime = 0, stime = 0;
    /* after ")": state(3) ... utime(14) stime(15) */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
               &stime) != 2)
        return 0;
    long hz = sysconf(_SC_CLK_TCK);
    return (utime + stime) * (1000000000ull / (unsigned long long)(hz > 0 ? hz : 100));
}

bool az_server_fresh(az_server_t *s, const az_opts_t *o)
{
    if (s->pid <= 0 || s->loads == 0)
        return true;
    nr_status_t *st = az_server_restart(s, o);
    if (st == NULL)
        return true;
    fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
    nr_status_free(st);
    return false;
}

bool az_server_check(az_server_t *s, const az_opts_t *o, const char *what, char **error,
                     bool *down)
{
    char how[128];
    if (!az_server_exited(s, *error ? 2000 : 0, how, sizeof(how)))
        return false;
    free(*error);
    *error = nr_asprintf("the server ended during this run (%s; its log: %s)", how,
                         s->log_path);
    fprintf(stderr, "nereid-analyzer: the server ended (%s) while %s was measured; "
            "starting a new one\n", how, what);
    nr_status_t *st = az_server_restart(s, o);
    if (st) {
        fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
        nr_status_free(st);
        *down = true;
    }
    return true;
}
