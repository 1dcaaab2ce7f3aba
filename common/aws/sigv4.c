/* AWS Signature Version 4 (see sigv4.h). */
#include "common/aws/sigv4.h"
#include "common/base/secret.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SHA256_LEN 32

static const char *const unsigned_headers[] = {
    "connection",
    "expect",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "x-amzn-trace-id",
};

static const char *const owned_headers[] = {"host", "authorization", "x-amz-date",
					    "x-amz-security-token"};

static void hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * n] = 0;
}

/* OpenSSL 3's one-shot helpers look the digest up on every call, which costs more than the
 * hashing of a small request: the digest is fetched once, each thread keeps a digest context,
 * and HMAC is built on it. Each thread also keeps the last signing key (it depends only on the
 * secret, the date, the region and the service), keyed by a hash of the secret, as the SDKs'
 * signing-key caches do. */
struct sigv4_tls {
	EVP_MD_CTX *ctx;
	bool valid;
	char date[9];
	char region[64];
	char service[64];
	unsigned char secret_hash[SHA256_LEN];
	unsigned char key[SHA256_LEN];
};

static EVP_MD *md_sha256;
static pthread_key_t tls_key;
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static bool crypto_ok;

static void tls_free(void *p)
{
	struct sigv4_tls *t = p;

	if (!t)
		return;
	EVP_MD_CTX_free(t->ctx);
	secret_wipe(t, sizeof(*t));
	free(t);
}

static void crypto_init(void)
{
	md_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	crypto_ok = md_sha256 && pthread_key_create(&tls_key, tls_free) == 0;
}

static struct sigv4_tls *tls_get(void)
{
	struct sigv4_tls *t;

	pthread_once(&crypto_once, crypto_init);
	if (!crypto_ok)
		return NULL;
	t = pthread_getspecific(tls_key);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ctx = EVP_MD_CTX_new();
	if (!t->ctx || pthread_setspecific(tls_key, t) != 0) {
		EVP_MD_CTX_free(t->ctx);
		free(t);
		return NULL;
	}
	return t;
}

/* SHA-256 of the concatenation of up to two parts. */
static int sha256(struct sigv4_tls *t, const void *a, size_t alen, const void *b, size_t blen,
		  unsigned char out[SHA256_LEN])
{
	unsigned int mdlen = 0;

	if (!EVP_DigestInit_ex(t->ctx, md_sha256, NULL) || !EVP_DigestUpdate(t->ctx, a, alen) ||
	    (blen && !EVP_DigestUpdate(t->ctx, b, blen)) ||
	    !EVP_DigestFinal_ex(t->ctx, out, &mdlen) || mdlen != SHA256_LEN)
		return -EIO;
	return 0;
}

static int sha256_hex(struct sigv4_tls *t, const void *data, size_t len, char out[65])
{
	unsigned char md[SHA256_LEN];
	int r = sha256(t, data, len, NULL, 0, md);

	if (r < 0)
		return r;
	hex_encode(md, SHA256_LEN, out);
	return 0;
}

/* HMAC-SHA256 (RFC 2104) over the thread's digest context. */
static int hmac(struct sigv4_tls *t, const void *key, size_t klen, const void *msg, size_t mlen,
		unsigned char out[SHA256_LEN])
{
	unsigned char k[64] = {0}, pad[64], inner[SHA256_LEN];
	int r;

	if (klen > sizeof(k)) {
		if ((r = sha256(t, key, klen, NULL, 0, k)) < 0)
			return r;
	} else {
		memcpy(k, key, klen);
	}
	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] = k[i] ^ 0x36;
	r = sha256(t, pad, sizeof(pad), msg, mlen, inner);
	for (size_t i = 0; r >= 0 && i < sizeof(pad); i++)
		pad[i] = k[i] ^ 0x5c;
	if (r >= 0)
		r = sha256(t, pad, sizeof(pad), inner, sizeof(inner), out);
	secret_wipe(k, sizeof(k));
	secret_wipe(pad, sizeof(pad));
	secret_wipe(inner, sizeof(inner));
	return r;
}

