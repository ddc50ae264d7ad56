/* limits.h - every ceiling nereid enforces on sizes that come from the wire or a model. */
#ifndef NR_LIMITS_H
#define NR_LIMITS_H

#define NR_MAX_DIMS 16                         /* tensor rank */
#define NR_MAX_TENSOR_BYTES (1ull << 40)       /* product(shape) * dtype size, before any alloc */
#define NR_DEFAULT_HTTP_MAX_INPUT (64ull << 20) /* --http-max-input-size default */
#define NR_MAX_NAME 1024                       /* model / tensor name length */
#define NR_MAX_CONFIG_BYTES (16u << 20)        /* config.pbtxt size */
#define NR_MAX_PBTXT_DEPTH 64                  /* message nesting in config.pbtxt */
#define NR_MAX_SHM_REGIONS 4096                /* shared-memory regions registered at once */
#define NR_MAX_ERROR_MSG (64u << 10)           /* an error message (they quote names and ids
                                                  from the wire) whose whole text cannot be
                                                  allocated: cut to this, ending in "..." */

#endif
