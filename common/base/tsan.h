/* Hand-offs that ThreadSanitizer cannot see. A library built without -fsanitize=thread (gRPC
 * core: its completion queue) passes our objects between threads with synchronisation TSan does
 * not observe, so every later access looks like a race. Mark the edge where it is:
 *
 *   tsan_release(c);                                  // this thread is done with c for now
 *   grpc_call_start_batch(c->call, ops, n, c, NULL);  // c comes back as the tag
 *   ...
 *   ev = grpc_completion_queue_next(cq, ...);
 *   tsan_acquire(ev.tag);                             // another thread takes c over
 *
 * Both are no-ops unless the build is `make SANITIZE=thread`. */
#pragma once

#if defined(__SANITIZE_THREAD__)
#define AWSK8S_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AWSK8S_TSAN 1
#endif
#endif

#ifdef AWSK8S_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define tsan_acquire(p) __tsan_acquire((void *)(p))
#define tsan_release(p) __tsan_release((void *)(p))
#else
#define tsan_acquire(p) ((void)(p))
#define tsan_release(p) ((void)(p))
#endif
