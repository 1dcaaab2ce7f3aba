#include "common/base/timeutil.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

int64_t now_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

int64_t now_real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

void sleep_ns(int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / NSEC_PER_SEC, .tv_nsec = ns % NSEC_PER_SEC };
	if (ns <= 0)
		return;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int64_t unit_ns(const char *u, size_t len)
{
	static const struct {
		const char *name;
		int64_t ns;
	} units[] = { { "ns", 1 },
		      { "us", NSEC_PER_USEC },
		      { "\xc2\xb5s", NSEC_PER_USEC }, /* U+00B5 micro sign */
		      { "\xce\xbcs", NSEC_PER_USEC }, /* U+03BC greek mu */
		      { "ms", NSEC_PER_MSEC },
		      { "s", NSEC_PER_SEC },
		      { "m", 60 * NSEC_PER_SEC },
		      { "h", 3600 * NSEC_PER_SEC } };

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strlen(units[i].name) == len && memcmp(units[i].name, u, len) == 0)
			return units[i].ns;
	return 0;
}

int duration_parse(const char *s, int64_t *ret_ns)
{
	bool neg = false;
	__int128 total = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (strcmp(p, "0") == 0) {
		*ret_ns = 0;
		return 0;
	}
	if (!*p)
		return -EINVAL;
	while (*p) {
		__int128 whole = 0, frac = 0, scale = 1;
		bool digits = false;
		while (isdigit((unsigned char)*p)) {
			whole = whole * 10 + (*p++ - '0');
			digits = true;
			if (whole > (__int128)INT64_MAX)
				return -ERANGE;
		}
		if (*p == '.') {
			p++;
			while (isdigit((unsigned char)*p)) {
				if (scale < (__int128)1000000000000000000LL) {
					frac = frac * 10 + (*p - '0');
					scale *= 10;
				}
				p++;
				digits = true;
			}
		}
		if (!digits)
			return -EINVAL;
		const char *u = p;
		while (*p && !isdigit((unsigned char)*p) && *p != '.')
			p++;
		int64_t mult = unit_ns(u, (size_t)(p - u));
		if (!mult)
			return -EINVAL;
		total += whole * mult + frac * mult / scale;
		if (total > (__int128)INT64_MAX)
			return -ERANGE;
	}
	*ret_ns = neg ? -(int64_t)total : (int64_t)total;
	return 0;
}

/* Go's fmtFrac: v / 10^prec with trailing zeros dropped. */
static size_t fmt_frac(char *out, uint64_t v, int prec, uint64_t *ret)
{
	char tmp[24];
	size_t n = 0;
	bool print = false;

	for (int i = 0; i < prec; i++) {
		int digit = (int)(v % 10);
		print = print || digit != 0;
		if (print)
			tmp[n++] = (char)('0' + digit);
		v /= 10;
	}
	size_t o = 0;
	if (print) {
		out[o++] = '.';
		while (n)
			out[o++] = tmp[--n];
	}
	*ret = v;
	return o;
}

int duration_format(int64_t ns, char *buf, size_t n)
{
	char out[64];
	size_t o = 0;
	uint64_t u = ns < 0 ? (uint64_t)(-(ns + 1)) + 1 : (uint64_t)ns;

	if (u < (uint64_t)NSEC_PER_SEC) {
		const char *unit;
		int prec;
		if (u == 0)
			return snprintf(buf, n, "0s") >= (int)n ? -ENAMETOOLONG : 2;
		if (u < 1000) {
			prec = 0;
			unit = "ns";
		} else if (u < 1000000) {
			prec = 3;
			unit = "\xc2\xb5s";
		} else {
			prec = 6;
			unit = "ms";
		}
		char frac[24];
		size_t fl = fmt_frac(frac, u, prec, &u);
		o = (size_t)snprintf(out, sizeof(out), "%s%llu%.*s%s", ns < 0 ? "-" : "",
				     (unsigned long long)u, (int)fl, frac, unit);
	} else {
		char frac[24];
		size_t fl = fmt_frac(frac, u, 9, &u);
		uint64_t secs = u % 60, mins = (u / 60) % 60, hours = u / 3600;
		int w = snprintf(out, sizeof(out), "%s", ns < 0 ? "-" : "");
		if (hours)
			w += snprintf(out + w, sizeof(out) - (size_t)w, "%lluh", (unsigned long long)hours);
		if (hours || mins)
			w += snprintf(out + w, sizeof(out) - (size_t)w, "%llum", (unsigned long long)mins);
		w += snprintf(out + w, sizeof(out) - (size_t)w, "%llu%.*ss", (unsigned long long)secs,
			      (int)fl, frac);
		o = (size_t)w;
	}
	if (o >= n)
		return -ENAMETOOLONG;
	memcpy(buf, out, o + 1);
	return (int)o;
}

