/* Graceful stop: SIGTERM and SIGINT cancel the process's token (cancel.h: cancel_root()), which
 * every subcommand can wait on; a second one exits at once. SIGPIPE is ignored. Call
 * signals_setup() before creating any thread. The stop_* names are the root token's. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

int signals_setup(void);
bool stop_requested(void);
/* Requests the stop from inside the program (e.g. a fatal error in one controller). */
void stop_request(void);
/* Sleeps up to timeout_ns (negative: forever); returns true when a stop was requested. */
bool stop_wait(int64_t timeout_ns);
/* A descriptor that becomes readable once a stop is requested (for poll loops). */
int stop_fd(void);
/* For tests: forget a requested stop. */
void stop_reset(void);
