/* py_stub.c - the stub processes of the "python" backend: start one (posix_spawn, its control
 * socket and shared memory), exchange messages with it, grow the shared memory, stop it.
 *
 * The stub's Python sources (stub/nereid_stub.py, stub/triton_python_backend_utils.py) are
 * compiled into nereid (build/gen/python/py_sources.c) and handed to every stub as sealed
 * memfds, so an installed nereid needs no files beside its binary and a model cannot change
 * them. Why processes, sockets and shared memory: docs/architecture.md, "The Python backend".
 */
#include "py_int.h"

#include "../../common/alloc.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* build/gen/python/py_sources.c */
extern const char nr_py_stub_source[];
extern const size_t nr_py_stub_source_len;
extern const char nr_py_utils_source[];
extern const size_t nr_py_utils_source_len;

/* What python runs: the stub's source from descriptor 3. */
static const char loader[] =
    "import os;exec(compile(os.pread(3,os.fstat(3).st_size,0),'nereid_stub.py','exec'))";

/* ---- element type codes --------------------------------------------------------------------- */

/* TRITONSERVER_DataType: code i is kserve name codes[i]. */
static const char *const codes[] = {NULL,    "BOOL",  "UINT8", "UINT16", "UINT32",
                                    "UINT64", "INT8", "INT16", "INT32",  "INT64",
                                    "FP16",  "FP32",  "FP64",  "BYTES",  "BF16"};
#define N_CODES (sizeof(codes) / sizeof(codes[0]))

uint32_t nr_py_type_code(nr_dtype_t t)
{
    const char *n = nr_dtype_kserve_name(t);
    for (uint32_t i = 1; n != NULL && i < N_CODES; i++)
        if (strcmp(codes[i], n) == 0)
            return i;
    return 0;
}

nr_dtype_t nr_py_type_from_code(uint32_t code)
{
    if (code == 0 || code >= N_CODES)
        return NR_TYPE_INVALID;
    return nr_dtype_from_kserve(codes[code], strlen(codes[code]));
}

/* ---- the sources, as sealed memfds (made once, shared by every stub) ----------------------- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_src_fd = -1, g_utils_fd = -1;

static int sealed_memfd(const char *name, const char *data, size_t len)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    (void)fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    return fd;
}

static void make_sources(void)
{
    g_src_fd = sealed_memfd("nereid_stub.py", nr_py_stub_source, nr_py_stub_source_len);
    g_utils_fd = sealed_memfd("triton_python_backend_utils.py", nr_py_utils_source,
                              nr_py_utils_source_len);
}

/* ---- start and stop ------------------------------------------------------------------------- */

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

