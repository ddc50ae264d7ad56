/* py_int.h - the "python" backend's insides: the stub processes (py_stub.c), the wire between
 * the server and a stub (the layouts below, mirrored by stub/nereid_stub.py), and the backend
 * vtable (py_backend.c).
 *
 * One model instance = one stub process (the machine's python3, or the model's
 * EXECUTION_ENV_PATH) running stub/nereid_stub.py, which imports the model's model.py and
 * triton_python_backend_utils (stub/). They talk over a SOCK_SEQPACKET socketpair that carries
 * only 24-byte headers, log lines and error texts; every request and response body, tensor
 * bytes included, is written once into a shared-memory file (memfd) both processes map. Each
 * file has one writer: the batch file (the server's batches), the shared file (the stub's
 * answers and requests; the server's initialize and auto-complete arguments before any), the
 * reply file (the server's answers to the stub's requests).
 *
 * Threads: a stub belongs to its instance, and the instance runs one execute at a time
 * (backend.h); whoever owns the stub's socket (py_side.c: the thread running execute, or
 * else the instance's listener) reads it and does what its messages say, so the stub's
 * state needs no lock of its own: spawn/init/finalize run on the loading thread.
 */
#ifndef NR_PY_INT_H
#define NR_PY_INT_H

#include "../backend.h"

#include <pthread.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- the wire (all little-endian; nereid_stub.py's struct formats in comments) ----------- */
enum {
    NR_PY_INIT = 1,         /* body: {"args": {...}, "model_path": "..."} (JSON, shared memory) */
    NR_PY_EXECUTE = 2,      /* body: a batch (below, in the batch file) */
    NR_PY_FINALIZE = 3,     /* no body; the stub answers OK and exits */
    NR_PY_AUTOCOMPLETE = 4, /* body: {"config": {...}, "model_path": "..."} */
    NR_PY_BLS_REPLY = 5,    /* arg: the request's tag | flags << 24 (NR_RESPONSE_FINAL on its
                               last); body: a response (in the reply file) */
    NR_PY_SIDE_REPLY = 6,   /* to NR_PY_METRIC / NR_PY_CONTROL: arg: the request's tag |
                               flags << 24; off: the result (an id, a double's bits, a bool);
                               with NR_PY_REPLY_ERROR: off the code, the error text inline */
    NR_PY_OK = 10,
    NR_PY_ERROR = 11,       /* inline body: the error text; arg: a TritonError code */
    NR_PY_RESPONSES = 12,   /* body: the batch's responses (below, shared memory) */
    NR_PY_LOG = 13,         /* inline body: nr_py_log_t, file name, NUL, message */
    NR_PY_CONFIG = 14,      /* body: the completed config (JSON, shared memory) */
    NR_PY_BLS = 15,         /* arg: a tag; body: a request to another model (below) */
    NR_PY_RESPONSE = 16,    /* a response sender's (decoupled models, or the default mode's
                               sender): arg: the request's slot | flags << 24
                               (NR_RESPONSE_FINAL, NR_RESPONSE_NONE: no body); body: one
                               response as in a batch's answer. A decoupled model's requests
                               stay open after execute returns (backend.h, item.later): their
                               responses may come during a later batch or while idle */
    NR_PY_CANCELLED = 17,   /* request.is_cancelled(): arg: a tag, off: the request's slot;
                               answered by an NR_PY_BLS_REPLY with no body, its flags
                               NR_RESPONSE_FINAL | NR_PY_REPLY_CANCELLED when it is */
    NR_PY_METRIC = 18,      /* custom metrics, at any time: arg: a tag (0: no answer wanted);
                               inline body: nr_py_metric_t, n_buckets doubles, then n_strings
                               NUL-terminated strings */
    NR_PY_CONTROL = 19,     /* load_model / unload_model / is_model_ready: arg: a tag; inline
                               body: nr_py_control_t, then n_strings NUL-terminated strings */
};
enum { /* nr_py_control_t.op */
    NR_PY_C_LOAD = 1,   /* strings: name, config (JSON or ""), then per file its path in the
                           model directory and the file the stub wrote its bytes to */
    NR_PY_C_UNLOAD = 2, /* strings: name; flag: unload dependents */
    NR_PY_C_READY = 3,  /* strings: name; version (-1: any) -> 1 when READY */
};
typedef struct {
    uint32_t op, flag;
    int64_t version;
    uint32_t n_strings, pad;
} nr_py_control_t;                                                               /* <IIqII */
enum { /* nr_py_metric_t.op */
    NR_PY_M_FAMILY_NEW = 1,    /* kind; strings: name, description -> the family's id */
    NR_PY_M_FAMILY_DELETE = 2, /* id */
    NR_PY_M_METRIC_NEW = 3,    /* id: the family's; kind: 1 when buckets are given; strings:
                                  label key, value, ... -> the metric's id */
    NR_PY_M_METRIC_DELETE = 4, /* id */
    NR_PY_M_INCREMENT = 5,     /* id, value */
    NR_PY_M_SET = 6,
    NR_PY_M_OBSERVE = 7,
    NR_PY_M_VALUE = 8,         /* id -> the value */
};
typedef struct {
    uint32_t op, kind;
    uint64_t id;
    double value;
    uint32_t n_strings, n_buckets;
} nr_py_metric_t;                                                                /* <IIQdII */
#define NR_PY_REPLY_ERROR 8u
/* Execute's end: NR_PY_RESPONSES (execute returned a list), NR_PY_OK (it returned None: the
 * requests are answered through their senders; in the default mode the stub sends it once
 * each has sent its final flag, a decoupled model's requests without one stay open), or
 * NR_PY_ERROR (it raised; the senders of the batch are closed first). */

