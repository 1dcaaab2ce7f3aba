/* aws-k8s api-proxy: the upstream set. One mutex guards it; it is taken once per connect, never
 * per byte. An upstream removed from the set stays alive (refcounted) while connections to it
 * are open, so replacing the set never drops a connection. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/api-proxy/api_proxy.h"

int ap_hostport_split(const char *s, char *host, size_t hostlen, unsigned *ret_port)
{
	const char *colon, *h = s;
	size_t hl;
	long long port;

	if (*s == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || strchr(s, ':') != colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= hostlen || str_to_ll(colon + 1, 1, 65535, &port) < 0)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*ret_port = (unsigned)port;
	return 0;
}

static int check_name(const char *name, char *err, size_t errlen)
{
	char host[256];
	unsigned port;

	if (strlen(name) >= sizeof(((struct ap_upstream *)0)->name) ||
	    ap_hostport_split(name, host, sizeof(host), &port) < 0) {
		snprintf(err, errlen, "'%s' is not HOST:PORT", name);
		return -EINVAL;
	}
	return 0;
}

int ap_upstream_file_parse(const char *text, size_t len, char ***list, char *err, size_t errlen)
{
	size_t lineno = 0;

	for (const char *p = text, *end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		char line[512], *s, *hash;
		size_t n = (size_t)(le - p);

		lineno++;
		if (n >= sizeof(line)) {
			snprintf(err, errlen, "line %zu: longer than %zu bytes", lineno, sizeof(line) - 1);
			return -EINVAL;
		}
		memcpy(line, p, n);
		line[n] = '\0';
		p = nl ? nl + 1 : end;
		if ((hash = strchr(line, '#')))
			*hash = '\0';
		for (s = line; isspace((unsigned char)*s); s++)
			;
		for (char *e = s + strlen(s); e > s && isspace((unsigned char)e[-1]); e--)
			e[-1] = '\0';
		if (!*s)
			continue;
		if (str_has_prefix(s, "server") && isspace((unsigned char)s[6])) {
			/* nginx: "server ADDR [weight=N] [backup] ...;" (not a "server {" block) */
			char *semi = strchr(s, ';');
			if (s[6 + strspn(s + 6, " \t")] == '{')
				continue;
			if (!semi) {
				snprintf(err, errlen, "line %zu: '%s' has no ';'", lineno, s);
				return -EINVAL;
			}
			*semi = '\0';
			for (s += 6; isspace((unsigned char)*s); s++)
				;
			s[strcspn(s, " \t")] = '\0';
		} else if (strpbrk(s, " \t{};")) {
			continue; /* the rest of an nginx configuration */
		}
		if (check_name(s, err, errlen) < 0) {
			char why[320];
			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "line %zu: %s", lineno, why);
			return -EINVAL;
		}
		if (!strv_contains(*list, s) && strv_push(list, s) < 0)
			return -ENOMEM;
	}
	return 0;
}

void ap_pool_init(struct ap_pool *p, const char *local_ip, int64_t fail_timeout_ns)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	p->local_ip = local_ip;
	p->fail_timeout_ns = fail_timeout_ns;
	p->next_id = 1;
}

static void unref_locked(struct ap_upstream *u)
{
	if (--u->refs == 0)
		free(u);
}

void ap_pool_release(struct ap_pool *p)
{
	for (size_t i = 0; i < p->n; i++) {
		p->ups[i]->member = false;
		unref_locked(p->ups[i]);
	}
	p->n = 0;
	pthread_mutex_destroy(&p->mu);
}

static int resolve(const char *name, struct ap_upstream *u, const char *local_ip, char *err,
		   size_t errlen)
{
	char host[256], num[INET6_ADDRSTRLEN];
	unsigned port;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
	char ps[8];
	int r;

	if (check_name(name, err, errlen) < 0)
		return -EINVAL;
	ap_hostport_split(name, host, sizeof(host), &port);
	snprintf(ps, sizeof(ps), "%u", port);
	if ((r = getaddrinfo(host, ps, &hints, &ai)) != 0) {
		snprintf(err, errlen, "'%s' does not resolve: %s", name, gai_strerror(r));
		return -EINVAL;
	}
	memcpy(&u->addr, ai->ai_addr, ai->ai_addrlen);
	u->addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
	str_copy(u->name, sizeof(u->name), name);
	if (local_ip && *local_ip &&
	    getnameinfo((struct sockaddr *)&u->addr, u->addrlen, num, sizeof(num), NULL, 0,
			NI_NUMERICHOST) == 0)
		u->local = strcmp(num, local_ip) == 0;
	return 0;
}

