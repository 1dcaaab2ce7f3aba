/* Making certificates (x509.h): self-signed or signed by a CA, from a struct x509_spec. */
#include <errno.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <time.h>

#include "common/base/buf.h"
#include "common/x509/internal.h"

/* Beyond this a not-after may not fit in a GeneralizedTime; no certificate needs that long. */
#define DURATION_MAX (200 * X509_YEAR)

static int spec_check(const struct x509_spec *s, char *err, size_t errlen)
{
	if (!s)
		return x509_err(-EINVAL, err, errlen, "the certificate's spec is missing");
	if (s->duration_s <= 0 || s->duration_s > DURATION_MAX)
		return x509_err(-EINVAL, err, errlen,
				"the validity of %lld s is out of range (1 s to 200 years)",
				(long long)s->duration_s);
	if (s->usages & ~(unsigned)(X509_USAGE_SERVER | X509_USAGE_CLIENT))
		return x509_err(-EINVAL, err, errlen, "unknown usage bits 0x%x", s->usages);
	if (!s->ca && !s->usages)
		return x509_err(-EINVAL, err, errlen,
				"a leaf certificate needs a usage (server, client or both)");
	return x509_names_check(s, err, errlen);
}

/* A random positive 128-bit serial. */
static int serial_set(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn = NULL;
	int ok;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return -EIO;
	ok = (bn = BN_bin2bn(b, sizeof(b), NULL)) &&
	     BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
	BN_free(bn);
	return ok ? 0 : -ENOMEM;
}

static int validity_set(X509 *x, const struct x509_spec *s)
{
	int64_t start = s->start ? s->start : (int64_t)time(NULL);

	int64_t back = s->backdate_s > 0 ? s->backdate_s : X509_SKEW_S;

	if (!ASN1_TIME_set(X509_getm_notBefore(x), (time_t)(start - back)) ||
	    !ASN1_TIME_set(X509_getm_notAfter(x), (time_t)(start + s->duration_s)))
		return -EINVAL;
	return 0;
}

/* Version, serial, validity, subject, issuer and public key. */
static int fields_set(X509 *x, const struct x509_spec *s, EVP_PKEY *pkey, X509 *issuer, char *err,
		      size_t errlen)
{
	int r;

	if (!X509_set_version(x, 2) || serial_set(x) < 0)
		return x509_fail(-EIO, err, errlen, "cannot set the serial number");
	if (validity_set(x, s) < 0)
		return x509_fail(-EINVAL, err, errlen, "cannot set the validity");
	if ((r = x509_subject_set(X509_get_subject_name(x), s, err, errlen)) < 0)
		return r;
	if (!X509_set_issuer_name(x, X509_get_subject_name(issuer ? issuer : x)) ||
	    !X509_set_pubkey(x, pkey))
		return x509_fail(-EIO, err, errlen, "cannot set the issuer and the public key");
	return 0;
}

static int ext_add(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = e && X509_add_ext(x, e, -1);

	X509_EXTENSION_free(e);
	return ok ? 0 : -EIO;
}

/* basicConstraints, keyUsage and extKeyUsage. */
static int usage_exts(X509 *x, X509V3_CTX *ctx, const struct x509_spec *s, bool rsa)
{
	static const char *const eku[] = {NULL, "serverAuth", "clientAuth",
					  "serverAuth,clientAuth"};
	const char *ku = s->ca ? "critical,keyCertSign,cRLSign,digitalSignature"
			 : rsa ? "critical,digitalSignature,keyEncipherment"
			       : "critical,digitalSignature";
	int r = ext_add(x, ctx, NID_basic_constraints,
			s->ca ? "critical,CA:TRUE" : "critical,CA:FALSE");

	if (r >= 0)
		r = ext_add(x, ctx, NID_key_usage, ku);
	if (r >= 0 && s->usages)
		r = ext_add(x, ctx, NID_ext_key_usage, eku[s->usages]);
	return r;
}

/* subjectKeyIdentifier, authorityKeyIdentifier (when the issuer has a key identifier: itself
 * when self-signed), subjectAltName. */