nr_status_t *nr_py_stub_start(nr_py_stub_t *s, const char *python, const char *mode,
                              const char *name)
{
    pthread_once(&g_once, make_sources);
    if (g_src_fd < 0 || g_utils_fd < 0)
        return nr_status_new(NR_INTERNAL, "unable to create the Python stub's sources: %s",
                             strerror(errno));
    s->pid = 0;
    s->sock = s->shm_fd = s->reply_fd = s->batch_fd = -1;
    s->shm = s->reply = s->batch = NULL;
    s->shm_size = s->reply_size = s->batch_size = 0;
    s->shm_head = s->reply_head = NULL;
    if (s->msg == NULL)
        s->msg = nr_malloc(NR_PY_MSG_MAX);
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return nr_status_new(NR_INTERNAL, "socketpair: %s", strerror(errno));
    s->sock = pair[0];
    s->shm_fd = memfd_create(name, MFD_CLOEXEC);
    s->reply_fd = memfd_create(name, MFD_CLOEXEC);
    s->batch_fd = memfd_create(name, MFD_CLOEXEC);
    nr_status_t *st = NULL;
    if (s->shm_fd < 0 || s->reply_fd < 0 || s->batch_fd < 0)
        st = nr_status_new(NR_INTERNAL, "memfd_create: %s", strerror(errno));
    if (st == NULL)
        st = nr_py_stub_reserve(s, s->shm_default ? s->shm_default : NR_PY_SHM_DEFAULT);
    if (st == NULL)
        st = nr_py_stub_reserve_reply(s, NR_PY_REPLY_HEAD);
    if (st == NULL)
        st = nr_py_stub_reserve_batch(s, s->shm_default ? s->shm_default : NR_PY_SHM_DEFAULT);
    if (st == NULL) {
        void *a = mmap(NULL, NR_PY_REPLY_HEAD, PROT_READ | PROT_WRITE, MAP_SHARED, s->shm_fd, 0);
        void *b = mmap(NULL, NR_PY_REPLY_HEAD, PROT_READ | PROT_WRITE, MAP_SHARED, s->reply_fd, 0);
        s->shm_head = a == MAP_FAILED ? NULL : a;
        s->reply_head = b == MAP_FAILED ? NULL : b;
        if (s->shm_head == NULL || s->reply_head == NULL)
            st = nr_status_new(NR_INTERNAL, "unable to map the shared memory's heads for '%s': "
                               "%s", name, strerror(errno));
    }
    if (st != NULL) {
        close(pair[1]);
        nr_py_stub_stop(s, 0);
        return st;
    }
    /* The child gets its six descriptors as 3..8: first out of that range here (CLOEXEC, so
     * nothing else leaks), then dup2'd into place by the spawn. */
    enum { N_FDS = 6 };
    int from[N_FDS] = {g_src_fd, g_utils_fd, pair[1], s->shm_fd, s->reply_fd, s->batch_fd};
    int high[N_FDS];
    for (int i = 0; i < N_FDS; i++)
        high[i] = fcntl(from[i], F_DUPFD_CLOEXEC, 16);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    for (int i = 0; i < N_FDS; i++)
        posix_spawn_file_actions_adddup2(&fa, high[i], 3 + i);
    /* Its own process group (a terminal's Ctrl-C is the server's to handle), no blocked signals. */
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    char *argv[] = {(char *)python, "-u", "-c", (char *)loader, (char *)mode, (char *)name, NULL};
    pid_t pid = 0;
    int rc = strchr(python, '/') ? posix_spawn(&pid, python, &fa, &at, argv, environ)
                                 : posix_spawnp(&pid, python, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    for (int i = 0; i < N_FDS; i++)
        if (high[i] >= 0)
            close(high[i]);
    close(pair[1]);
    if (rc != 0) {
        nr_py_stub_stop(s, 0);
        return nr_status_new(NR_INTERNAL, "unable to start the Python interpreter '%s': %s",
                             python, strerror(rc));
    }
    s->pid = pid;
    NR_LOG_VERBOSE(1, "started the Python stub of '%s' (pid %d, %s)", name, (int)pid, python);
    return NULL;
}

/* Reaps the stub, waiting up to timeout_ms before SIGKILL; *status gets waitpid's. */
static void reap(nr_py_stub_t *s, int timeout_ms, int *status)
{
    int ws = 0;
    struct timespec tick = {0, 2 * 1000 * 1000};
    for (int waited = 0; waitpid(s->pid, &ws, WNOHANG) == 0; waited += 2) {
        if (waited >= timeout_ms) {
            kill(s->pid, SIGKILL);
            while (waitpid(s->pid, &ws, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        nanosleep(&tick, NULL);
    }
    if (status)
        *status = ws;
    s->pid = 0;
}

void nr_py_stub_stop(nr_py_stub_t *s, int timeout_ms)
{
    if (s->pid > 0 && s->sock >= 0 && timeout_ms > 0 &&
        nr_py_stub_send(s, NR_PY_FINALIZE, 0, 0, 0) == NULL) {
        nr_py_hdr_t h;
        nr_status_t *st = nr_py_stub_wait(s, &h, timeout_ms, "finalize");
        if (st != NULL) {
            NR_LOG_WARN("%s", st->msg);
            nr_status_free(st);
        }
    }
    close_fd(&s->sock); /* the stub ends at end of file */
    if (s->pid > 0)
        reap(s, timeout_ms > 0 ? timeout_ms : 1000, NULL);
    if (s->shm != NULL)
        munmap(s->shm, s->shm_size);
    if (s->reply != NULL)
        munmap(s->reply, s->reply_size);
    if (s->batch != NULL)
        munmap(s->batch, s->batch_size);
    if (s->shm_head != NULL)
        munmap(s->shm_head, NR_PY_REPLY_HEAD);
    if (s->reply_head != NULL)
        munmap(s->reply_head, NR_PY_REPLY_HEAD);
    s->shm_head = s->reply_head = NULL;
    s->shm = s->reply = s->batch = NULL;
    s->shm_size = s->reply_size = s->batch_size = 0;
    close_fd(&s->shm_fd);
    close_fd(&s->reply_fd);
    close_fd(&s->batch_fd);
    free(s->msg);
    s->msg = NULL;
}

/* ---- shared memory -------------------------------------------------------------------------- */

/* Maps [0, size) of file fd (which holds at least that much) at *addr, *cur bytes so far. */
static nr_status_t *map(nr_py_stub_t *s, int fd, char **addr, size_t *cur, size_t size)
{
    void *p = *addr == NULL ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                            : mremap(*addr, *cur, size, MREMAP_MAYMOVE);
    if (p == MAP_FAILED)
        return nr_status_new(NR_INTERNAL, "unable to map %zu bytes of shared memory for '%s': %s",
                             size, s->name, strerror(errno));
    *addr = p;
    *cur = size;
    return NULL;
}

/* Grows file fd to at least `size` (in 1 MiB steps, Triton's shm-growth-byte-size) and maps
 * all of it. */
static nr_status_t *reserve(nr_py_stub_t *s, int fd, char **addr, size_t *cur, size_t size)
{
    if (size <= *cur)
        return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return nr_status_new(NR_INTERNAL, "fstat: %s", strerror(errno));
    if ((size_t)sb.st_size < size) {
        size_t step = s->shm_growth ? s->shm_growth : NR_PY_SHM_DEFAULT;
        size_t grown = (size + step - 1) / step * step;
        if (ftruncate(fd, (off_t)grown) != 0)
            return nr_status_new(NR_UNAVAILABLE,
                                 "unable to grow the shared memory of '%s' to %zu bytes: %s",
                                 s->name, grown, strerror(errno));
        size = grown;
    } else {
        size = (size_t)sb.st_size;
    }
    return map(s, fd, addr, cur, size);
}

nr_status_t *nr_py_stub_reserve(nr_py_stub_t *s, size_t size)
{
    return reserve(s, s->shm_fd, &s->shm, &s->shm_size, size);
}

nr_status_t *nr_py_stub_reserve_reply(nr_py_stub_t *s, size_t size)
{
    return reserve(s, s->reply_fd, &s->reply, &s->reply_size, size);
}

nr_status_t *nr_py_stub_reserve_batch(nr_py_stub_t *s, size_t size)
{
    return reserve(s, s->batch_fd, &s->batch, &s->batch_size, size);
}

/* A message whose body lies in the shared file: mapped (the stub may have grown the file). */
static nr_status_t *map_body(nr_py_stub_t *s, const nr_py_hdr_t *hdr)
{
    if (hdr->off > SIZE_MAX - hdr->len)
        return nr_status_new(NR_INTERNAL, "the Python stub of '%s' sent a bad message", s->name);
    if (hdr->off + hdr->len <= s->shm_size)
        return NULL;
    struct stat sb;
    if (fstat(s->shm_fd, &sb) != 0 || (uint64_t)sb.st_size < hdr->off + hdr->len)
        return nr_status_new(NR_INTERNAL, "the Python stub of '%s' answered beyond its shared "
                             "memory", s->name);
    return map(s, s->shm_fd, &s->shm, &s->shm_size, (size_t)sb.st_size);
}

/* ---- messages ------------------------------------------------------------------------------- */

static nr_status_t *gone(nr_py_stub_t *s, const char *what);

nr_status_t *nr_py_stub_send(nr_py_stub_t *s, uint32_t kind, uint32_t arg, uint64_t off,
                             uint64_t len)
{
    nr_py_hdr_t h = {.kind = kind, .arg = arg, .off = off, .len = len};
    ssize_t w;
    do
        w = send(s->sock, &h, sizeof(h), MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w == (ssize_t)sizeof(h))
        return NULL;
    return gone(s, "a send");
}

/* One log line from the stub, in the server's log as if written at model.py:<line>. */
static void stub_log(const char *body, size_t len)
{
    if (len < sizeof(nr_py_log_t) + 1)
        return;
    nr_py_log_t lh;
    memcpy(&lh, body, sizeof(lh));
    const char *file = body + sizeof(lh), *end = body + len;
    const char *nul = memchr(file, '\0', (size_t)(end - file));
    if (nul == NULL)
        return;
    const char *text = nul + 1;
    int tlen = (int)(end - text);
    switch (lh.level) {
    case 1: if (nr_log_settings.warn) nr_log_write(NR_LOG_LVL_WARN, file, (int)lh.line, "%.*s", tlen, text); break;
    case 2: if (nr_log_settings.error) nr_log_write(NR_LOG_LVL_ERROR, file, (int)lh.line, "%.*s", tlen, text); break;
    case 3: if (nr_log_settings.verbose >= 1) nr_log_write(NR_LOG_LVL_VERBOSE, file, (int)lh.line, "%.*s", tlen, text); break;
    default: if (nr_log_settings.info) nr_log_write(NR_LOG_LVL_INFO, file, (int)lh.line, "%.*s", tlen, text); break;
    }
}

/* The stub's socket closed: reap it and say how it ended. The socket stays open (another thread
 * may be sending an answer on it) until nr_py_stub_stop. */
static nr_status_t *gone(nr_py_stub_t *s, const char *what)
{
    int ws = 0;
    if (s->pid <= 0) /* reaped before */
        return nr_status_new(NR_UNAVAILABLE, "Stub process '%s' is not healthy.", s->name);
    reap(s, 1000, &ws);
    char how[64] = "";
    if (WIFSIGNALED(ws))
        snprintf(how, sizeof(how), " (killed by signal %d)", WTERMSIG(ws));
    else if (WIFEXITED(ws))
        snprintf(how, sizeof(how), " (exited with status %d)", WEXITSTATUS(ws));
    NR_LOG_ERROR("the Python stub of '%s' ended during %s%s", s->name, what, how);
    return nr_status_new(NR_UNAVAILABLE, "Stub process '%s' is not healthy.", s->name);
}

nr_status_t *nr_py_stub_send_text(nr_py_stub_t *s, uint32_t kind, uint32_t arg, uint64_t off,
                                  const char *text, size_t len)
{
    if (len > NR_PY_REPLY_TEXT_MAX)
        len = NR_PY_REPLY_TEXT_MAX;
    nr_py_hdr_t h = {.kind = kind, .arg = arg, .off = off, .len = len};
    struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)text, len}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len > 0 ? 2 : 1};
    ssize_t w;
    do
        w = sendmsg(s->sock, &mh, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w == (ssize_t)(sizeof(h) + len))
        return NULL;
    return gone(s, "a send");
}

/* Messages of the model's own, whoever reads them: a log line, a metrics or control request,
 * a sender's response, an is_cancelled(). Whether the message in s->msg (n bytes) was one. */
static bool side_message(nr_py_stub_t *s, size_t n)
{
    nr_py_hdr_t h;
    memcpy(&h, s->msg, sizeof(h));
    const char *body = s->msg + sizeof(h);
    size_t len = n - sizeof(h);
    if (h.kind == NR_PY_LOG) {
        stub_log(body, len);
        return true;
    }
    if ((h.kind == NR_PY_RESPONSE || h.kind == NR_PY_BLS) && h.len > 0) {
        nr_status_t *st = map_body(s, &h);
        if (st != NULL) { /* handed on with no body: that request fails as malformed */
            NR_LOG_ERROR("%s", st->msg);
            nr_status_free(st);
            h.off = h.len = 0;
        }
    }
    if (h.kind == NR_PY_RESPONSE || h.kind == NR_PY_CANCELLED || h.kind == NR_PY_BLS) {
        if (s->side != NULL)
            s->side(s->side_arg, s, &h, body, len);
        return true;
    }
    if (h.kind != NR_PY_METRIC && h.kind != NR_PY_CONTROL)
        return false;
    if (s->side != NULL) {
        s->side(s->side_arg, s, &h, body, len);
    } else if (h.arg != 0) { /* an auto-complete stub */
        static const char text[] = "custom metrics and model control are not available in "
                                   "auto_complete_config";
        nr_status_free(nr_py_stub_send_text(s, NR_PY_SIDE_REPLY,
                                            (h.arg & 0xffffffu) | NR_PY_REPLY_ERROR << 24,
                                            NR_UNSUPPORTED, text, sizeof(text) - 1));
    }
    return true;
}

bool nr_py_stub_drain(nr_py_stub_t *s)
{
    for (;;) {
        if (s->sock < 0)
            return false;
        ssize_t n = recv(s->sock, s->msg, NR_PY_MSG_MAX - 1, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK;
        if (n < (ssize_t)sizeof(nr_py_hdr_t))
            return false; /* end of file: the stub has gone */
        if (!side_message(s, (size_t)n))
            NR_LOG_VERBOSE(1, "the Python stub of '%s' sent message %u while idle", s->name,
                           ((nr_py_hdr_t *)(void *)s->msg)->kind);
    }
}

nr_status_t *nr_py_stub_wait(nr_py_stub_t *s, nr_py_hdr_t *hdr, int timeout_ms, const char *what)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (s->sock < 0 || s->pid <= 0)
            return nr_status_new(NR_UNAVAILABLE, "Stub process '%s' is not healthy.", s->name);
        int left = -1;
        if (timeout_ms >= 0) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            long el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
            left = el >= timeout_ms ? 0 : (int)(timeout_ms - el);
        }
        struct pollfd pf = {.fd = s->sock, .events = POLLIN};
        int pr = left < 0 ? 1 : poll(&pf, 1, left); /* no deadline: recv waits by itself */
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            kill(s->pid, SIGKILL);
            nr_status_free(gone(s, what)); /* reaped and logged; the timeout is the error */
            return nr_status_new(NR_UNAVAILABLE,
                                 "the Python stub of '%s' did not answer %s within %d s",
                                 s->name, what, timeout_ms / 1000);
        }
        ssize_t n = recv(s->sock, s->msg, NR_PY_MSG_MAX - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < (ssize_t)sizeof(nr_py_hdr_t))
            return gone(s, what);
        if (side_message(s, (size_t)n))
            continue;
        memcpy(hdr, s->msg, sizeof(*hdr));
        size_t inline_len = (size_t)n - sizeof(*hdr);
        if (hdr->kind == NR_PY_ERROR) {
            hdr->len = inline_len;
            return NULL;
        }
        if (hdr->kind == NR_PY_RESPONSES || hdr->kind == NR_PY_CONFIG)
            return map_body(s, hdr);
        return NULL; /* NR_PY_OK */
    }
}

bool nr_py_stub_hung_up(const nr_py_stub_t *s)
{
    struct pollfd pf = {.fd = s->sock, .events = 0};
    return s->sock < 0 || s->pid <= 0 || (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR)));
}

const char *nr_py_stub_text(nr_py_stub_t *s, const nr_py_hdr_t *hdr)
{
    char *t = s->msg + sizeof(nr_py_hdr_t);
    t[hdr->len] = '\0';
    return t;
}
