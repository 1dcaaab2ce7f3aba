/* The TLS serving context (tls.h, tls_internal.h): Go's version and cipher-suite names mapped
 * onto OpenSSL, the certificate, key and client CAs loaded from text or files, the context
 * rebuilt when the files change, and the identity of a verified client certificate. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "common/base/log.h"
#include "common/base/secret.h"
#include "common/base/timeutil.h"
#include "common/http/tls_internal.h"

#define DEFAULT_HANDSHAKE_TIMEOUT_NS (10 * NSEC_PER_SEC)
#define DEFAULT_RELOAD_CHECK_NS NSEC_PER_SEC
#define CIPHERS_MAX 2048

/* Every suite Go's crypto/tls implements for TLS 1.0 to 1.2 (tls.CipherSuites() and
 * tls.InsecureCipherSuites(), as Kubernetes' --tls-cipher-suites accepts them), with OpenSSL's
 * name; dflt marks Go's default list (ECDHE with AEAD or CBC-SHA1). */
static const struct suite {
	const char *go, *ossl;
	bool dflt;
} suites[] = {
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256", true},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256", true},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384", true},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384", true},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305", true},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305", true},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305", false},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305", false},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA", true},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA", true},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA", true},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA", true},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256", false},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256", false},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256", false},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384", false},
    {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA", false},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA", false},
    {"TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256", false},
    {"TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA-DES-CBC3-SHA", false},
    {"TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA", false},
    {"TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "ECDHE-ECDSA-RC4-SHA", false},
    {"TLS_ECDHE_RSA_WITH_RC4_128_SHA", "ECDHE-RSA-RC4-SHA", false},
    {"TLS_RSA_WITH_RC4_128_SHA", "RC4-SHA", false},
    /* TLS 1.3: accepted, always on (Go does not configure them) */
    {"TLS_AES_128_GCM_SHA256", NULL, false},
    {"TLS_AES_256_GCM_SHA384", NULL, false},
    {"TLS_CHACHA20_POLY1305_SHA256", NULL, false},
};

static const struct {
	const char *name;
	int version;
} versions[] = {
    {"VersionTLS10", TLS1_VERSION},
    {"VersionTLS11", TLS1_1_VERSION},
    {"VersionTLS12", TLS1_2_VERSION},
    {"VersionTLS13", TLS1_3_VERSION},
};

enum { F_CERT, F_KEY, F_CA, F_N };

struct stamp {
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_ns;
};

struct tls_src {
	pthread_mutex_t lock;
	SSL_CTX *ctx;
	char *cert_pem, *key_pem, *ca_pem; /* text given; key_pem is a secret */
	char *files[F_N];		   /* or files, checked for changes */
	struct stamp stamps[F_N];
	enum http_tls_client_auth client_auth;
	int min_version;
	char *ciphers; /* OpenSSL's list for TLS <= 1.2; "" for none */
	int64_t handshake_ns, reload_ns, next_check;
};

static int parse_version(const char *name, int *ret, char *err, size_t errlen)
{
	if (!name || !*name) {
		*ret = TLS1_2_VERSION;
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
		if (strcmp(name, versions[i].name) == 0) {
			*ret = versions[i].version;
			return 0;
		}
	snprintf(err, errlen, "unknown TLS version '%s' (VersionTLS10 to VersionTLS13)", name);
	return -EINVAL;
}

/* OpenSSL's list for Go's comma-separated names in out ("" when only TLS 1.3 names are given).
 * OpenSSL skips a suite it lacks (RC4); a list of nothing else fails when the context is made. */
static int parse_suites(const char *list, struct buf *out, char *err, size_t errlen)
{
	_cleanup_strv_ char **names = NULL;
	int r = 0;

	if (!list || !*list) {
		for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(suites); i++)
			if (suites[i].dflt)
				r = buf_printf(out, "%s%s", out->len ? ":" : "", suites[i].ossl);
		return r;
	}
	if ((r = strv_split(list, ',', &names)) < 0)
		return r;
	for (size_t i = 0; r >= 0 && names && names[i]; i++) {
		const struct suite *s = NULL;
		for (size_t j = 0; j < ARRAY_SIZE(suites) && !s; j++)
			if (strcmp(names[i], suites[j].go) == 0)
				s = &suites[j];
		if (!s) {
			snprintf(err, errlen, "cipher suite '%s' not supported or doesn't exist",
				 names[i]);
			return -EINVAL;
		}
		if (s->ossl)
			r = buf_printf(out, "%s%s", out->len ? ":" : "", s->ossl);
	}
	return r;
}

