/* clock.h - the process clocks every layer stamps requests and batches with. */
#ifndef NR_CLOCK_H
#define NR_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

uint64_t nr_now_ns(void);  /* CLOCK_MONOTONIC ns */
uint64_t nr_wall_ms(void); /* CLOCK_REALTIME ms (last_inference, timestamps shown to users) */
/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines, and such a deadline
 * from a time in nr_now_ns's terms. */
void nr_cond_init_monotonic(pthread_cond_t *cv);
struct timespec nr_timespec_of(uint64_t ns);

#endif
