/* A bounded table of per-key locks: "one operation per key at a time", where a second caller
 * for a busy key is turned away at once instead of waiting (the CSI drivers answer ABORTED, as
 * the CSI specification asks). The table has a hard cap on keys held at once, so a peer that
 * sends many distinct keys cannot grow it without limit.
 *
 *   struct keylock *kl;
 *   r = keylock_new(4096, &kl);
 *   r = keylock_try(kl, "vol/vol-0abc");   // 0: held; -EBUSY: someone holds it;
 *   if (r < 0) ...                          // -ENOSPC: the table is full
 *   ...the work...
 *   keylock_release(kl, "vol/vol-0abc");
 *   keylock_free(kl);
 *
 * All functions are thread-safe. A key is any NUL-terminated string of at most KEYLOCK_KEY_MAX
 * bytes; it is copied. */
#pragma once
#include <stddef.h>

#define KEYLOCK_KEY_MAX 1024

struct keylock;

/* A table that holds at most max keys at once (max > 0). 0 or -ENOMEM, -EINVAL. */
int keylock_new(size_t max, struct keylock **ret);
/* Frees the table (keys still held are dropped). NULL is fine. */
void keylock_free(struct keylock *kl);
/* Takes key: 0, or -EBUSY when it is held already, -ENOSPC when max keys are held, -EINVAL for
 * a NULL, empty or over-long key, -ENOMEM. Never blocks on the key. */
int keylock_try(struct keylock *kl, const char *key);
/* Releases a key taken with keylock_try(); a key not held is ignored. */
void keylock_release(struct keylock *kl, const char *key);
/* The number of keys held right now. */
size_t keylock_count(struct keylock *kl);