int http_tls_check(const struct http_tls *t, char *err, size_t errlen)
{
	struct buf b;
	int v, r;

	buf_init(&b, CIPHERS_MAX);
	r = parse_version(t->min_version, &v, err, errlen);
	if (r >= 0)
		r = parse_suites(t->cipher_suites, &b, err, errlen);
	buf_release(&b);
	return r;
}

/* A failure of OpenSSL: what, and its last reason, in err. */
static int ssl_fail(int r, char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_peek_last_error();
	const char *why = e ? ERR_reason_error_string(e) : NULL;

	snprintf(err, errlen, "%s%s%s", what, why ? ": " : "", why ? why : "");
	ERR_clear_error();
	return r;
}

static int load_chain(SSL_CTX *ctx, const char *pem, char *err, size_t errlen)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x;
	int r = 0;

	if (!b)
		return -ENOMEM;
	x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	if (!x || SSL_CTX_use_certificate(ctx, x) != 1)
		r = ssl_fail(-EBADMSG, err, errlen, "cannot read the serving certificate");
	X509_free(x);
	/* the rest of the chain, to send with it */
	while (r >= 0 && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
		if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
			X509_free(x);
			r = ssl_fail(-ENOMEM, err, errlen, "cannot add a chain certificate");
		}
	ERR_clear_error(); /* the end of the text */
	BIO_free(b);
	return r;
}

static int load_key(SSL_CTX *ctx, const char *pem, char *err, size_t errlen)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *k;
	int r = 0;

	if (!b)
		return -ENOMEM;
	k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
	if (!k)
		r = ssl_fail(-EBADMSG, err, errlen, "cannot read the private key");
	else if (SSL_CTX_use_PrivateKey(ctx, k) != 1 || SSL_CTX_check_private_key(ctx) != 1)
		r = ssl_fail(-EKEYREJECTED, err, errlen,
			     "the private key does not match the serving certificate");
	EVP_PKEY_free(k);
	BIO_free(b);
	return r;
}

static int load_client_cas(SSL_CTX *ctx, const char *pem, char *err, size_t errlen)
{
	STACK_OF(X509_NAME) *names = sk_X509_NAME_new_null();
	X509_STORE *st = SSL_CTX_get_cert_store(ctx);
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x;
	int r = 0;

	if (!b || !names) {
		BIO_free(b);
		sk_X509_NAME_free(names);
		return -ENOMEM;
	}
	while (r >= 0 && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
		X509_NAME *n = X509_NAME_dup(X509_get_subject_name(x));
		if (!n || X509_STORE_add_cert(st, x) != 1 || !sk_X509_NAME_push(names, n)) {
			X509_NAME_free(n);
			r = ssl_fail(-ENOMEM, err, errlen, "cannot add a client CA");
		}
		X509_free(x);
	}
	ERR_clear_error();
	BIO_free(b);
	if (r >= 0 && sk_X509_NAME_num(names) == 0) {
		snprintf(err, errlen, "no certificate in the client CA bundle");
		r = -EBADMSG;
	}
	if (r < 0)
		sk_X509_NAME_pop_free(names, X509_NAME_free);
	else
		SSL_CTX_set_client_CA_list(ctx, names);
	return r;
}

/* REQUEST mode: the handshake goes on whatever the chain; the result is read afterwards. */
static int verify_later(int ok, X509_STORE_CTX *x)
{
	return 1;
}

