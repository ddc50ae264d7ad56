/* debug.c - see debug.h. */
#include "debug.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

void nr_debug_fail(const char *cond, const char *file, int line, const char *func)
{
    /* at the failing line, in Triton's format, whatever --log-error says */
    const char *base = strrchr(file, '/');
    nr_log_write(NR_LOG_LVL_ERROR, base ? base + 1 : file, line, "%s: assertion failed: %s",
                 func, cond);
    abort();
}
