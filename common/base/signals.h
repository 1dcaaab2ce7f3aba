/* Graceful stop: SIGTERM and SIGINT cancel the process's token (cancel.h: cancel_root()), which
 * every subcommand can wait on; a second one exits at once. SIGPIPE is ignored. Call
 * signals_setup() before creating any thread.
 *
 * The stop_* functions are the old names of the root token's operations, kept for the modules
 * that still use them: stop_wait(t) is cancel_wait(cancel_root(), t), stop_requested() is
 * cancel_is_cancelled(cancel_root()), stop_request() is cancel_cancel(cancel_root()). New code
 * uses cancel.h, and passes a token down rather than reading the root deep in the code. */
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