/* HTTP/1.1 when the client offers it; nothing else is served. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned inlen, void *ud)
{
	for (unsigned i = 0; i < inlen; i += 1u + in[i])
		if (in[i] == 8 && i + 9 <= inlen && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
	return SSL_TLSEXT_ERR_NOACK;
}

static int ctx_build(const struct tls_src *s, const char *cert, const char *key, const char *ca,
		     SSL_CTX **ret, char *err, size_t errlen)
{
	static const unsigned char sid[] = "aws-k8s";
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	int r = 0, min = s->min_version;

	if (!ctx)
		return ssl_fail(-ENOMEM, err, errlen, "cannot make a TLS context");
	/* suites for TLS <= 1.2 that leave none: TLS 1.3 only, as Go ends up */
	if (!*s->ciphers)
		min = TLS1_3_VERSION;
	/* OpenSSL 3 refuses TLS 1.0 and 1.1 above security level 0: asked for, they are allowed */
	if (min < TLS1_2_VERSION)
		SSL_CTX_set_security_level(ctx, 0);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
				     SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
				  SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (SSL_CTX_set_min_proto_version(ctx, min) != 1 ||
	    (*s->ciphers && SSL_CTX_set_cipher_list(ctx, s->ciphers) != 1))
		r = ssl_fail(-EINVAL, err, errlen, "cannot set the TLS version or cipher suites");
	if (r >= 0)
		r = load_chain(ctx, cert, err, errlen);
	if (r >= 0)
		r = load_key(ctx, key, err, errlen);
	if (r >= 0 && ca) {
		r = load_client_cas(ctx, ca, err, errlen);
		if (s->client_auth == HTTP_TLS_CLIENT_REQUIRE)
			SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
					   NULL);
		else
			SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_later);
	}
	if (r < 0) {
		SSL_CTX_free(ctx);
		return r;
	}
	*ret = ctx;
	return 0;
}

static void stamp_of(const char *path, struct stamp *st)
{
	struct stat sb;

	memset(st, 0, sizeof(*st));
	if (path && stat(path, &sb) == 0)
		*st = (struct stamp){sb.st_dev, sb.st_ino, sb.st_size,
				     sb.st_mtim.tv_sec * NSEC_PER_SEC + sb.st_mtim.tv_nsec};
}

/* Builds a context from the text, or from the files read now. */
static int src_load(struct tls_src *s, SSL_CTX **ret, char *err, size_t errlen)
{
	char *text[F_N] = {NULL, NULL, NULL};
	int r = 0;

	for (int i = 0; i < F_N; i++) {
		stamp_of(s->files[i], &s->stamps[i]);
		if (r >= 0 && s->files[i] &&
		    (r = file_read_all(s->files[i], X509_PEM_MAX, &text[i], NULL)) < 0)
			snprintf(err, errlen, "cannot read '%s': %s", s->files[i], strerror(-r));
	}
	if (r >= 0)
		r = ctx_build(s, s->files[F_CERT] ? text[F_CERT] : s->cert_pem,
			      s->files[F_KEY] ? text[F_KEY] : s->key_pem,
			      s->files[F_CA] ? text[F_CA] : s->ca_pem, ret, err, errlen);
	free(text[F_CERT]);
	secret_free(text[F_KEY]);
	free(text[F_CA]);
	return r;
}