typedef struct { uint32_t kind, arg; uint64_t off, len; } nr_py_hdr_t;          /* <IIQQ */
/* A batch: nr_py_batch_t, then per request nr_py_req_t, its id, its parameters (JSON), its
 * string correlation id, padded to 8; its wanted outputs (uint32 config indices) padded to 8;
 * per input nr_py_tensor_t (index = config input) and its dims (int64). Tensor bytes follow
 * every header, each at a 64-byte boundary (BYTES in their serialized form).
 * The responses: nr_py_batch_t, then per response nr_py_resp_t, its error text and parameters
 * padded to 8, per output nr_py_tensor_t (index = name length), the name padded to 8, dims;
 * then the tensor bytes as above. */
typedef struct { uint32_t n, pad; } nr_py_batch_t;                               /* <II */
typedef struct {
    uint32_t n_inputs, n_want, id_len, params_len, corr_kind, corr_len; /* corr_kind: 0 none,
                                                                            1 uint64, 2 string */
    uint32_t slot, pad; /* the request's name in NR_PY_RESPONSE / NR_PY_CANCELLED, unique
                           among the instance's open requests */
    uint64_t flags, corr;
} nr_py_req_t;                                                                 /* <IIIIIIIIQQ */
typedef struct { uint32_t index, type, ndim, pad; uint64_t off, nbytes; } nr_py_tensor_t; /* <IIIIQQ */
typedef struct { int32_t code; uint32_t n_outputs, err_len, params_len; } nr_py_resp_t;  /* <iIII */
typedef struct { uint32_t level, line; } nr_py_log_t;                            /* <II */
/* A request to another model (InferenceRequest.exec): nr_py_bls_t, the model name, the id, the
 * requested output names (each NUL-terminated, want_len bytes in all) and the parameters
 * (JSON) padded to 8, then per
 * input nr_py_tensor_t (index = name length), the name padded to 8 and dims; tensor bytes as
 * in a batch. Its answer, in the reply file: one response as in a batch's answer. */
typedef struct {
    uint32_t name_len, n_inputs, n_want, id_len, want_len, flags; /* NR_PY_BLS_DECOUPLED */
    int64_t version;
    uint64_t timeout_us;
    uint32_t params_len; /* its parameters (a JSON object) follow the output names */
    uint32_t parent;     /* 1 + the slot of the request whose trace() it was given; 0: none */
} nr_py_bls_t;                                                                 /* <IIIIIIqQII */
#define NR_PY_REPLY_CANCELLED 4u
#define NR_PY_BLS_DECOUPLED 1u /* exec(decoupled=True): every response comes back (the reply's
                                  arg: tag | NR_RESPONSE_* << 24; the last has FINAL) */

/* The reply file's first NR_PY_REPLY_HEAD bytes: the count (uint64, written by the server
 * after it has read each) of the stub's messages whose body lies in the shared file
 * (NR_PY_BLS, NR_PY_RESPONSE with a body, NR_PY_RESPONSES) since the stub started: when it
 * equals the number the stub has written, the stub writes its next one at the start again
 * (a long stream of responses reuses its room). Replies follow. The shared file's first
 * NR_PY_REPLY_HEAD bytes are the other way round: the count (uint64, written by the stub) of
 * the answers in the reply file it has read (copied out, or dropped), so the server writes
 * the next one at the start again once it equals the number it has written. */
