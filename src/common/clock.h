/* clock.h - the process clocks every layer stamps requests and batches with. */
#ifndef NR_CLOCK_H
#define NR_CLOCK_H

#include <stdint.h>

uint64_t nr_now_ns(void);  /* CLOCK_MONOTONIC ns */
uint64_t nr_wall_ms(void); /* CLOCK_REALTIME ms (last_inference, timestamps shown to users) */

#endif