static int id_exts(X509 *x, X509V3_CTX *ctx, X509 *issuer, const struct x509_spec *s)
{
	X509_EXTENSION *san = NULL;
	int r = ext_add(x, ctx, NID_subject_key_identifier, "hash");

	if (r >= 0 && X509_get_ext_by_NID(issuer ? issuer : x, NID_subject_key_identifier, -1) >= 0)
		r = ext_add(x, ctx, NID_authority_key_identifier, "keyid:always");
	if (r >= 0 && (r = x509_san_ext(s, &san, NULL, 0)) >= 0 && san && !X509_add_ext(x, san, -1))
		r = -EIO;
	X509_EXTENSION_free(san);
	return r;
}

static int exts_set(X509 *x, const struct x509_spec *s, const struct x509_key *key, X509 *issuer,
		    char *err, size_t errlen)
{
	X509V3_CTX ctx;
	int r;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
	r = usage_exts(x, &ctx, s, x509_key_type(key) == X509_KEY_RSA);
	if (r >= 0)
		r = id_exts(x, &ctx, issuer, s);
	return r < 0 ? x509_fail(r, err, errlen, "cannot add the extensions") : 0;
}

/* Makes the certificate of s for key, issued by issuer (NULL: itself) and signed with
 * signer. */
static int cert_make(const struct x509_spec *s, const struct x509_key *key, X509 *issuer,
		     const struct x509_key *signer, struct x509_cert **ret, char *err,
		     size_t errlen)
{
	X509 *x;
	int r = spec_check(s, err, errlen);

	if (r < 0)
		return r;
	if (!(x = X509_new()))
		return x509_fail(-ENOMEM, err, errlen, "cannot make a certificate");
	r = fields_set(x, s, key->pkey, issuer, err, errlen);
	if (r >= 0)
		r = exts_set(x, s, key, issuer, err, errlen);
	if (r >= 0 && !X509_sign(x, signer->pkey, EVP_sha256()))
		r = x509_fail(-EIO, err, errlen, "cannot sign the certificate");
	if (r < 0) {
		X509_free(x);
		return r;
	}
	return x509_cert_wrap(x, ret, err, errlen);
}

int x509_cert_self_signed(const struct x509_spec *s, const struct x509_key *key,
			  struct x509_cert **ret, char *err, size_t errlen)
{
	int r = x509_key_need_private(key, "the key", err, errlen);

	return r < 0 ? r : cert_make(s, key, NULL, key, ret, err, errlen);
}

int x509_cert_signed(const struct x509_spec *s, const struct x509_key *key,
		     const struct x509_cert *ca, const struct x509_key *ca_key,
		     struct x509_cert **ret, char *err, size_t errlen)
{
	char cn[X509_NAME_MAX + 1];
	int r = x509_key_need_private(ca_key, "the CA key", err, errlen);

	if (r < 0)
		return r;
	if (!key || !ca)
		return x509_err(-EINVAL, err, errlen, "the %s is missing",
				key ? "CA certificate" : "key");
	if (!x509_cert_is_ca(ca))
		return x509_err(-EINVAL, err, errlen,
				"the certificate '%s' is not a CA (no basicConstraints CA:TRUE)",
				x509_cn_of(ca->x, cn, sizeof(cn)));
	if (x509_cert_key_match(ca, ca_key, NULL, 0) < 0)
		return x509_err(-EINVAL, err, errlen, "the CA key is not the key of the CA '%s'",
				x509_cn_of(ca->x, cn, sizeof(cn)));
	return cert_make(s, key, ca->x, ca_key, ret, err, errlen);
}

int x509_self_signed_pem(const struct x509_spec *s, char **ret_cert, char **ret_key, char *err,
			 size_t errlen)
{
	_cleanup_x509_key_ struct x509_key *k = NULL;
	_cleanup_x509_cert_ struct x509_cert *c = NULL;
	_cleanup_free_ char *cert = NULL;
	int r = x509_key_new_ec(&k, err, errlen);

	if (r >= 0)
		r = x509_cert_self_signed(s, k, &c, err, errlen);
	if (r >= 0)
		r = x509_cert_to_pem(c, &cert, err, errlen);
	if (r >= 0)
		r = x509_key_to_pem(k, ret_key, err, errlen);
	if (r >= 0)
		*ret_cert = TAKE_PTR(cert);
	return r;
}
