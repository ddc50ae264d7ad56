/* classify.h - Triton's classification extension, for every frontend: an
 * output requested with a classification count k is answered as BYTES
 * [batch, k] (just [k] without batching) holding the top-k elements of each
 * batch item as "<value>:<index>[:<label>]", with labels from the output's
 * label_filename in the model directory.
 */
#ifndef NR_CLASSIFY_H
#define NR_CLASSIFY_H

#include "../common/status.h"
#include "../config/model_config.h"
#include "../common/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One output's labels (label_filename of a config output), one per line. */
typedef struct {
    uint32_t output;
    char *text;          /* the file, NUL-separated lines */
    const char **lines;
    size_t n_lines;
} nr_labels_t;

/* The label files of one model version's outputs. */
typedef struct {
    nr_labels_t *v;
    size_t n;
} nr_label_set_t;

/* Reads the label files the outputs of cfg name, relative to the model
 * directory `dir` (a missing file is a warning). */
void nr_labels_load(nr_label_set_t *set, const nr_model_config_t *cfg, const char *dir);
/* Gives output `output` a copy of another model's labels (an ensemble output takes those of
 * the step output it comes from, as Triton does). */
void nr_labels_adopt(nr_label_set_t *set, uint32_t output, const nr_labels_t *src);
void nr_labels_free(nr_label_set_t *set);
/* The labels of config output `output`, or NULL. */
const nr_labels_t *nr_labels_find(const nr_label_set_t *set, uint32_t output);

/* Top-k of `t` per batch item as BYTES "<value>:<index>[:<label>]" elements
 * (descending; ties and NaNs, which rank last, by ascending index);
 * fills out (dtype STRING, dims, data = *buf, size) and sets *buf (malloc'd). */
NR_MUST_CHECK nr_status_t *nr_classify(const nr_tensor_t *t, bool batching, uint64_t k,
                                       const nr_labels_t *labels, nr_tensor_t *out, char **buf);

#endif
