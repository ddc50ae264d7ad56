/* grpc_lib.h - starting gRPC's C core, for the server and the tools that speak
 * gRPC (nereid-perf, nereid-analyzer, bench-grpc-load).
 */
#ifndef NR_GRPC_LIB_H
#define NR_GRPC_LIB_H

#include <stdbool.h>

/* grpc_init(), after turning off abseil's mutex deadlock detection where the
 * abseil gRPC runs on has it on. Returns whether it was turned off here. */
bool nr_grpc_lib_init(void);

#endif