static int parse_digits(const char **p, int count, int *ret)
{
	int v = 0;
	for (int i = 0; i < count; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return -EINVAL;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += count;
	*ret = v;
	return 0;
}

static int expect(const char **p, char c)
{
	if (**p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

int rfc3339_parse(const char *s, int64_t *ret_ns)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int Y, M, D, h, m, sec, off = 0;
	int64_t frac = 0;
	const char *p = s;
	struct tm tm = { 0 };

	if (!s)
		return -EINVAL;
	if (parse_digits(&p, 4, &Y) || expect(&p, '-') || parse_digits(&p, 2, &M) ||
	    expect(&p, '-') || parse_digits(&p, 2, &D))
		return -EINVAL;
	if (*p != 'T' && *p != 't' && *p != ' ')
		return -EINVAL;
	p++;
	if (parse_digits(&p, 2, &h) || expect(&p, ':') || parse_digits(&p, 2, &m) ||
	    expect(&p, ':') || parse_digits(&p, 2, &sec))
		return -EINVAL;
	if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h > 23 || m > 59 || sec > 60)
		return -EINVAL;
	if (*p == '.' || *p == ',') {
		int digits = 0;
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		while (isdigit((unsigned char)*p)) {
			if (digits < 9) {
				frac = frac * 10 + (*p - '0');
				digits++;
			}
			p++;
		}
		while (digits++ < 9)
			frac *= 10;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1, oh, om;
		if (parse_digits(&p, 2, &oh) || expect(&p, ':') || parse_digits(&p, 2, &om) ||
		    oh > 23 || om > 59)
			return -EINVAL;
		off = sign * (oh * 3600 + om * 60);
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	tm.tm_year = Y - 1900;
	tm.tm_mon = M - 1;
	tm.tm_mday = D;
	tm.tm_hour = h;
	tm.tm_min = m;
	tm.tm_sec = sec;
	time_t t = timegm(&tm);
	*ret_ns = ((int64_t)t - off) * NSEC_PER_SEC + frac;
	return 0;
}

int rfc3339_format(int64_t ns, int frac_digits, char *buf, size_t n)
{
	time_t t = (time_t)(ns / NSEC_PER_SEC);
	int64_t rem = ns % NSEC_PER_SEC;
	struct tm tm;
	char out[64];
	int w;

	if (rem < 0) {
		rem += NSEC_PER_SEC;
		t--;
	}
	gmtime_r(&t, &tm);
	w = snprintf(out, sizeof(out), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	if (frac_digits > 0) {
		if (frac_digits > 9)
			frac_digits = 9;
		int64_t f = rem;
		for (int i = frac_digits; i < 9; i++)
			f /= 10;
		w += snprintf(out + w, sizeof(out) - (size_t)w, ".%0*lld", frac_digits, (long long)f);
	}
	w += snprintf(out + w, sizeof(out) - (size_t)w, "Z");
	if ((size_t)w >= n)
		return -ENAMETOOLONG;
	memcpy(buf, out, (size_t)w + 1);
	return w;
}

static __thread uint64_t rng_state;

uint64_t random_below(uint64_t n)
{
	if (!rng_state) {
		if (getrandom(&rng_state, sizeof(rng_state), 0) != sizeof(rng_state) || !rng_state)
			rng_state = (uint64_t)now_mono_ns() | 1;
	}
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	uint64_t x = rng_state * 2685821657736338717ULL;
	return n ? x % n : 0;
}

int64_t backoff_next(struct backoff *b)
{
	int64_t d = b->base_ns;

	for (unsigned i = 0; i < b->attempt && d < b->max_ns; i++)
		d = d > INT64_MAX / 2 ? INT64_MAX : d * 2;
	if (b->max_ns > 0 && d > b->max_ns)
		d = b->max_ns;
	b->attempt++;
	if (d <= 0)
		return 0;
	if (b->full_jitter)
		return (int64_t)random_below((uint64_t)d + 1);
	if (b->jitter > 0)
		d += (int64_t)((double)random_below((uint64_t)d + 1) * b->jitter);
	return d;
}

void backoff_reset(struct backoff *b)
{
	b->attempt = 0;
}
