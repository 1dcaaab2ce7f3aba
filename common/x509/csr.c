/* CSRs (x509.h): made from a key and a spec's names, read back with their signature verified. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>

#include "common/x509/internal.h"

/* The extensionRequest attribute, with the one extension e. */
static int csr_add_ext(X509_REQ *req, X509_EXTENSION *e, char *err, size_t errlen)
{
	STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
	int ok = exts && sk_X509_EXTENSION_push(exts, e) && X509_REQ_add_extensions(req, exts);

	sk_X509_EXTENSION_free(exts); /* e stays the caller's */
	return ok ? 0 : x509_fail(-ENOMEM, err, errlen, "cannot add the CSR's subjectAltName");
}

static int write_csr(BIO *b, const void *req)
{
	return PEM_write_bio_X509_REQ(b, req);
}

/* Fills and signs req. */
static int csr_fill(X509_REQ *req, const struct x509_spec *s, EVP_PKEY *pkey, char *err,
		    size_t errlen)
{
	X509_EXTENSION *san = NULL;
	int r = x509_subject_set(X509_REQ_get_subject_name(req), s, err, errlen);

	if (r >= 0)
		r = x509_san_ext(s, &san, err, errlen);
	if (r >= 0 && san)
		r = csr_add_ext(req, san, err, errlen);
	X509_EXTENSION_free(san);
	if (r >= 0 && (!X509_REQ_set_version(req, 0) || !X509_REQ_set_pubkey(req, pkey) ||
		       !X509_REQ_sign(req, pkey, EVP_sha256())))
		r = x509_fail(-EIO, err, errlen, "cannot sign the CSR");
	return r;
}

int x509_csr_new(const struct x509_spec *s, const struct x509_key *key, char **ret_pem, char *err,
		 size_t errlen)
{
	X509_REQ *req = NULL;
	int r = x509_key_need_private(key, "the key", err, errlen);

	if (r >= 0 && !s)
		r = x509_err(-EINVAL, err, errlen, "the CSR's spec is missing");
	if (r >= 0)
		r = x509_names_check(s, err, errlen);
	if (r >= 0 && !(req = X509_REQ_new()))
		r = x509_fail(-ENOMEM, err, errlen, "cannot make a CSR");
	if (r >= 0)
		r = csr_fill(req, s, key->pkey, err, errlen);
	if (r >= 0)
		r = x509_to_pem(write_csr, req, false, "CSR", ret_pem, err, errlen);
	X509_REQ_free(req);
	return r;
}

static void *read_csr(BIO *b, void *ud)
{
	return PEM_read_bio_X509_REQ(b, NULL, NULL, NULL);
}

int x509_csr_from_pem(const char *pem, struct x509_csr **ret, char *err, size_t errlen)
{
	struct x509_csr *c = NULL;
	EVP_PKEY *pk;
	void *req;
	int r = x509_from_pem(pem, "CSR", read_csr, NULL, &req, err, errlen);

	if (r < 0)
		return r;
	if (!(pk = X509_REQ_get0_pubkey(req)) || X509_REQ_verify(req, pk) != 1)
		r = x509_fail(-EBADMSG, err, errlen, "the CSR's signature does not verify");
	else if (!(c = malloc(sizeof(*c))))
		r = x509_err(-ENOMEM, err, errlen, "out of memory");
	if (r < 0) {
		X509_REQ_free(req);
		return r;
	}
	c->req = req;
	*ret = c;
	return 0;
}

void x509_csr_free(struct x509_csr *c)
{
	if (!c)
		return;
	X509_REQ_free(c->req);
	free(c);
}

int x509_csr_names(const struct x509_csr *c, struct x509_names *ret, char *err, size_t errlen)
{
	STACK_OF(X509_EXTENSION) *exts = X509_REQ_get_extensions(c->req);
	int r = x509_names_read(X509_REQ_get_subject_name(c->req), exts, ret, err, errlen);

	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	return r;
}

int x509_csr_key(const struct x509_csr *c, struct x509_key **ret, char *err, size_t errlen)
{
	EVP_PKEY *pk = X509_REQ_get_pubkey(c->req);
	int r;

	if (!pk)
		return x509_fail(-EBADMSG, err, errlen, "cannot read the CSR's public key");
	if ((r = x509_key_check_type(pk, err, errlen)) < 0) {
		EVP_PKEY_free(pk);
		return r;
	}
	return x509_key_wrap(pk, false, ret, err, errlen);
}
