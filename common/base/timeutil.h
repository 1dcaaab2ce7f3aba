/* Time helpers: monotonic and wall clocks in nanoseconds, Go-style durations ("1h30m",
 * "250ms"), RFC 3339 timestamps with fractions and zones, and backoff with jitter. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NSEC_PER_USEC 1000LL
#define NSEC_PER_MSEC 1000000LL
#define NSEC_PER_SEC 1000000000LL

int64_t now_mono_ns(void);
int64_t now_real_ns(void);
/* Sleeps for ns nanoseconds, restarting after signals. */
void sleep_ns(int64_t ns);

/* Parses a Go duration: a sequence of decimal numbers with optional fractions and a unit each
 * (ns, us, µs, ms, s, m, h), optionally signed; "0" alone is allowed. -EINVAL / -ERANGE. */
int duration_parse(const char *s, int64_t *ret_ns);
/* Formats as Go does ("1h30m0s", "1.5s", "250ms", "0s"). Returns the length or -ENAMETOOLONG. */
int duration_format(int64_t ns, char *buf, size_t n);

/* Parses RFC 3339 ("2006-01-02T15:04:05Z", "...05.123456789+02:00", lower-case t/z
 * accepted) into nanoseconds since the epoch. */
int rfc3339_parse(const char *s, int64_t *ret_ns);
/* Formats UTC with the given number of fraction digits (0 = "2006-01-02T15:04:05Z", as
 * Kubernetes writes metav1.Time; 6 for MicroTime). */
int rfc3339_format(int64_t ns, int frac_digits, char *buf, size_t n);

/* Exponential backoff with full jitter (AWS's "full jitter": a uniform delay between 0 and
 * min(max, base * 2^attempt)) or, with jitter_full false, the plain exponential delay plus up to
 * `jitter` of it at random (client-go's wait.Backoff). */
struct backoff {
	int64_t base_ns;
	int64_t max_ns;
	double jitter; /* 0..1, used when !full_jitter */
	bool full_jitter;
	unsigned attempt;
};

int64_t backoff_next(struct backoff *b);
void backoff_reset(struct backoff *b);
/* A uniformly random number in [0, n) from a thread-safe generator; n > 0. */
uint64_t random_below(uint64_t n);