int ap_pool_set(struct ap_pool *p, char *const *all, char *err, size_t errlen)
{
	struct ap_upstream *next[AP_MAX_UPSTREAMS], *fresh[AP_MAX_UPSTREAMS];
	const char *names[AP_MAX_UPSTREAMS];
	size_t n = 0, nfresh = 0;
	bool changed;

	for (char *const *a = all; a && *a; a++) { /* a name given twice counts once */
		bool dup = false;
		for (size_t i = 0; i < n && !dup; i++)
			dup = strcmp(names[i], *a) == 0;
		if (dup)
			continue;
		if (n == AP_MAX_UPSTREAMS) {
			snprintf(err, errlen, "%zu upstreams: at most %d", strv_len(all),
				 AP_MAX_UPSTREAMS);
			return -E2BIG;
		}
		names[n++] = *a;
	}
	/* resolve the new names outside the lock */
	for (size_t i = 0; i < n; i++) {
		bool known = false;
		pthread_mutex_lock(&p->mu);
		for (size_t j = 0; j < p->n && !known; j++)
			known = strcmp(p->ups[j]->name, names[i]) == 0;
		pthread_mutex_unlock(&p->mu);
		if (known)
			continue;
		struct ap_upstream *u = calloc(1, sizeof(*u));
		if (!u || resolve(names[i], u, p->local_ip, err, errlen) < 0) {
			if (!u)
				snprintf(err, errlen, "out of memory");
			free(u);
			for (size_t k = 0; k < nfresh; k++)
				free(fresh[k]);
			return u ? -EINVAL : -ENOMEM;
		}
		fresh[nfresh++] = u;
	}
	pthread_mutex_lock(&p->mu);
	changed = n != p->n;
	for (size_t i = 0; i < n; i++) {
		next[i] = NULL;
		for (size_t j = 0; j < p->n && !next[i]; j++)
			if (strcmp(p->ups[j]->name, names[i]) == 0)
				next[i] = p->ups[j];
		for (size_t k = 0; k < nfresh && !next[i]; k++)
			if (fresh[k] && strcmp(fresh[k]->name, names[i]) == 0) {
				next[i] = fresh[k];
				fresh[k] = NULL;
				next[i]->id = p->next_id++;
				next[i]->member = true;
				next[i]->refs = 1;
				changed = true;
			}
	}
	for (size_t j = 0; j < p->n; j++) {
		bool kept = false;
		for (size_t i = 0; i < n && !kept; i++)
			kept = next[i] == p->ups[j];
		if (!kept) {
			p->ups[j]->member = false;
			unref_locked(p->ups[j]);
			changed = true;
		}
	}
	memcpy(p->ups, next, n * sizeof(next[0]));
	p->n = n;
	if (changed)
		p->changes++;
	pthread_mutex_unlock(&p->mu);
	for (size_t k = 0; k < nfresh; k++)
		free(fresh[k]); /* NULL unless added meanwhile by another caller */
	return changed ? 1 : 0;
}

static bool tried_has(const uint64_t *tried, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (tried[i] == id)
			return true;
	return false;
}

/* Lower is better: up before down, local before the others, then the fewest connections. */
static uint64_t rank(const struct ap_upstream *u, int64_t now)
{
	uint64_t r = u->active;
	if (!u->local)
		r += (uint64_t)1 << 32;
	if (u->down_until > now)
		r += (uint64_t)1 << 40;
	return r;
}

struct ap_upstream *ap_pool_pick(struct ap_pool *p, const uint64_t *tried, size_t ntried)
{
	struct ap_upstream *best = NULL;
	uint64_t best_rank = UINT64_MAX;

	pthread_mutex_lock(&p->mu);
	/* Read under the lock: a failure marked by another worker just before (down_until =
	 * its now + fail-timeout) is then never seen from the past, so --fail-timeout=0s means
	 * an upstream is never skipped. */
	int64_t now = now_mono_ns();
	for (size_t k = 0; k < p->n; k++) {
		struct ap_upstream *u = p->ups[(p->rr + k) % p->n];
		if (tried_has(tried, ntried, u->id))
			continue;
		uint64_t r = rank(u, now);
		if (r < best_rank) {
			best = u;
			best_rank = r;
		}
	}
	if (best) {
		best->refs++;
		best->active++;
		best->conns++;
		p->rr++;
	}
	pthread_mutex_unlock(&p->mu);
	return best;
}

void ap_pool_connected(struct ap_pool *p, struct ap_upstream *u)
{
	pthread_mutex_lock(&p->mu);
	u->down_until = 0;
	pthread_mutex_unlock(&p->mu);
}

void ap_pool_put(struct ap_pool *p, struct ap_upstream *u, bool failed)
{
	pthread_mutex_lock(&p->mu);
	u->active--;
	if (failed) {
		u->failures++;
		u->down_until = now_mono_ns() + p->fail_timeout_ns;
	}
	unref_locked(u);
	pthread_mutex_unlock(&p->mu);
}

char *ap_pool_describe(struct ap_pool *p, size_t *ret_n)
{
	struct buf b = BUF_INIT(AP_MAX_UPSTREAMS * 300);

	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->n; i++)
		buf_printf(&b, "%s%s%s", i ? "," : "", p->ups[i]->name,
			   p->ups[i]->local ? "(local)" : "");
	*ret_n = p->n;
	pthread_mutex_unlock(&p->mu);
	return buf_steal(&b);
}