#define NR_PY_REPLY_HEAD 64
#define NR_PY_ALIGN 64
#define NR_PY_SHM_DEFAULT (1u << 20) /* Triton's shm-default-byte-size */
#define NR_PY_MSG_MAX 65536          /* the largest inline message (header included) */

/* TRITONSERVER_DataType codes <-> nereid's types (py_stub.c). */
uint32_t nr_py_type_code(nr_dtype_t t);
nr_dtype_t nr_py_type_from_code(uint32_t code);

/* ---- a stub process (py_stub.c) ---------------------------------------------------------- */
typedef struct nr_py_stub_s {
    char *name;      /* instance name ("add_sub_0_0"), for messages */
    pid_t pid;       /* 0: not running */
    int sock;        /* our end of the control socket */
    int shm_fd;
    char *shm;       /* mapped [0, shm_size) */
    size_t shm_size;
    int batch_fd;    /* the batch file: batches, written by the server */
    char *batch;     /* mapped [0, batch_size) */
    size_t batch_size;
    int reply_fd;    /* the reply file: answers to the stub's requests, written by the server */
    char *reply;     /* mapped [0, reply_size) */
    size_t reply_size;
    /* the two files' heads (py_int.h), mapped once on their own: their address never moves,
     * while the whole files' mappings move as they grow */
    uint64_t *shm_head, *reply_head;
    char *msg;       /* NR_PY_MSG_MAX bytes: the last message received */
    size_t shm_default, shm_growth; /* the shared file's first size and growth step (0:
                                       NR_PY_SHM_DEFAULT; --backend-config=python,...) */
    /* NR_PY_METRIC, NR_PY_CONTROL, NR_PY_RESPONSE and NR_PY_CANCELLED messages, wherever the
     * socket is read (NULL: answered with an error or dropped); a body in the shared file is
     * mapped */
    void (*side)(void *arg, struct nr_py_stub_s *s, const nr_py_hdr_t *h, const char *body,
                 size_t len);
    void *side_arg;
} nr_py_stub_t;

/* Starts `python` running the stub in `mode` ("instance" / "autocomplete"), its control socket
 * and shared memory ready. */
nr_status_t *nr_py_stub_start(nr_py_stub_t *s, const char *python, const char *mode,
                              const char *name);
/* Asks it to finish (FINALIZE, waiting up to timeout_ms), then ends it (SIGKILL if needed) and
 * frees everything but `name`. Safe on a stub that never started. */
void nr_py_stub_stop(nr_py_stub_t *s, int timeout_ms);
/* Makes the shared memory (the reply file) at least `size` bytes (grows the file, maps it
 * anew). */
nr_status_t *nr_py_stub_reserve(nr_py_stub_t *s, size_t size);
nr_status_t *nr_py_stub_reserve_reply(nr_py_stub_t *s, size_t size);
nr_status_t *nr_py_stub_reserve_batch(nr_py_stub_t *s, size_t size);
/* Sends a header whose body is [off, off + len) of the shared memory (the reply file for
 * NR_PY_BLS_REPLY). Safe from any thread while another waits. */
nr_status_t *nr_py_stub_send(nr_py_stub_t *s, uint32_t kind, uint32_t arg, uint64_t off,
                             uint64_t len);
/* Waits for the stub's next answer (log lines, metrics, control, senders' responses and
 * requests to other models are handled meanwhile, through `side`): *hdr is it;
 * an inline body is at s->msg + sizeof(nr_py_hdr_t), a shared-memory one is mapped (checked
 * against the file). timeout_ms < 0 waits forever. UNAVAILABLE when the process has gone,
 * with `what` in the text (the process is reaped; the socket stays open until stop). */
nr_status_t *nr_py_stub_wait(nr_py_stub_t *s, nr_py_hdr_t *hdr, int timeout_ms, const char *what);
/* Reads what the stub has sent without waiting (log lines, metrics requests; anything else is
 * dropped). False once the stub has closed its end. */
bool nr_py_stub_drain(nr_py_stub_t *s);
/* Sends a header with an inline body (at most NR_PY_REPLY_TEXT_MAX bytes of it). */
#define NR_PY_REPLY_TEXT_MAX 3000
nr_status_t *nr_py_stub_send_text(nr_py_stub_t *s, uint32_t kind, uint32_t arg, uint64_t off,
                                  const char *text, size_t len);
/* The stub has closed its end (it died); cheap enough to ask before every batch. */
bool nr_py_stub_hung_up(const nr_py_stub_t *s);
/* An inline body as a string (NUL-terminated in place). */
const char *nr_py_stub_text(nr_py_stub_t *s, const nr_py_hdr_t *hdr);