void tls_src_free(struct tls_src *s)
{
	if (!s)
		return;
	SSL_CTX_free(s->ctx);
	free(s->cert_pem);
	secret_free(s->key_pem);
	free(s->ca_pem);
	for (int i = 0; i < F_N; i++)
		free(s->files[i]);
	free(s->ciphers);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int dup_opt(const char *v, char **ret)
{
	if (v && *v && !(*ret = strdup(v)))
		return -ENOMEM;
	return 0;
}

int tls_src_new(const struct http_tls *cfg, struct tls_src **ret, char *err, size_t errlen)
{
	struct tls_src *s = calloc(1, sizeof(*s));
	struct buf ciphers;
	int r;

	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	s->client_auth = cfg->client_auth;
	s->handshake_ns = cfg->handshake_timeout_ns > 0 ? cfg->handshake_timeout_ns
							: DEFAULT_HANDSHAKE_TIMEOUT_NS;
	s->reload_ns = cfg->reload_check_ns > 0 ? cfg->reload_check_ns : DEFAULT_RELOAD_CHECK_NS;
	buf_init(&ciphers, CIPHERS_MAX);
	r = parse_version(cfg->min_version, &s->min_version, err, errlen);
	if (r >= 0 && (r = parse_suites(cfg->cipher_suites, &ciphers, err, errlen)) >= 0)
		r = (s->ciphers = strdup(ciphers.data ? ciphers.data : "")) ? 0 : -ENOMEM;
	buf_release(&ciphers);
	if (r >= 0 && ((r = dup_opt(cfg->cert_pem, &s->cert_pem)) < 0 ||
		       (r = dup_opt(cfg->key_pem, &s->key_pem)) < 0 ||
		       (r = dup_opt(cfg->client_ca_pem, &s->ca_pem)) < 0 ||
		       (r = dup_opt(cfg->cert_file, &s->files[F_CERT])) < 0 ||
		       (r = dup_opt(cfg->key_file, &s->files[F_KEY])) < 0 ||
		       (r = dup_opt(cfg->client_ca_file, &s->files[F_CA])) < 0))
		snprintf(err, errlen, "out of memory");
	if (r >= 0 && (!(s->cert_pem || s->files[F_CERT]) || !(s->key_pem || s->files[F_KEY]))) {
		snprintf(err, errlen, "a serving certificate needs its key, and the reverse");
		r = -EINVAL;
	}
	if (r >= 0)
		r = src_load(s, &s->ctx, err, errlen);
	if (r < 0) {
		tls_src_free(s);
		return r;
	}
	s->next_check = now_mono_ns() + s->reload_ns;
	*ret = s;
	return 0;
}

static bool files_changed(struct tls_src *s)
{
	bool changed = false;

	for (int i = 0; i < F_N; i++) {
		struct stamp now;
		if (!s->files[i])
			continue;
		stamp_of(s->files[i], &now);
		changed |= memcmp(&now, &s->stamps[i], sizeof(now)) != 0;
	}
	return changed;
}

/* Under the lock: a new context when a file changed; the old one stays when it fails. */
static void src_maybe_reload(struct tls_src *s)
{
	char err[256] = "";
	SSL_CTX *ctx;
	int64_t now = now_mono_ns();

	if (now < s->next_check)
		return;
	s->next_check = now + s->reload_ns;
	if (!files_changed(s))
		return;
	int r = src_load(s, &ctx, err, sizeof(err));
	if (r < 0) {
		log_error("cannot reload the serving certificate; the previous one stays in use",
			  KV_S("certFile", s->files[F_CERT]), KV_S("error", err), KV_E(r));
		return;
	}
	SSL_CTX_free(s->ctx);
	s->ctx = ctx;
	log_info("reloaded the serving certificate", KV_S("certFile", s->files[F_CERT]),
		 KV_S("clientCAFile", s->files[F_CA]));
}

SSL *tls_src_ssl(struct tls_src *s, int fd)
{
	SSL *ssl;

	pthread_mutex_lock(&s->lock);
	if (s->files[F_CERT] || s->files[F_KEY] || s->files[F_CA])
		src_maybe_reload(s);
	ssl = SSL_new(s->ctx);
	pthread_mutex_unlock(&s->lock);
	if (ssl && SSL_set_fd(ssl, fd) != 1) {
		SSL_free(ssl);
		ssl = NULL;
	}
	if (ssl)
		SSL_set_accept_state(ssl);
	ERR_clear_error();
	return ssl;
}

int64_t tls_src_handshake_timeout(const struct tls_src *s)
{
	return s->handshake_ns;
}

struct tls_peer *tls_peer_ref(struct tls_peer *p)
{
	if (p)
		atomic_fetch_add(&p->refs, 1);
	return p;
}

void tls_peer_unref(struct tls_peer *p)
{
	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	x509_names_release(&p->names);
	free(p);
}

int tls_peer_from_ssl(SSL *ssl, struct tls_peer **ret, char *err, size_t errlen)
{
	static const char *const none[] = {NULL};
	X509 *x = SSL_get0_peer_certificate(ssl);
	_cleanup_x509_cert_ struct x509_cert *c = NULL;
	unsigned char *der = NULL;
	struct tls_peer *p;
	long v;
	int n, r;

	*ret = NULL;
	if (!x)
		return 0;
	if ((v = SSL_get_verify_result(ssl)) != X509_V_OK) {
		snprintf(err, errlen, "the client certificate does not verify: %s",
			 X509_verify_cert_error_string(v));
		return -EACCES;
	}
	if ((n = i2d_X509(x, &der)) <= 0)
		return ssl_fail(-ENOMEM, err, errlen, "cannot encode the client certificate");
	r = x509_cert_from_der(der, (size_t)n, &c, err, errlen);
	OPENSSL_free(der);
	if (r < 0)
		return r;
	if (!(p = calloc(1, sizeof(*p))))
		return -ENOMEM;
	if ((r = x509_cert_names(c, &p->names, err, errlen)) < 0 || !p->names.cn) {
		if (r >= 0)
			snprintf(err, errlen, "the client certificate has no common name");
		x509_names_release(&p->names);
		free(p);
		return r < 0 ? r : -EACCES;
	}
	atomic_init(&p->refs, 1);
	p->cert.cn = p->names.cn;
	p->cert.orgs = p->names.orgs ? (const char *const *)p->names.orgs : none;
	*ret = p;
	return 0;
}
