/* Cancellation: one mechanism for every blocking path.
 *
 * A token is cancelled once and observed by any number of threads. Tokens form a tree: a
 * child is cancelled with its parent (a controller's token under the process's, a request's
 * under its controller's), never the other way round. The process's root token is cancelled
 * by SIGTERM/SIGINT (signals.h) or by stop_request().
 *
 *   struct cancel *ct;
 *   cancel_new(cancel_root(), &ct);          // a child of the process token
 *   while (!cancel_wait(ct, period_ns))      // sleeps a period, true once cancelled
 *           do_work();
 *   poll: add cancel_fd(ct) to the set; it becomes readable once ct is cancelled
 *   cancel_cancel(ct);                        // ct and its children; idempotent
 *   cancel_free(ct);                          // after every user is done with it
 *
 * Every blocking call takes a token (or uses cancel_root() when it has none): HTTP requests
 * (http_request.cancel), watches, sleeps and backoffs, the gRPC server, child processes. No
 * `volatile bool` flag and no polling sleep. All functions are thread-safe; a NULL token is
 * never cancelled. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

struct cancel;

/* The process's token (created at first use; never freed). */
struct cancel *cancel_root(void);
/* A new token, a child of parent (NULL: no parent). 0 or -ENOMEM/-EMFILE. */
int cancel_new(struct cancel *parent, struct cancel **ret);
/* Detaches the token from its parent and frees it; its children lose their parent link (they
 * are not cancelled). NULL is fine. */
void cancel_free(struct cancel *c);
/* Cancels c and every descendant. */
void cancel_cancel(struct cancel *c);
bool cancel_is_cancelled(const struct cancel *c);
/* Waits up to timeout_ns (negative: without limit) for c to be cancelled; true once it is.
 * With a NULL token it is a plain sleep that returns false. */
bool cancel_wait(struct cancel *c, int64_t timeout_ns);
/* A descriptor that becomes readable once c is cancelled (level-triggered: it stays readable);
 * -1 for NULL. Owned by the token. */
int cancel_fd(struct cancel *c);
/* For tests: forgets that c was cancelled (not its children). */
void cancel_reset(struct cancel *c);