/* ---- the backend's state (py_backend.c) -------------------------------------------------- */
/* --backend-config=python,... (Triton's keys), read when a model loads. */
typedef struct {
    size_t shm_default, shm_growth; /* shm-default-byte-size, shm-growth-byte-size */
    int timeout_ms;                 /* stub-timeout-seconds: initialize, auto-complete */
} py_settings_t;

typedef struct {
    const nr_model_config_t *cfg;
    py_settings_t settings;
    char *python;      /* the interpreter */
    char *model_path;  /* <repository>/<model>/<version>/model.py */
    char *model_dir;   /* <repository>/<model> */
    char *version;     /* "1" */
    char *config_json; /* the config as Triton's JSON, for initialize's args */
} py_model_t;

typedef struct {
    py_model_t *m;
    nr_instance_info_t info;
    char *name;
    nr_py_stub_t stub;
    bool up; /* the stub runs an initialized model */
    /* requests the model makes to other models during a batch (BLS): their answers come on
     * other threads, which write them into the reply file and send them under mu */
    pthread_mutex_t mu;
    pthread_cond_t idle;  /* signalled when outstanding drops to 0 */
    size_t outstanding;   /* requests sent on and not answered yet */
    size_t reply_used;    /* bytes of the reply file taken */
    uint64_t replies;     /* answers written into the reply file (py_int.h) */
    uint32_t gen;         /* the stub's generation: an answer for an older one is dropped */
    uint64_t consumed;    /* the stub's messages read (py_int.h) */
    /* who reads the stub's socket (py_side.c): the thread running execute (or starting or
     * stopping the stub) owns it; while nobody does, the listener thread reads what the
     * model's own threads send (log lines, metrics). Under mu. */
    bool owned;           /* a thread other than the listener reads */
    bool listener_reading;
    pthread_cond_t handoff; /* signalled when the listener stops reading */
    bool listening;       /* the listener thread runs */
    pthread_t listener;
    int ep, wake;         /* its epoll (the socket, one-shot) and eventfd (stop) */
    /* the custom metrics the stub made: handles by id - 1 (NULL: deleted); read and written by
     * whoever reads the socket */
    void **families, **metrics;
    size_t n_families, n_metrics;
    /* the requests the stub has been given and not ended (py_backend.c), by slot; read and
     * written by whoever reads the socket */
    struct py_slot_s *slots;
    uint32_t n_slots, free_hint;
    uint32_t n_later;     /* of them, answered after their batch's execute (item.later) */
    /* the batch file's regions that requests still open read (a decoupled model's thread
     * may read its request's inputs after execute returned) */
    struct py_region_s *regions;
    size_t n_regions;
} py_inst_t;

/* ---- the interpreter (py_env.c) -------------------------------------------------------- */
/* The python3 a model runs with: the machine's (env NULL or ""), or the one of its execution
 * environment (EXECUTION_ENV_PATH, $$TRITON_MODEL_DIRECTORY replaced by model_dir): a
 * directory, or an archive unpacked once. */
nr_status_t *nr_py_env_python(const char *env, const char *model_dir, char **out);

/* ---- messages outside the request path (py_side.c) ---------------------------------------- */
/* The listener: started once the instance's first stub runs (its socket attached), stopped
 * before the instance goes. */
nr_status_t *py_side_start(py_inst_t *in);
void py_side_stop(py_inst_t *in);
/* Takes the socket from the listener (waiting while it reads) / gives it back (re-armed). */
void py_side_own(py_inst_t *in);
void py_side_release(py_inst_t *in);
/* The stub was started anew: its socket goes into the listener's epoll (disarmed, owned). */
void py_side_attach(py_inst_t *in);
/* A custom-metrics or model-control request (NR_PY_METRIC, NR_PY_CONTROL): done, answered
 * when it asks for an answer. */
void py_side_message(void *arg, nr_py_stub_t *s, const nr_py_hdr_t *h, const char *body,
                     size_t len);
/* A sender's response (NR_PY_RESPONSE), an is_cancelled() (NR_PY_CANCELLED), a request to
 * another model (NR_PY_BLS), whoever reads them (py_backend.c). */
void py_sender_message(py_inst_t *in, const nr_py_hdr_t *h);
/* The stub has gone: every request it still held ends with UNAVAILABLE (py_backend.c). */
void py_fail_open(py_inst_t *in);
/* The metrics a stub that ended had made are deleted. */
void py_side_forget(py_inst_t *in);

#endif
