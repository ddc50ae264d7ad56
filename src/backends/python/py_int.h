/* py_int.h - the "python" backend's insides: the stub processes (py_stub.c), the wire between
 * the server and a stub (the layouts below, mirrored by stub/nereid_stub.py), and the backend
 * vtable (py_backend.c).
 *
 * One model instance = one stub process (the machine's python3, or the model's
 * EXECUTION_ENV_PATH) running stub/nereid_stub.py, which imports the model's model.py and
 * triton_python_backend_utils (stub/). They talk over a SOCK_SEQPACKET socketpair that carries
 * only 24-byte headers, log lines and error texts; every request and response body, tensor
 * bytes included, is written once into a shared-memory file (memfd) both processes map.
 *
 * Threads: a stub belongs to its instance, and the instance runs one execute at a time
 * (backend.h), so nothing here locks: spawn/init/finalize run on the loading thread, execute on
 * whichever thread holds the instance.
 */
#ifndef NR_PY_INT_H
#define NR_PY_INT_H

#include "../backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- the wire (all little-endian; nereid_stub.py's struct formats in comments) ----------- */
enum {
    NR_PY_INIT = 1,         /* body: {"args": {...}, "model_path": "..."} (JSON, shared memory) */
    NR_PY_EXECUTE = 2,      /* body: a batch (below, shared memory) */
    NR_PY_FINALIZE = 3,     /* no body; the stub answers OK and exits */
    NR_PY_AUTOCOMPLETE = 4, /* body: {"config": {...}, "model_path": "..."} */
    NR_PY_BLS_REPLY = 5,    /* arg: the request's tag | flags << 24 (NR_RESPONSE_FINAL on its
                               last); body: a response (in the reply file) */
    NR_PY_OK = 10,
    NR_PY_ERROR = 11,       /* inline body: the error text; arg: a TritonError code */
    NR_PY_RESPONSES = 12,   /* body: the batch's responses (below, shared memory) */
    NR_PY_LOG = 13,         /* inline body: nr_py_log_t, file name, NUL, message */
    NR_PY_CONFIG = 14,      /* body: the completed config (JSON, shared memory) */
    NR_PY_BLS = 15,         /* arg: a tag; body: a request to another model (below) */
    NR_PY_RESPONSE = 16,    /* a response sender's (decoupled models, or the default mode's
                               sender): arg: the request's index in the batch | flags << 24
                               (NR_RESPONSE_FINAL, NR_RESPONSE_NONE: no body); body: one
                               response as in a batch's answer */
    NR_PY_CANCELLED = 17,   /* request.is_cancelled(): arg: a tag, off: the request's index;
                               answered by an NR_PY_BLS_REPLY with no body, its flags
                               NR_RESPONSE_FINAL | NR_PY_REPLY_CANCELLED when it is */
};
/* Execute's end: NR_PY_RESPONSES (execute returned a list), NR_PY_OK (it returned None: the
 * requests are answered through their senders; the batch ends once each has sent its final
 * flag), or NR_PY_ERROR (it raised; the senders of the batch are closed first). */

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
    uint64_t flags, corr;
} nr_py_req_t;                                                                   /* <IIIIIIQQ */
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
    uint32_t params_len, pad; /* its parameters (a JSON object) follow the output names */
} nr_py_bls_t;                                                                 /* <IIIIIIqQII */
#define NR_PY_REPLY_CANCELLED 4u
#define NR_PY_BLS_DECOUPLED 1u /* exec(decoupled=True): every response comes back (the reply's
                                  arg: tag | NR_RESPONSE_* << 24; the last has FINAL) */

/* The reply file's first NR_PY_REPLY_HEAD bytes: the count (uint64, written by the server
 * after it has read each) of the stub's messages whose body lies in the shared file
 * (NR_PY_BLS, NR_PY_RESPONSE) in this batch: when it equals the number the stub has written,
 * the stub may write its next one where the first went (a long stream of responses reuses
 * its room). Replies follow. */
#define NR_PY_REPLY_HEAD 64
#define NR_PY_ALIGN 64
#define NR_PY_SHM_DEFAULT (1u << 20) /* Triton's shm-default-byte-size */
#define NR_PY_MSG_MAX 65536          /* the largest inline message (header included) */

/* TRITONSERVER_DataType codes <-> nereid's types (py_stub.c). */
uint32_t nr_py_type_code(nr_dtype_t t);
nr_dtype_t nr_py_type_from_code(uint32_t code);

/* ---- a stub process (py_stub.c) ---------------------------------------------------------- */
typedef struct {
    char *name;      /* instance name ("add_sub_0_0"), for messages */
    pid_t pid;       /* 0: not running */
    int sock;        /* our end of the control socket */
    int shm_fd;
    char *shm;       /* mapped [0, shm_size) */
    size_t shm_size;
    int reply_fd;    /* the reply file: answers to the stub's requests, written by the server */
    char *reply;     /* mapped [0, reply_size) */
    size_t reply_size;
    char *msg;       /* NR_PY_MSG_MAX bytes: the last message received */
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
/* Sends a header whose body is [off, off + len) of the shared memory (the reply file for
 * NR_PY_BLS_REPLY). Safe from any thread while another waits. */
nr_status_t *nr_py_stub_send(nr_py_stub_t *s, uint32_t kind, uint32_t arg, uint64_t off,
                             uint64_t len);
/* Waits for the stub's next answer (log lines are written to the log meanwhile): *hdr is it;
 * an inline body is at s->msg + sizeof(nr_py_hdr_t), a shared-memory one is mapped (checked
 * against the file). timeout_ms < 0 waits forever. UNAVAILABLE when the process has gone,
 * with `what` in the text (the process is reaped; the socket stays open until stop). */
nr_status_t *nr_py_stub_wait(nr_py_stub_t *s, nr_py_hdr_t *hdr, int timeout_ms, const char *what);
/* The stub has closed its end (it died); cheap enough to ask before every batch. */
bool nr_py_stub_hung_up(const nr_py_stub_t *s);
/* An inline body as a string (NUL-terminated in place). */
const char *nr_py_stub_text(nr_py_stub_t *s, const nr_py_hdr_t *hdr);

#endif
