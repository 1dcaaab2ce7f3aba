/* Reading and checking certificates (x509.h): PEM in and out, bundles, names, validity, the
 * issuer's signature, the key. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <time.h>

#include "common/base/buf.h"
#include "common/x509/internal.h"

int x509_cert_wrap(X509 *x, struct x509_cert **ret, char *err, size_t errlen)
{
	struct x509_cert *c = malloc(sizeof(*c));

	if (!c) {
		X509_free(x);
		return x509_err(-ENOMEM, err, errlen, "out of memory");
	}
	c->x = x;
	*ret = c;
	return 0;
}

const char *x509_cn_of(X509 *x, char *buf, size_t n)
{
	buf[0] = '\0';
	if (X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf, (int)n) < 0)
		buf[0] = '\0';
	ERR_clear_error();
	return buf;
}

void x509_cert_free(struct x509_cert *c)
{
	if (!c)
		return;
	X509_free(c->x);
	free(c);
}

void x509_certs_free(struct x509_cert **v)
{
	for (size_t i = 0; v && v[i]; i++)
		x509_cert_free(v[i]);
	free(v);
}

static void *read_cert(BIO *b, void *ud)
{
	return PEM_read_bio_X509(b, NULL, NULL, NULL);
}

int x509_cert_from_pem(const char *pem, struct x509_cert **ret, char *err, size_t errlen)
{
	void *x;
	int r = x509_from_pem(pem, "certificate", read_cert, NULL, &x, err, errlen);

	return r < 0 ? r : x509_cert_wrap(x, ret, err, errlen);
}

int x509_cert_from_der(const void *der, size_t len, struct x509_cert **ret, char *err,
		       size_t errlen)
{
	const unsigned char *p = der;
	X509 *x;

	if (!der || len == 0 || len > X509_PEM_MAX)
		return x509_err(-EBADMSG, err, errlen, "the certificate is empty or too long");
	if (!(x = d2i_X509(NULL, &p, (long)len)) || p != (const unsigned char *)der + len) {
		X509_free(x);
		return x509_fail(-EBADMSG, err, errlen, "cannot read the certificate");
	}
	ERR_clear_error();
	return x509_cert_wrap(x, ret, err, errlen);
}

/* Appends x (taken) to the vector *v of n certificates. */
static int certs_push(struct x509_cert ***v, size_t n, X509 *x, char *err, size_t errlen)
{
	struct x509_cert **nv;

	if (n == X509_BUNDLE_MAX) {
		X509_free(x);
		return x509_err(-E2BIG, err, errlen, "the bundle holds more than %d certificates",
				X509_BUNDLE_MAX);
	}
	if (!(nv = realloc(*v, (n + 2) * sizeof(*nv)))) {
		X509_free(x);
		return x509_err(-ENOMEM, err, errlen, "out of memory");
	}
	nv[n + 1] = NULL;
	*v = nv;
	return x509_cert_wrap(x, &nv[n], err, errlen);
}

/* After the last certificate of a bundle: true when the text just has no more of them. */
static bool bundle_ended(size_t n)
{
	unsigned long e = ERR_peek_last_error();

	if (n == 0 || ERR_GET_LIB(e) != ERR_LIB_PEM || ERR_GET_REASON(e) != PEM_R_NO_START_LINE)
		return false;
	ERR_clear_error();
	return true;
}

