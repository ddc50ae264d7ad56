/* fuzz_infer_binary.c - libFuzzer driver for the binary tensor extension: the
 * Inference-Header-Content-Length value, the split of the body into the JSON
 * header and the binary chunks (binary_data_size), raw bodies (header length
 * 0), and the core request validation.
 * Input: byte 0 picks the model; then the header value up to the first '\n'
 * ("-" = no header); the rest is the body. Seeds: tests/fuzz/corpus/infer_binary/.
 */
#include "../../src/core/request.h"
#include "../../src/frontends/http/http_int.h"
#include "fuzz_util.h"

static nr_model_t *models[FUZZ_N_MODELS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t which = data[0] % FUZZ_N_MODELS;
    if (models[which] == NULL)
        models[which] = fuzz_fake_model(which);
    const uint8_t *nl = memchr(data + 1, '\n', size - 1);
    if (nl == NULL)
        return 0;
    size_t hl = (size_t)(nl - (data + 1));
    char *ihcl = nr_malloc(hl + 1);
    memcpy(ihcl, data + 1, hl);
    ihcl[hl] = '\0';
    size_t len = size - (size_t)(nl + 1 - data);
    char *body = nr_malloc(len ? len : 1);
    memcpy(body, nl + 1, len);
    nr_http_infer_t *inf = nr_calloc(1, sizeof(*inf));
    bool none = hl == 1 && ihcl[0] == '-';
    nr_status_t *st = nr_http_infer_parse(inf, NULL, models[which], body, len, none ? NULL : ihcl);
    if (st == NULL)
        st = nr_req_validate(inf->base.req);
    nr_status_free(st);
    nr_http_infer_free(inf);
    free(ihcl);
    return 0;
}
