/* What the files of common/x509 share, and no other folder uses (tests/unit/test_x509.c aside,
 * to look inside): the OpenSSL objects behind the public handles, and the helpers for errors
 * and PEM text (util.c), keys (key.c), names (names.c) and certificates (cert_read.c). */
#pragma once
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>

#include "common/x509/x509.h"

struct x509_key {
	EVP_PKEY *pkey;
	bool priv;
};
struct x509_cert {
	X509 *x;
};
struct x509_csr {
	X509_REQ *req;
};

/* util.c */
/* Write the message to err, empty OpenSSL's error queue of this thread and return r.
 * x509_fail adds OpenSSL's last reason when there is one (": bad end line"), and returns
 * -ENOMEM when that reason is an allocation failure. */
int x509_err(int r, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int x509_fail(int r, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A read-only BIO over the text: -EBADMSG when it is NULL or empty, -E2BIG over X509_PEM_MAX;
 * what names the object in the messages ("certificate"). */
int x509_pem_bio(const char *pem, const char *what, BIO **ret, char *err, size_t errlen);
/* The error after a PEM read of a what failed: -EBADMSG with "no what in the text" or "cannot
 * read the what: <OpenSSL's reason>", -ENOMEM. */
int x509_pem_fail(const char *what, char *err, size_t errlen);
/* Reads the first what of the text with read(bio, ud) (a PEM_read_bio_* function). */
typedef void *x509_read_fn(BIO *b, void *ud);
int x509_from_pem(const char *pem, const char *what, x509_read_fn *read, void *ud, void **ret,
		  char *err, size_t errlen);
/* Writes obj with write(bio, obj) (a PEM_write_bio_* function) into a malloc'd string; secret:
 * through a BIO that wipes its memory (a private key). */
typedef int x509_write_fn(BIO *b, const void *obj);
int x509_to_pem(x509_write_fn *write, const void *obj, bool secret, const char *what, char **ret,
		char *err, size_t errlen);

/* key.c */
/* A handle over pkey (taken: freed on failure). */
int x509_key_wrap(EVP_PKEY *pkey, bool priv, struct x509_key **ret, char *err, size_t errlen);
/* -EBADMSG unless pkey is RSA or EC P-256. */
int x509_key_check_type(EVP_PKEY *pkey, char *err, size_t errlen);
/* -EINVAL unless k is there and private; what names its role ("the CA key"). */
int x509_key_need_private(const struct x509_key *k, const char *what, char *err, size_t errlen);

/* names.c */
/* -EINVAL with the bad value unless the CN, orgs, DNS names and IPs are all valid. */
int x509_names_check(const struct x509_spec *s, char *err, size_t errlen);
/* Sets the subject (O..., CN) to s's names. */
int x509_subject_set(X509_NAME *name, const struct x509_spec *s, char *err, size_t errlen);
/* The subjectAltName extension of s's DNS names and IPs; *ret NULL when there are none. */
int x509_san_ext(const struct x509_spec *s, X509_EXTENSION **ret, char *err, size_t errlen);
/* Reads the subject's CN and orgs, and the subjectAltName of exts (NULL: none), into *ret. */
int x509_names_read(const X509_NAME *subject, const STACK_OF(X509_EXTENSION) * exts,
		    struct x509_names *ret, char *err, size_t errlen);

/* cert_read.c */
/* A handle over x (taken: freed on failure). */
int x509_cert_wrap(X509 *x, struct x509_cert **ret, char *err, size_t errlen);
/* The subject's CN for messages (in buf, "" when there is none); returns buf. */
const char *x509_cn_of(X509 *x, char *buf, size_t n);
