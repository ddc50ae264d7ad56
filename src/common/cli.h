/* cli.h - command-line options for nereid, nereid-perf and nereid-analyzer: the strict value
 * readers all three share, and an option table (nginx's ngx_command_t: a name, how its value
 * is read and where it goes) from which one parser, the list of known flags and the usage
 * text all come, so that a flag is spelled once.
 *
 * Errors are the tool's to word (Triton's, perf_analyzer's, Model Analyzer's): the readers
 * only say whether a value is one; nr_cli_set says whether a typed option took its value.
 */
#ifndef NR_CLI_H
#define NR_CLI_H

#include "status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- values ---- */

/* Triton's spellings: true/on/1/True/TRUE/ON and false/off/0/False/FALSE/OFF. */
bool nr_cli_bool(const char *v, bool *out);
/* A base-10 integer in [lo, hi], the whole text (strtoll's leading blanks and sign allowed). */
bool nr_cli_int(const char *v, long long lo, long long hi, long long *out);
/* An unsigned base-10 integer, the whole text: no sign, not empty, no overflow. */
bool nr_cli_u64(const char *v, uint64_t *out);
/* A number (strtod's syntax), the whole text, at least min, not out of range. */
bool nr_cli_double(const char *v, double min, double *out);

/* ---- option tables ---- */

typedef enum {
    NR_CLI_FLAG, /* takes no value; `set` runs with v NULL */
    NR_CLI_BOOL, /* bool at offset */
    NR_CLI_INT,  /* int at offset, within [lo, hi] */
    NR_CLI_U64,  /* uint64_t at offset, within [lo, hi] */
    NR_CLI_STR,  /* const char * at offset: argv's own string */
    NR_CLI_FN,   /* `set` reads it (and reports its own errors) */
} nr_cli_kind_t;

typedef struct nr_cli_opt_s nr_cli_opt_t;
/* A custom option's setter: `opts` is the tool's options struct, v the value (NULL for a
 * FLAG). NULL when it took the value, else why not (the tool words the report: its code
 * says how, see the tool's table). */
typedef nr_status_t *(*nr_cli_set_fn)(void *opts, const nr_cli_opt_t *o, const char *v);

struct nr_cli_opt_s {
    const char *name;   /* without the leading "--" */
    nr_cli_kind_t kind;
    size_t offset;      /* where the value goes in the options struct (typed kinds) */
    long long lo, hi;   /* NR_CLI_INT, NR_CLI_U64 */
    nr_cli_set_fn set;  /* NR_CLI_FN, NR_CLI_FLAG */
    const char *arg;    /* the value in the usage text: "=<int>", " <setting>=<value>"; NULL
                         * for a flag, or to list the option without a line of its own */
    const char *help;   /* the usage text's description; '\n' starts another line */
};

/* The option named name[0..len), or NULL. */
const nr_cli_opt_t *nr_cli_find(const nr_cli_opt_t *t, size_t n, const char *name, size_t len);
/* Stores v into opts for a typed option, or hands it to the option's setter. A typed value
 * that is not one of its kind: nr_cli_bad_value. */
NR_MUST_CHECK nr_status_t *nr_cli_set(const nr_cli_opt_t *o, void *opts, const char *v);
/* INVALID_ARG "Invalid option value. Got <v>" (Triton's words), for setters too. */
NR_MUST_CHECK nr_status_t *nr_cli_bad_value(const char *v);
/* The usage lines of every option with an arg or a help text: "  --<name><arg>", the help
 * from column 35 (on the next line when the name is longer). */
void nr_cli_usage(FILE *f, const nr_cli_opt_t *t, size_t n);

#endif
