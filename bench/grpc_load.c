/* grpc_load.c - a small gRPC load generator for bench/ (the gRPC counterpart of wrk): keeps
 * `-c` requests in flight against one method, over `-k` connections, from one thread on gRPC's C
 * core, for `-d` seconds after a one-second warm-up, and prints one line:
 *   requests=<n> seconds=<s> rps=<r> p50_us=<x> p99_us=<y> errors=<e>
 * Unary (-m unary): every request is its own call. Streaming (-m stream): one call per
 * in-flight slot, each writing its next request when the previous response arrived (as
 * perf_analyzer --streaming does). The request is the serialized message in `-f <file>`.
 *
 *   grpc_load -m unary -c 16 -k 16 -d 5 -f req.bin 127.0.0.1:8001 /inference.GRPCInferenceService/ModelInfer
 */
#include "../src/proto/grpc_lib.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    grpc_call *call;
    grpc_metadata_array md_in, trailers;
    grpc_byte_buffer *send, *recv;
    grpc_status_code status;
    grpc_slice details;
    uint64_t t0;
    int channel;
    bool started; /* stream: metadata sent */
} slot_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static grpc_slice payload;
static grpc_completion_queue *cq;
static grpc_channel **channels;
static grpc_slice method;
static bool stream_mode;

static grpc_byte_buffer *message(void)
{
    return grpc_raw_byte_buffer_create(&payload, 1);
}

static void start_unary(slot_t *s)
{
    s->call = grpc_channel_create_call(channels[s->channel], NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                       method, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_metadata_array_init(&s->md_in);
    grpc_metadata_array_init(&s->trailers);
    s->send = message();
    s->recv = NULL;
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->md_in;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &s->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &s->trailers;
    ops[5].data.recv_status_on_client.status = &s->status;
    ops[5].data.recv_status_on_client.status_details = &s->details;
    s->t0 = now_ns();
    if (grpc_call_start_batch(s->call, ops, 6, s, NULL) != GRPC_CALL_OK) {
        fprintf(stderr, "grpc_load: cannot start a call\n");
        exit(1);
    }
}

static void finish_unary(slot_t *s)
{
    grpc_metadata_array_destroy(&s->md_in);
    grpc_metadata_array_destroy(&s->trailers);
    grpc_byte_buffer_destroy(s->send);
    if (s->recv)
        grpc_byte_buffer_destroy(s->recv);
    grpc_slice_unref(s->details);
    grpc_call_unref(s->call);
}

/* Stream: the first batch opens the call, then one write + one read per request. */
static void start_stream_request(slot_t *s)
{
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    if (!s->started) {
        s->call = grpc_channel_create_call(channels[s->channel], NULL, GRPC_PROPAGATE_DEFAULTS,
                                           cq, method, NULL,
                                           gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        grpc_metadata_array_init(&s->md_in);
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->md_in;
        s->started = true;
    }
    if (s->send)
        grpc_byte_buffer_destroy(s->send);
    s->send = message();
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = s->send;
    s->recv = NULL;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &s->recv;
    s->t0 = now_ns();
    if (grpc_call_start_batch(s->call, ops, n, s, NULL) != GRPC_CALL_OK) {
        fprintf(stderr, "grpc_load: cannot write to the stream\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    int conc = 1, conns = 0, secs = 5, opt;
    const char *file = NULL, *mode = "unary";
    while ((opt = getopt(argc, argv, "c:k:d:f:m:")) != -1) {
        switch (opt) {
        case 'c': conc = atoi(optarg); break;
        case 'k': conns = atoi(optarg); break;
        case 'd': secs = atoi(optarg); break;
        case 'f': file = optarg; break;
        case 'm': mode = optarg; break;
        default: goto usage;
        }
    }
    if (optind + 2 != argc || file == NULL || conc < 1)
        goto usage;
    stream_mode = strcmp(mode, "stream") == 0;
    if (conns <= 0 || conns > conc)
        conns = conc;
    FILE *f = fopen(file, "rb");
    if (!f) {
        perror(file);
        return 1;
    }
    static char buf[1 << 24];
    size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    nr_grpc_lib_init(); /* as the server and nereid-perf start gRPC */
    payload = grpc_slice_from_copied_buffer(buf, len);
    method = grpc_slice_from_static_string(argv[optind + 1]);
    cq = grpc_completion_queue_create_for_next(NULL);
    channels = calloc((size_t)conns, sizeof(*channels));
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    for (int i = 0; i < conns; i++) {
        /* a private subchannel pool: every channel its own connection */
        grpc_arg a[2] = {
            {GRPC_ARG_INTEGER, (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, {.integer = 1}},
            {GRPC_ARG_INTEGER, (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = -1}},
        };
        grpc_channel_args ca = {2, a};
        channels[i] = grpc_channel_create(argv[optind], creds, &ca);
    }
    grpc_channel_credentials_release(creds);
    slot_t *slots = calloc((size_t)conc, sizeof(*slots));
    size_t cap = 1u << 22, n_lat = 0;
    uint64_t *lat = malloc(cap * sizeof(uint64_t));
    uint64_t errors = 0, t_start = now_ns(), warm_end = t_start + 1000000000ull;
    uint64_t t_end = warm_end + (uint64_t)secs * 1000000000ull, measured_from = 0;
    for (int i = 0; i < conc; i++) {
        slots[i].channel = i % conns;
        slots[i].details = grpc_empty_slice();
        if (stream_mode)
            start_stream_request(&slots[i]);
        else
            start_unary(&slots[i]);
    }
    uint64_t done_in_window = 0;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break;
        slot_t *s = ev.tag;
        uint64_t t = now_ns();
        bool ok = ev.success && s->recv != NULL && (stream_mode || s->status == GRPC_STATUS_OK);
        if (!ok)
            errors++;
        if (t >= warm_end && t < t_end) {
            if (measured_from == 0)
                measured_from = t;
            if (n_lat < cap)
                lat[n_lat++] = t - s->t0;
            done_in_window++;
        }
        if (stream_mode) {
            if (s->recv)
                grpc_byte_buffer_destroy(s->recv);
            s->recv = NULL;
            if (!ok) {
                fprintf(stderr, "grpc_load: the stream failed\n");
                return 1;
            }
        } else {
            if (!ok && errors < 5) {
                char *d = grpc_slice_to_c_string(s->details);
                fprintf(stderr, "grpc_load: status %d %s\n", (int)s->status, d);
                gpr_free(d);
            }
            finish_unary(s);
        }
        if (t >= t_end)
            break;
        if (stream_mode)
            start_stream_request(s);
        else
            start_unary(s);
    }
    double seconds = (double)(now_ns() - (measured_from ? measured_from : warm_end)) / 1e9;
    qsort(lat, n_lat, sizeof(uint64_t), cmp_u64);
    double p50 = n_lat ? lat[n_lat / 2] / 1e3 : 0, p99 = n_lat ? lat[n_lat * 99 / 100] / 1e3 : 0;
    printf("requests=%llu seconds=%.3f rps=%.1f p50_us=%.1f p99_us=%.1f errors=%llu\n",
           (unsigned long long)done_in_window, seconds, done_in_window / seconds, p50, p99,
           (unsigned long long)errors);
    fflush(stdout);
    _exit(errors ? 2 : 0); /* calls still in flight: no orderly teardown needed */
usage:
    fprintf(stderr, "usage: grpc_load [-m unary|stream] [-c inflight] [-k connections] "
                    "[-d seconds] -f request.bin host:port /package.Service/Method\n");
    return 2;
}
