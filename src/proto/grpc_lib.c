/* grpc_lib.c - starting gRPC's C core.
 *
 * Debian 12's abseil (20220623, namespace absl::debian3) is built without
 * NDEBUG, so its mutexes default to deadlock detection: every Lock and Unlock
 * of every mutex in gRPC's core updates a lock-order graph (GraphCycles). gRPC's
 * own release builds compile it out. The switch is C++
 * (absl::SetMutexDeadlockDetectionMode(OnDeadlockCycle::kIgnore)); it is looked
 * up by its symbol in the abseil the process loaded, so an abseil without it, or
 * of another namespace, leaves everything as it was. Server instructions per
 * unary ModelInfer of identity_fp32 under callgrind: 79.2k with detection on,
 * 70.4k off (docs/performance.md, "gRPC and metrics").
 */
#include "grpc_lib.h"

#include <dlfcn.h>
#include <grpc/grpc.h>

/* absl::debian3::SetMutexDeadlockDetectionMode(absl::debian3::OnDeadlockCycle) */
#define SET_MODE "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE"
enum { ON_DEADLOCK_CYCLE_IGNORE = 0 }; /* OnDeadlockCycle::kIgnore, an int-sized enum class */

bool nr_grpc_lib_init(void)
{
    void (*set_mode)(int);
    *(void **)&set_mode = dlsym(RTLD_DEFAULT, SET_MODE); /* object to function pointer, as POSIX allows */
    if (set_mode != NULL)
        set_mode(ON_DEADLOCK_CYCLE_IGNORE); /* before grpc_init starts any thread */
    grpc_init();
    return set_mode != NULL;
}
