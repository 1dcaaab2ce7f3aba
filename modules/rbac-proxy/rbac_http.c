/* HTTP/1.1 for the proxy: request and response heads, body framing, path normalisation. Pure
 * functions over caller buffers (rbac_proxy.h); nothing here allocates. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "modules/rbac-proxy/rbac_proxy.h"

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool ieq(const char *a, size_t alen, const char *b)
{
	return alen == strlen(b) && strncasecmp(a, b, alen) == 0;
}

const char *rbac_head_get(const struct rbac_head *h, const char *name, size_t *len)
{
	for (size_t i = 0; i < h->nh; i++)
		if (ieq(h->h[i].name, h->h[i].name_len, name)) {
			*len = h->h[i].value_len;
			return h->h[i].value;
		}
	*len = 0;
	return NULL;
}

/* Calls fn for each comma-separated token of every header named name. */
static bool list_has(const struct rbac_head *h, const char *hname, const char *tok, size_t toklen)
{
	for (size_t i = 0; i < h->nh; i++) {
		if (!ieq(h->h[i].name, h->h[i].name_len, hname))
			continue;
		const char *p = h->h[i].value, *end = p + h->h[i].value_len;
		while (p < end) {
			while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
				p++;
			const char *s = p;
			while (p < end && *p != ',')
				p++;
			const char *e = p;
			while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			if ((size_t)(e - s) == toklen && strncasecmp(s, tok, toklen) == 0)
				return true;
		}
	}
	return false;
}

bool rbac_head_connection_has(const struct rbac_head *h, const char *name, size_t name_len)
{
	return list_has(h, "connection", name, name_len);
}

bool rbac_hop_by_hop(const char *name, size_t len)
{
	static const char *const hop[] = {"connection",	       "proxy-connection", "keep-alive",
					  "proxy-authenticate", "proxy-authorization", "te",
					  "trailer",	       "transfer-encoding", "upgrade"};
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (ieq(name, len, hop[i]))
			return true;
	return false;
}

static int parse_u64(const char *p, size_t n, uint64_t *ret)
{
	uint64_t v = 0;

	if (!n || n > 18)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*ret = v;
	return 0;
}

/* The start line: "METHOD SP target SP HTTP/1.x" or "HTTP/1.x SP status SP reason". */
static int parse_start(const char *p, size_t n, bool response, struct rbac_head *h)
{
	const char *sp1 = memchr(p, ' ', n), *sp2;

	if (!sp1)
		return -400;
	if (response) {
		if (sp1 - p != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
			return -400;
		h->minor = p[7] - '0';
		if ((size_t)(sp1 - p) + 4 > n || sp1[1] < '1' || sp1[1] > '5' || sp1[2] < '0' ||
		    sp1[2] > '9' || sp1[3] < '0' || sp1[3] > '9')
			return -400;
		h->status = (sp1[1] - '0') * 100 + (sp1[2] - '0') * 10 + (sp1[3] - '0');
		return 0;
	}
	h->method = p;
	h->method_len = (size_t)(sp1 - p);
	for (size_t i = 0; i < h->method_len; i++)
		if (!is_tchar((unsigned char)p[i]))
			return -400;
	sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - p));
	if (!h->method_len || !sp2 || (size_t)(p + n - sp2) != 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    (sp2[8] != '0' && sp2[8] != '1'))
		return -400;
	h->minor = sp2[8] - '0';
	h->target = sp1 + 1;
	h->target_len = (size_t)(sp2 - sp1 - 1);
	if (!h->target_len)
		return -400;
	for (size_t i = 0; i < h->target_len; i++)
		if ((unsigned char)h->target[i] <= ' ' || h->target[i] == 0x7f)
			return -400;
	return 0;
}

static int parse_field(const char *p, size_t n, struct rbac_head *h)
{
	const char *colon = memchr(p, ':', n), *v, *e = p + n;

	if (!colon || colon == p)
		return -400;
	for (const char *q = p; q < colon; q++)
		if (!is_tchar((unsigned char)*q))
			return -400;
	if (h->nh >= RBAC_MAX_HEADERS)
		return -431;
	for (v = colon + 1; v < e && (*v == ' ' || *v == '\t'); v++)
		;
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	for (const char *q = v; q < e; q++)
		if (((unsigned char)*q < ' ' && *q != '\t') || *q == 0x7f)
			return -400;
	h->h[h->nh++] = (struct rbac_hdr){p, v, (size_t)(colon - p), (size_t)(e - v)};
	return 0;
}

