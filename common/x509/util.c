/* The helpers of common/x509 (internal.h): error text with OpenSSL's reason, and PEM text in
 * and out through memory BIOs. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/x509/internal.h"

static int verr(int r, char *err, size_t errlen, const char *why, const char *fmt, va_list ap)
{
	int n;

	if (!err || errlen == 0)
		return r;
	n = vsnprintf(err, errlen, fmt, ap);
	if (why && n >= 0 && (size_t)n < errlen)
		snprintf(err + n, errlen - (size_t)n, ": %s", why);
	return r;
}

int x509_err(int r, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(r, err, errlen, NULL, fmt, ap);
	va_end(ap);
	ERR_clear_error();
	return r;
}

int x509_fail(int r, char *err, size_t errlen, const char *fmt, ...)
{
	unsigned long e = ERR_peek_last_error();
	va_list ap;

	if (e && ERR_GET_REASON(e) == ERR_R_MALLOC_FAILURE)
		r = -ENOMEM;
	va_start(ap, fmt);
	verr(r, err, errlen, e ? ERR_reason_error_string(e) : NULL, fmt, ap);
	va_end(ap);
	ERR_clear_error();
	return r;
}

int x509_pem_bio(const char *pem, const char *what, BIO **ret, char *err, size_t errlen)
{
	size_t n = pem ? strnlen(pem, X509_PEM_MAX + 1) : 0;
	BIO *b;

	if (n == 0)
		return x509_err(-EBADMSG, err, errlen, "no %s in an empty text", what);
	if (n > X509_PEM_MAX)
		return x509_err(-E2BIG, err, errlen, "the %s text is longer than %zu bytes", what,
				X509_PEM_MAX);
	if (!(b = BIO_new_mem_buf(pem, (int)n)))
		return x509_fail(-ENOMEM, err, errlen, "cannot read the %s", what);
	*ret = b;
	return 0;
}

int x509_pem_fail(const char *what, char *err, size_t errlen)
{
	unsigned long e = ERR_peek_last_error();

	/* a certificate's read says "no start line", a key's decoder "unsupported" */
	if ((ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) ||
	    (ERR_GET_LIB(e) == ERR_LIB_OSSL_DECODER && ERR_GET_REASON(e) == ERR_R_UNSUPPORTED))
		return x509_err(-EBADMSG, err, errlen, "no %s in the text (no PEM block it reads)",
				what);
	return x509_fail(-EBADMSG, err, errlen, "cannot read the %s", what);
}

int x509_from_pem(const char *pem, const char *what, x509_read_fn *read, void *ud, void **ret,
		  char *err, size_t errlen)
{
	BIO *b = NULL;
	void *obj;
	int r = x509_pem_bio(pem, what, &b, err, errlen);

	if (r < 0)
		return r;
	obj = read(b, ud);
	BIO_free(b);
	if (!obj)
		return x509_pem_fail(what, err, errlen);
	ERR_clear_error();
	*ret = obj;
	return 0;
}

static int bio_string(BIO *b, char **ret)
{
	char *data, *s;
	long n = BIO_get_mem_data(b, &data);

	if (n < 0 || !(s = malloc((size_t)n + 1)))
		return -ENOMEM;
	memcpy(s, data, (size_t)n);
	s[n] = '\0';
	*ret = s;
	return 0;
}

int x509_to_pem(x509_write_fn *write, const void *obj, bool secret, const char *what, char **ret,
		char *err, size_t errlen)
{
	BIO *b = BIO_new(secret ? BIO_s_secmem() : BIO_s_mem());
	int r;

	if (!b)
		return x509_fail(-ENOMEM, err, errlen, "cannot write the %s", what);
	if (!write(b, obj))
		r = x509_fail(-EIO, err, errlen, "cannot write the %s", what);
	else if ((r = bio_string(b, ret)) < 0)
		x509_err(r, err, errlen, "cannot write the %s: out of memory", what);
	BIO_free(b);
	return r;
}
