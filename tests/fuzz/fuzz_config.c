/* fuzz_config.c - libFuzzer driver for config.pbtxt: the protobuf text-format
 * tokenizer/parser, the table-driven config reader, normalization, instance
 * group defaults, Triton's validation, and the config JSON renderer.
 * Input: the bytes of a config.pbtxt. Seeds: tests/fuzz/corpus/config/.
 */
#include "../../src/common/status.h"
#include "../../src/config/model_config.h"
#include "../../src/config/pbtxt.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nr_pbtxt_tree_t *tree = NULL;
    nr_status_t *st = nr_pbtxt_parse((const char *)data, size, "f/config.pbtxt", &tree);
    nr_status_free(st);
    nr_pbtxt_free(tree);

    nr_model_config_t *cfg = NULL;
    st = nr_cfg_parse((const char *)data, size, "f/config.pbtxt", &cfg);
    if (st != NULL) {
        nr_status_free(st);
        return 0;
    }
    nr_cfg_normalize(cfg);
    nr_cfg_fill_instance_groups(cfg, 2, (int)(size & 1));
    st = nr_cfg_validate(cfg, "f");
    nr_status_free(st);
    size_t len = 0;
    free(nr_cfg_to_json(cfg, &len));
    nr_cfg_free(cfg);
    return 0;
}