/* Framing, keep-alive and Expect from the fields. */
static int framing(struct rbac_head *h, bool response)
{
	bool have_cl = false;
	size_t len;

	for (size_t i = 0; i < h->nh; i++) {
		const struct rbac_hdr *f = &h->h[i];
		uint64_t v;
		if (ieq(f->name, f->name_len, "content-length")) {
			if (parse_u64(f->value, f->value_len, &v) < 0 ||
			    (have_cl && v != h->content_length))
				return -400;
			have_cl = true;
			h->content_length = v;
		} else if (ieq(f->name, f->name_len, "transfer-encoding")) {
			if (!ieq(f->value, f->value_len, "chunked") || h->body == RBAC_BODY_CHUNKED)
				return -501;
			h->body = RBAC_BODY_CHUNKED;
		}
	}
	/* both: a smuggling attempt (RFC 9112 6.1 allows closing after it) */
	if (have_cl && h->body == RBAC_BODY_CHUNKED)
		return -400;
	if (h->body != RBAC_BODY_CHUNKED)
		h->body = have_cl ? (h->content_length ? RBAC_BODY_LENGTH : RBAC_BODY_NONE)
				  : (response ? RBAC_BODY_CLOSE : RBAC_BODY_NONE);
	h->keep_alive = h->minor == 1 ? !list_has(h, "connection", "close", 5)
				      : list_has(h, "connection", "keep-alive", 10);
	const char *ex = response ? NULL : rbac_head_get(h, "expect", &len);
	if (ex) {
		if (!ieq(ex, len, "100-continue"))
			return -417;
		h->expect_continue = true;
	}
	return 0;
}

int rbac_head_parse(const char *data, size_t len, bool response, struct rbac_head *h)
{
	const char *p = data, *end = data + len, *eol;
	int r;

	memset(h, 0, sizeof(*h));
	/* a client may send empty lines before a request (RFC 9112 2.2) */
	while (!response && end - p >= 2 && p[0] == '\r' && p[1] == '\n')
		p += 2;
	const char *hend = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
	if (!hend)
		return 0;
	end = hend + 4;
	eol = memmem(p, (size_t)(end - p), "\r\n", 2);
	if ((r = parse_start(p, (size_t)(eol - p), response, h)) < 0)
		return r;
	for (p = eol + 2;; p = eol + 2) {
		eol = memmem(p, (size_t)(end - p), "\r\n", 2);
		if (eol == p)
			break;
		if (*p == ' ' || *p == '\t') /* obsolete line folding */
			return -400;
		if ((r = parse_field(p, (size_t)(eol - p), h)) < 0)
			return r;
	}
	h->head_len = (size_t)(eol + 2 - data);
	if ((r = framing(h, response)) < 0)
		return r;
	return 1;
}

void rbac_framer_init(struct rbac_framer *f, enum rbac_body kind, uint64_t length)
{
	*f = (struct rbac_framer){.kind = kind, .left = length};
	f->done = kind == RBAC_BODY_NONE || (kind == RBAC_BODY_LENGTH && !length);
}

enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF,
       CH_TRAILER_LINE, CH_TRAILER_LINE_LF };

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The chunked syntax, one byte at a time except for data. */
static long feed_chunked(struct rbac_framer *f, const char *p, size_t n)
{
	size_t i = 0;

	while (i < n && !f->done) {
		char c = p[i];
		switch (f->cstate) {
		case CH_SIZE:
			if (hexval(c) >= 0) {
				if (f->left >> 56)
					return -EBADMSG;
				f->left = f->left * 16 + (uint64_t)hexval(c);
				f->digit = true;
			} else if (!f->digit) {
				return -EBADMSG;
			} else if (c == ';' || c == ' ' || c == '\t') {
				f->cstate = CH_EXT;
			} else if (c == '\r') {
				f->cstate = CH_SIZE_LF;
			} else {
				return -EBADMSG;
			}
			i++;
			break;
		case CH_EXT:
			if (c == '\r')
				f->cstate = CH_SIZE_LF;
			else if (c == '\n' || (unsigned char)c < ' ')
				return -EBADMSG;
			i++;
			break;
		case CH_SIZE_LF:
			if (c != '\n')
				return -EBADMSG;
			f->digit = false;
			f->cstate = f->left ? CH_DATA : CH_TRAILER;
			i++;
			break;
		case CH_DATA: {
			size_t take = n - i < f->left ? n - i : (size_t)f->left;
			f->left -= take;
			f->total += take;
			i += take;
			if (!f->left)
				f->cstate = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
		case CH_TRAILER_LINE:
			if (c == '\r')
				f->cstate = f->cstate == CH_DATA_CR ? CH_DATA_LF : CH_TRAILER_LINE_LF;
			else if (f->cstate == CH_DATA_CR)
				return -EBADMSG;
			i++;
			break;
		case CH_DATA_LF:
			if (c != '\n')
				return -EBADMSG;
			f->cstate = CH_SIZE;
			i++;
			break;
		case CH_TRAILER: /* a trailer line or the final CRLF */
			f->cstate = c == '\r' ? CH_TRAILER_LF : CH_TRAILER_LINE;
			i++;
			break;
		case CH_TRAILER_LF:
			if (c != '\n')
				return -EBADMSG;
			f->done = true;
			i++;
			break;
		case CH_TRAILER_LINE_LF:
			if (c != '\n')
				return -EBADMSG;
			f->cstate = CH_TRAILER;
			i++;
			break;
		}
	}
	return (long)i;
}

long rbac_framer_feed(struct rbac_framer *f, const char *p, size_t n)
{
	if (f->done)
		return 0;
	switch (f->kind) {
	case RBAC_BODY_NONE:
		return 0;
	case RBAC_BODY_CLOSE:
		f->total += n;
		return (long)n;
	case RBAC_BODY_LENGTH: {
		size_t take = n < f->left ? n : (size_t)f->left;
		f->left -= take;
		f->total += take;
		f->done = !f->left;
		return (long)take;
	}
	case RBAC_BODY_CHUNKED:
		return feed_chunked(f, p, n);
	}
	return -EBADMSG;
}

int rbac_path_clean(const char *path, size_t len, char *out, size_t outlen)
{
	size_t o = 0;

	if (!len || path[0] != '/' || outlen < 2)
		return -EINVAL;
	/* decode, then clean segment by segment */
	char dec[8192];
	size_t d = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)path[i];
		if (c == '%') {
			int hi = i + 2 < len ? hexval(path[i + 1]) : -1;
			int lo = hi >= 0 ? hexval(path[i + 2]) : -1;
			if (lo < 0)
				return -EINVAL;
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
		}
		if (c < ' ' || c == 0x7f)
			return -EINVAL;
		if (d + 1 >= sizeof(dec))
			return -E2BIG;
		dec[d++] = (char)c;
	}
	out[o++] = '/';
	for (size_t i = 0; i < d;) {
		while (i < d && dec[i] == '/')
			i++;
		size_t s = i;
		while (i < d && dec[i] != '/')
			i++;
		size_t n = i - s;
		if (!n || (n == 1 && dec[s] == '.'))
			continue;
		if (n == 2 && dec[s] == '.' && dec[s + 1] == '.') {
			while (o > 1 && out[o - 1] != '/')
				o--;
			if (o > 1)
				o--; /* the slash before the dropped segment */
			continue;
		}
		if (o > 1) {
			if (o + 1 >= outlen)
				return -E2BIG;
			out[o++] = '/';
		}
		if (o + n >= outlen)
			return -E2BIG;
		memcpy(out + o, dec + s, n);
		o += n;
	}
	/* a trailing slash stays, as Go's ServeMux keeps "/metrics/" apart from "/metrics" */
	if (d > 1 && dec[d - 1] == '/' && o > 1) {
		if (o + 1 >= outlen)
			return -E2BIG;
		out[o++] = '/';
	}
	out[o] = 0;
	return 0;
}

int rbac_path_encode(const char *path, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9') || strchr("-._~/!$&'()*+,;=:@", *p);
		if (o + (plain ? 1 : 3) >= outlen)
			return -E2BIG;
		if (plain) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = 0;
	return 0;
}

bool rbac_path_match(char *const *patterns, const char *path)
{
	for (char *const *p = patterns; p && *p; p++)
		if (fnmatch(*p, path, FNM_PATHNAME) == 0)
			return true;
	return false;
}