/* The signing key for (secret, date, region, service), from the thread's cache or derived. */
static int signing_key(struct sigv4_tls *t, const char *secret, const char *date,
		       const char *region, const char *service, unsigned char out[SHA256_LEN])
{
	unsigned char sh[SHA256_LEN], k1[SHA256_LEN], k2[SHA256_LEN];
	char ks[256];
	int r;

	if ((r = sha256(t, secret, strlen(secret), NULL, 0, sh)) < 0)
		return r;
	if (t->valid && strcmp(t->date, date) == 0 && strcmp(t->region, region) == 0 &&
	    strcmp(t->service, service) == 0 && memcmp(t->secret_hash, sh, sizeof(sh)) == 0) {
		memcpy(out, t->key, SHA256_LEN);
		return 0;
	}
	if ((r = str_printf(ks, sizeof(ks), "AWS4%s", secret)) < 0)
		return r;
	if ((r = hmac(t, ks, strlen(ks), date, strlen(date), k1)) < 0 ||
	    (r = hmac(t, k1, SHA256_LEN, region, strlen(region), k2)) < 0 ||
	    (r = hmac(t, k2, SHA256_LEN, service, strlen(service), k1)) < 0 ||
	    (r = hmac(t, k1, SHA256_LEN, "aws4_request", 12, out)) < 0)
		goto out;
	t->valid = str_copy(t->date, sizeof(t->date), date) >= 0 &&
		   str_copy(t->region, sizeof(t->region), region) >= 0 &&
		   str_copy(t->service, sizeof(t->service), service) >= 0;
	memcpy(t->secret_hash, sh, sizeof(sh));
	memcpy(t->key, out, SHA256_LEN);
out:
	secret_wipe(ks, sizeof(ks));
	secret_wipe(k1, sizeof(k1));
	secret_wipe(k2, sizeof(k2));
	return r;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Appends the percent-decoded then strictly re-encoded form of s[0..len). */
static int put_reencoded(struct buf *b, const char *s, size_t len)
{
	char tmp[256];
	size_t t = 0;
	int r;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		int h, l;
		if (c == '%' && i + 2 < len && (h = hexval((unsigned char)s[i + 1])) >= 0 &&
		    (l = hexval((unsigned char)s[i + 2])) >= 0) {
			c = (char)(h << 4 | l);
			i += 2;
		}
		tmp[t++] = c;
		if (t == sizeof(tmp)) {
			if ((r = buf_put_urlencoded(b, tmp, t, false)) < 0)
				return r;
			t = 0;
		}
	}
	return buf_put_urlencoded(b, tmp, t, false);
}

/* Canonical URI: dot segments removed, empty segments dropped (as AWS's services and botocore
 * do), a leading '/' always and a trailing one kept, then every byte but the unreserved ones
 * and '/' percent-encoded. */
static int canonical_uri(struct buf *out, const char *path)
{
	const char *segs[256];
	size_t lens[256], n = 0, plen;
	const char *p = path;
	int r;

	if (!path || !*path)
		return buf_putc(out, '/');
	plen = strlen(path);
	while (*p) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == 0 || (l == 1 && p[0] == '.')) {
			/* skip */
		} else if (l == 2 && p[0] == '.' && p[1] == '.') {
			if (n > 0)
				n--;
		} else {
			if (n == ARRAY_SIZE(segs))
				return -E2BIG;
			segs[n] = p;
			lens[n] = l;
			n++;
		}
		if (!e)
			break;
		p = e + 1;
	}
	if (path[0] == '/' && (r = buf_putc(out, '/')) < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && (r = buf_putc(out, '/')) < 0)
			return r;
		if ((r = buf_put_urlencoded(out, segs[i], lens[i], false)) < 0)
			return r;
	}
	if (n > 0 && path[plen - 1] == '/' && (r = buf_putc(out, '/')) < 0)
		return r;
	if (out->len == 0)
		return buf_putc(out, '/');
	return 0;
}

struct qpair {
	char *key;
	char *value;
};

static int qpair_cmp(const void *a, const void *b)
{
	const struct qpair *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : strcmp(x->value, y->value);
}

static int canonical_query(struct buf *out, const char *query)
{
	struct qpair *pairs = NULL;
	size_t n = 0, cap = 0;
	const char *p = query;
	int r = 0;

	if (!query || !*query)
		return 0;
	for (;;) {
		const char *e = strchr(p, '&');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		const char *eq = memchr(p, '=', l);
		size_t kl = eq ? (size_t)(eq - p) : l;
		struct buf k = BUF_INIT(0), v = BUF_INIT(0);

		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct qpair *np;
			if (ncap > 100000) {
				r = -E2BIG;
				goto out;
			}
			np = realloc(pairs, ncap * sizeof(*np));
			if (!np) {
				r = -ENOMEM;
				goto out;
			}
			pairs = np;
			cap = ncap;
		}
		if ((r = buf_puts(&k, "")) < 0 || (r = buf_puts(&v, "")) < 0 ||
		    (r = put_reencoded(&k, p, kl)) < 0 ||
		    (eq && (r = put_reencoded(&v, eq + 1, l - kl - 1)) < 0)) {
			buf_release(&k);
			buf_release(&v);
			goto out;
		}
		pairs[n].key = buf_steal(&k);
		pairs[n].value = buf_steal(&v);
		n++;
		if (!e)
			break;
		p = e + 1;
	}
	qsort(pairs, n, sizeof(*pairs), qpair_cmp);
	for (size_t i = 0; i < n && r >= 0; i++) {
		if (i > 0)
			r = buf_putc(out, '&');
		if (r >= 0)
			r = buf_printf(out, "%s=%s", pairs[i].key, pairs[i].value);
	}
