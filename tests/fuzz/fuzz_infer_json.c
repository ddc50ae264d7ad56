/* fuzz_infer_json.c - libFuzzer driver for the JSON infer request: the JSON
 * reader, the request parser (inputs, outputs, parameters, JSON tensor data)
 * and the core request validation (shapes, element counts, byte sizes)
 * against one of three models without a backend.
 * Input: byte 0 picks the model, the rest is the request body (no
 * Inference-Header-Content-Length). Seeds: tests/fuzz/corpus/infer_json/.
 */
#include "../../src/core/request.h"
#include "../../src/frontends/http/http_int.h"
#include "fuzz_util.h"

static nr_model_t *models[FUZZ_N_MODELS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t which = data[0] % FUZZ_N_MODELS;
    if (models[which] == NULL)
        models[which] = fuzz_fake_model(which);
    size_t len = size - 1;
    char *body = nr_malloc(len ? len : 1);
    memcpy(body, data + 1, len);
    nr_http_infer_t *inf = nr_calloc(1, sizeof(*inf));
    nr_status_t *st = nr_http_infer_parse(inf, NULL, models[which], body, len, NULL);
    if (st == NULL)
        st = nr_req_validate(inf->base.req);
    if (st != NULL)
        (void)nr_status_http(st);
    nr_status_free(st);
    nr_http_infer_free(inf);
    return 0;
}