int x509_certs_from_pem(const char *pem, struct x509_cert ***ret, char *err, size_t errlen)
{
	_cleanup_x509_certs_ struct x509_cert **v = NULL;
	BIO *b = NULL;
	X509 *x;
	size_t n = 0;
	int r = x509_pem_bio(pem, "certificate", &b, err, errlen);

	while (r >= 0 && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
		r = certs_push(&v, n++, x, err, errlen);
	if (r >= 0 && !bundle_ended(n))
		r = x509_pem_fail("certificate", err, errlen);
	BIO_free(b);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(v);
	return 0;
}

static int write_cert(BIO *b, const void *x)
{
	return PEM_write_bio_X509(b, x);
}

int x509_cert_to_pem(const struct x509_cert *c, char **ret, char *err, size_t errlen)
{
	return x509_to_pem(write_cert, c->x, false, "certificate", ret, err, errlen);
}

int x509_cert_names(const struct x509_cert *c, struct x509_names *ret, char *err, size_t errlen)
{
	return x509_names_read(X509_get_subject_name(c->x), X509_get0_extensions(c->x), ret, err,
			       errlen);
}

static int time_of(const ASN1_TIME *t, int64_t *ret)
{
	struct tm tm;

	if (!t || !ASN1_TIME_to_tm(t, &tm))
		return -EBADMSG;
	*ret = (int64_t)timegm(&tm);
	return 0;
}

int x509_cert_validity(const struct x509_cert *c, int64_t *ret_not_before, int64_t *ret_not_after,
		       char *err, size_t errlen)
{
	int64_t nb, na;

	if (time_of(X509_get0_notBefore(c->x), &nb) < 0 ||
	    time_of(X509_get0_notAfter(c->x), &na) < 0)
		return x509_fail(-EBADMSG, err, errlen, "cannot read the certificate's validity");
	if (ret_not_before)
		*ret_not_before = nb;
	if (ret_not_after)
		*ret_not_after = na;
	return 0;
}

bool x509_cert_is_ca(const struct x509_cert *c)
{
	return c && (X509_get_extension_flags(c->x) & EXFLAG_CA) != 0;
}

int x509_cert_check_time(const struct x509_cert *c, int64_t now, int64_t within_s)
{
	int64_t nb, na;
	int r = x509_cert_validity(c, &nb, &na, NULL, 0);

	if (r < 0)
		return r;
	if (now <= 0)
		now = (int64_t)time(NULL);
	if (now < nb)
		return X509_TIME_NOT_YET_VALID;
	if (now > na)
		return X509_TIME_EXPIRED;
	return na - now < within_s ? X509_TIME_EXPIRES_SOON : X509_TIME_VALID;
}

const char *x509_time_name(int t)
{
	static const char *const names[] = {"valid", "expires soon", "expired", "not yet valid"};

	return t >= 0 && t < (int)ARRAY_SIZE(names) ? names[t] : "invalid";
}

int x509_cert_verify_signed_by(const struct x509_cert *c, const struct x509_cert *ca, char *err,
			       size_t errlen)
{
	char cn[X509_NAME_MAX + 1], ca_cn[X509_NAME_MAX + 1];
	EVP_PKEY *pk;
	int v = X509_check_issued(ca->x, c->x);

	x509_cn_of(c->x, cn, sizeof(cn));
	x509_cn_of(ca->x, ca_cn, sizeof(ca_cn));
	if (v != X509_V_OK)
		return x509_err(-EKEYREJECTED, err, errlen, "'%s' was not issued by '%s': %s", cn,
				ca_cn, X509_verify_cert_error_string(v));
	if (!(pk = X509_get0_pubkey(ca->x)) || X509_verify(c->x, pk) != 1)
		return x509_fail(-EKEYREJECTED, err, errlen,
				 "'%s' was not issued by '%s': its signature does not verify with "
				 "the CA's key",
				 cn, ca_cn);
	return 0;
}

int x509_cert_key_match(const struct x509_cert *c, const struct x509_key *key, char *err,
			size_t errlen)
{
	char cn[X509_NAME_MAX + 1];
	EVP_PKEY *pk = X509_get0_pubkey(c->x);
	bool same = key && pk && EVP_PKEY_eq(pk, key->pkey) == 1;

	ERR_clear_error();
	if (!same)
		return x509_err(-EKEYREJECTED, err, errlen,
				"the key does not match the certificate '%s'",
				x509_cn_of(c->x, cn, sizeof(cn)));
	return 0;
}