out:
	for (size_t i = 0; i < n; i++) {
		free(pairs[i].key);
		free(pairs[i].value);
	}
	free(pairs);
	return r;
}

struct hdr {
	char name[128];
	const char *value;
	size_t order;
};

static int hdr_cmp(const void *a, const void *b)
{
	const struct hdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static bool in_list(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/* Appends a header value trimmed, with inner runs of white space turned into one space. */
static int put_trimall(struct buf *b, const char *v)
{
	bool pending_space = false, started = false;
	int r;

	for (; *v; v++) {
		if (isspace((unsigned char)*v)) {
			pending_space = started;
			continue;
		}
		if (pending_space && (r = buf_putc(b, ' ')) < 0)
			return r;
		pending_space = false;
		started = true;
		if ((r = buf_putc(b, *v)) < 0)
			return r;
	}
	return 0;
}

/* Writes the canonical headers block (each "name:value\n") and the signed-headers list. */
static int canonical_headers(const struct sigv4_input *in, const char *amz_date, const char *token,
			     struct buf *out, struct buf *signed_list)
{
	struct hdr h[SIGV4_MAX_HEADERS + 3];
	size_t n = 0;
	int r;

	for (size_t i = 0; i < in->n_headers; i++) {
		const char *name = in->headers[i].name;
		size_t l = name ? strlen(name) : 0;
		if (l == 0 || l >= sizeof(h[0].name) || !in->headers[i].value)
			return -EINVAL;
		if (n == SIGV4_MAX_HEADERS)
			return -E2BIG;
		for (size_t j = 0; j <= l; j++)
			h[n].name[j] = (char)tolower((unsigned char)name[j]);
		if (in_list(h[n].name, owned_headers, ARRAY_SIZE(owned_headers)))
			return -EINVAL;
		if (in_list(h[n].name, unsigned_headers, ARRAY_SIZE(unsigned_headers)))
			continue;
		h[n].value = in->headers[i].value;
		h[n].order = n;
		n++;
	}
	str_copy(h[n].name, sizeof(h[n].name), "host");
	h[n].value = in->host;
	h[n].order = n;
	n++;
	str_copy(h[n].name, sizeof(h[n].name), "x-amz-date");
	h[n].value = amz_date;
	h[n].order = n;
	n++;
	if (token) {
		str_copy(h[n].name, sizeof(h[n].name), "x-amz-security-token");
		h[n].value = token;
		h[n].order = n;
		n++;
	}
	qsort(h, n, sizeof(h[0]), hdr_cmp);
	for (size_t i = 0; i < n; i++) {
		bool same = i > 0 && strcmp(h[i].name, h[i - 1].name) == 0;
		if (same) {
			r = buf_putc(out, ',');
		} else {
			if (i > 0 && (r = buf_putc(out, '\n')) < 0)
				return r;
			if (i > 0 && (r = buf_putc(signed_list, ';')) < 0)
				return r;
			if ((r = buf_puts(signed_list, h[i].name)) < 0)
				return r;
			r = buf_printf(out, "%s:", h[i].name);
		}
		if (r < 0 || (r = put_trimall(out, h[i].value)) < 0)
			return r;
	}
	return buf_putc(out, '\n');
}

int sigv4_sign_ex(const struct sigv4_input *in, const struct aws_credentials *cr,
		  struct sigv4_output *out, struct buf *ret_canonical,
		  struct buf *ret_string_to_sign)
{
	struct buf creq = BUF_INIT(0), sts = BUF_INIT(0), signed_list = BUF_INIT(0);
	char date[9], creq_hash[65], sig[65];
	struct sigv4_tls *t = tls_get();
	unsigned char k[SHA256_LEN], k2[SHA256_LEN];
	const char *token;
	struct tm tm;
	time_t secs;
	int r;

	if (!in || !cr || !out || !in->method || !*in->method || !in->host || !*in->host ||
	    !in->region || !*in->region || !in->service || !*in->service || !cr->access_key_id ||
	    !*cr->access_key_id || !cr->secret_access_key || (in->body_len && !in->body))
		return -EINVAL;
	if (!t)
		return -ENOMEM;
	token = cr->session_token && *cr->session_token ? cr->session_token : NULL;

	secs = (time_t)(in->time_ns / 1000000000LL);
	if (!gmtime_r(&secs, &tm) ||
	    strftime(out->amz_date, sizeof(out->amz_date), "%Y%m%dT%H%M%SZ", &tm) != 16)
		return -EINVAL;
	memcpy(date, out->amz_date, 8);
	date[8] = 0;
	if ((r = sha256_hex(t, in->body ? in->body : "", in->body_len, out->payload_hash)) < 0)
		return r;

	/* The canonical request. */
	if ((r = buf_printf(&creq, "%s\n", in->method)) < 0 ||
	    (r = canonical_uri(&creq, in->path)) < 0 || (r = buf_putc(&creq, '\n')) < 0 ||
	    (r = canonical_query(&creq, in->query)) < 0 || (r = buf_putc(&creq, '\n')) < 0 ||
	    (r = canonical_headers(in, out->amz_date, token, &creq, &signed_list)) < 0 ||
	    (r = buf_printf(&creq, "\n%s\n%s", signed_list.data, out->payload_hash)) < 0)
		goto out;
	if ((r = sha256_hex(t, creq.data, creq.len, creq_hash)) < 0)
		goto out;

	/* The string to sign and the signature. */
	if ((r = buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", out->amz_date,
			    date, in->region, in->service, creq_hash)) < 0)
		goto out;
	if ((r = signing_key(t, cr->secret_access_key, date, in->region, in->service, k2)) < 0 ||
	    (r = hmac(t, k2, SHA256_LEN, sts.data, sts.len, k)) < 0)
		goto out;
	hex_encode(k, SHA256_LEN, sig);

	r = str_printf(out->authorization, sizeof(out->authorization),
		       "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
		       "Signature=%s",
		       cr->access_key_id, date, in->region, in->service, signed_list.data, sig);
	if (r < 0)
		goto out;
	out->n_headers = 0;
	out->headers[out->n_headers++] = (struct http_header){"X-Amz-Date", out->amz_date};
	if (token)
		out->headers[out->n_headers++] =
		    (struct http_header){"X-Amz-Security-Token", token};
	out->headers[out->n_headers++] = (struct http_header){"Authorization", out->authorization};
	if (ret_canonical) {
		buf_release(ret_canonical);
		*ret_canonical = creq;
		creq = (struct buf)BUF_INIT(0);
	}
	if (ret_string_to_sign) {
		buf_release(ret_string_to_sign);
		*ret_string_to_sign = sts;
		sts = (struct buf)BUF_INIT(0);
	}
	r = 0;
out:
	secret_wipe(k, sizeof(k));
	secret_wipe(k2, sizeof(k2));
	buf_release(&creq);
	buf_release(&sts);
	buf_release(&signed_list);
	return r;
}

int sigv4_sign(const struct sigv4_input *in, const struct aws_credentials *cr,
	       struct sigv4_output *out)
{
	return sigv4_sign_ex(in, cr, out, NULL, NULL);
}

int sigv4_host_from_url(const char *url, char *host, size_t n, const char **ret_rest)
{
	const char *p, *auth_end, *at, *hs, *he, *port = NULL;
	bool https;
	size_t o = 0;

	if (!url || !host || n == 0)
		return -EINVAL;
	if (strncasecmp(url, "https://", 8) == 0) {
		https = true;
		p = url + 8;
	} else if (strncasecmp(url, "http://", 7) == 0) {
		https = false;
		p = url + 7;
	} else {
		return -EINVAL;
	}
	auth_end = p + strcspn(p, "/?#");
	at = memrchr(p, '@', (size_t)(auth_end - p));
	hs = at ? at + 1 : p;
	if (*hs == '[') {
		he = memchr(hs, ']', (size_t)(auth_end - hs));
		if (!he)
			return -EINVAL;
		he++;
	} else {
		he = hs + strcspn(hs, ":/?#");
		if (he > auth_end)
			he = auth_end;
	}
	if (he == hs)
		return -EINVAL;
	if (he < auth_end && *he == ':')
		port = he + 1;
	if ((size_t)(he - hs) + 8 > n)
		return -ENAMETOOLONG;
	for (const char *c = hs; c < he; c++)
		host[o++] = (char)tolower((unsigned char)*c);
	if (port && port < auth_end) {
		size_t pl = (size_t)(auth_end - port);
		bool dflt = (https && pl == 3 && memcmp(port, "443", 3) == 0) ||
			    (!https && pl == 2 && memcmp(port, "80", 2) == 0);
		if (pl > 5)
			return -EINVAL;
		for (size_t i = 0; i < pl; i++)
			if (!isdigit((unsigned char)port[i]))
				return -EINVAL;
		if (!dflt) {
			host[o++] = ':';
			memcpy(host + o, port, pl);
			o += pl;
		}
	}
	host[o] = 0;
	if (ret_rest)
		*ret_rest = *auth_end ? auth_end : "/";
	return 0;
}
