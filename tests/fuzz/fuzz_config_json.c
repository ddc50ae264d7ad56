/* fuzz_config_json.c - libFuzzer driver for nr_cfg_parse_json (a ModelConfig
 * in protobuf's JSON mapping, the "config" parameter of a model-load
 * request): the JSON reader and the table-driven reader, then for a config
 * that parses the round trip nr_cfg_to_json -> nr_cfg_parse_json (the
 * printed JSON must parse and print the same bytes, else abort), then
 * normalization, instance group defaults, validation and nr_cfg_to_pb.
 * Input: the JSON text. Seeds: tests/fuzz/corpus/config_json/ (make_seeds.py).
 */
#include "../../src/common/status.h"
#include "../../src/config/model_config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What nr_cfg_to_json prints for cfg must read back to a config printing the same. */
static void check_round_trip(const nr_model_config_t *cfg)
{
    size_t n1, n2;
    char *j1 = nr_cfg_to_json(cfg, &n1);
    if (n1 == 0) { /* the all-default config prints as no text */
        free(j1);
        return;
    }
    nr_model_config_t *back = NULL;
    nr_status_t *st = nr_cfg_parse_json(j1, n1, &back);
    if (st != NULL) {
        fprintf(stderr, "printed config does not parse: %s\n%s\n", st->msg, j1);
        abort();
    }
    char *j2 = nr_cfg_to_json(back, &n2);
    if (n2 != n1 || memcmp(j1, j2, n1) != 0) {
        fprintf(stderr, "round trip changed the config:\n%s\n%s\n", j1, j2);
        abort();
    }
    free(j2);
    nr_cfg_free(back);
    free(j1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nr_model_config_t *cfg = NULL;
    nr_status_t *st = nr_cfg_parse_json((const char *)data, size, &cfg);
    if (st != NULL) {
        if (cfg != NULL) /* an error leaves no config */
            abort();
        nr_status_free(st);
        return 0;
    }
    for (int pass = 0; pass < 2; pass++) { /* as given, then as the load pipeline fills it */
        if (pass == 1) {
            nr_cfg_normalize(cfg);
            nr_cfg_fill_instance_groups(cfg, 2, (int)(size & 1));
        }
        check_round_trip(cfg);
    }
    nr_status_free(nr_cfg_validate(cfg, "f"));
    size_t len = 0;
    free(nr_cfg_to_pb(cfg, &len));
    nr_cfg_free(cfg);
    return 0;
}
