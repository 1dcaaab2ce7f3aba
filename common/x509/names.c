/* Names (internal.h): checking a spec's CN, orgs, DNS names and IPs, writing them as a subject
 * and a subjectAltName, and reading them back from a certificate or a CSR. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/x509/internal.h"

#define DNS_NAME_MAX 253

static bool dns_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > DNS_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("-._*", *s))
			return false;
	return true;
}

/* The address's bytes in out: 4 (IPv4) or 16 (IPv6), or -EINVAL. */
static int ip_parse(const char *s, unsigned char out[16])
{
	if (inet_pton(AF_INET, s, out) == 1)
		return 4;
	if (inet_pton(AF_INET6, s, out) == 1)
		return 16;
	return -EINVAL;
}

static int name_check(const char *v, const char *what, char *err, size_t errlen)
{
	size_t n = v ? strlen(v) : 0;

	if (n == 0)
		return x509_err(-EINVAL, err, errlen, "the %s is empty", what);
	if (n > X509_NAME_MAX)
		return x509_err(-EINVAL, err, errlen, "the %s '%s' is longer than %d bytes", what,
				v, X509_NAME_MAX);
	return 0;
}

int x509_names_check(const struct x509_spec *s, char *err, size_t errlen)
{
	unsigned char ip[16];
	int r = name_check(s->cn, "common name (CN)", err, errlen);

	for (size_t i = 0; r >= 0 && s->orgs && s->orgs[i]; i++)
		r = name_check(s->orgs[i], "organisation (O)", err, errlen);
	for (size_t i = 0; r >= 0 && s->dns && s->dns[i]; i++)
		if (!dns_name_ok(s->dns[i]))
			r = x509_err(-EINVAL, err, errlen,
				     "invalid DNS name '%s' in the DNS SANs (letters, digits and "
				     "'-', '.', '_', '*' only)",
				     s->dns[i]);
	for (size_t i = 0; r >= 0 && s->ips && s->ips[i]; i++)
		if (ip_parse(s->ips[i], ip) < 0)
			r = x509_err(
			    -EINVAL, err, errlen,
			    "invalid IP address '%s' in the IP SANs (IPv4 such as 10.0.0.1 "
			    "or IPv6 such as fd00::1)",
			    s->ips[i]);
	return r;
}

static bool name_add(X509_NAME *name, int nid, const char *v)
{
	return X509_NAME_add_entry_by_NID(name, nid, MBSTRING_UTF8, (const unsigned char *)v, -1,
					  -1, 0) == 1;
}

int x509_subject_set(X509_NAME *name, const struct x509_spec *s, char *err, size_t errlen)
{
	for (size_t i = 0; s->orgs && s->orgs[i]; i++)
		if (!name_add(name, NID_organizationName, s->orgs[i]))
			return x509_fail(-EINVAL, err, errlen, "cannot set the organisation '%s'",
					 s->orgs[i]);
	if (!name_add(name, NID_commonName, s->cn))
		return x509_fail(-EINVAL, err, errlen, "cannot set the common name '%s'", s->cn);
	return 0;
}

/* Appends a DNS name (GEN_DNS) or an address (GEN_IPADD) to gens. */
static int gen_push(GENERAL_NAMES *gens, int type, const void *data, int len)
{
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_STRING *v =
	    ASN1_STRING_type_new(type == GEN_DNS ? V_ASN1_IA5STRING : V_ASN1_OCTET_STRING);

	if (!g || !v || !ASN1_STRING_set(v, data, len)) {
		GENERAL_NAME_free(g);
		ASN1_STRING_free(v);
		return -ENOMEM;
	}
	GENERAL_NAME_set0_value(g, type, v);
	if (!sk_GENERAL_NAME_push(gens, g)) {
		GENERAL_NAME_free(g);
		return -ENOMEM;
	}
	return 0;
}

static int gens_fill(GENERAL_NAMES *gens, const struct x509_spec *s)
{
	unsigned char ip[16];
	int r = 0, n;

	for (size_t i = 0; r >= 0 && s->dns && s->dns[i]; i++)
		r = gen_push(gens, GEN_DNS, s->dns[i], (int)strlen(s->dns[i]));
	for (size_t i = 0; r >= 0 && s->ips && s->ips[i]; i++) {
		n = ip_parse(s->ips[i], ip);
		r = n < 0 ? n : gen_push(gens, GEN_IPADD, ip, n);
	}
	return r;
}

int x509_san_ext(const struct x509_spec *s, X509_EXTENSION **ret, char *err, size_t errlen)
{
	GENERAL_NAMES *gens;
	int r;

	*ret = NULL;
	if (!(s->dns && s->dns[0]) && !(s->ips && s->ips[0]))
		return 0;
	if (!(gens = GENERAL_NAMES_new()))
		return x509_fail(-ENOMEM, err, errlen, "cannot make the subjectAltName");
	r = gens_fill(gens, s);
	if (r >= 0 && !(*ret = X509V3_EXT_i2d(NID_subject_alt_name, 0, gens)))
		r = -ENOMEM;
	GENERAL_NAMES_free(gens);
	return r < 0 ? x509_fail(r, err, errlen, "cannot make the subjectAltName") : 0;
}

/* Appends the string's text (UTF-8) to *v; one that holds a NUL byte is refused. */
static int push_text(char ***v, const ASN1_STRING *a, const char *what, char *err, size_t errlen)
{
	unsigned char *u = NULL;
	int n = ASN1_STRING_to_UTF8(&u, a), r;

	if (n < 0)
		return x509_fail(-EBADMSG, err, errlen, "cannot read a name (%s)", what);
	if (memchr(u, 0, (size_t)n))
		r = x509_err(-EBADMSG, err, errlen, "a name (%s) holds a NUL byte", what);
	else if ((r = strv_push(v, (const char *)u)) < 0)
		x509_err(r, err, errlen, "out of memory");
	OPENSSL_free(u);
	return r;
}

static int push_ip(char ***v, const ASN1_OCTET_STRING *a, char *err, size_t errlen)
{
	char text[INET6_ADDRSTRLEN];
	int n = ASN1_STRING_length(a), r;
	int af = n == 4 ? AF_INET : n == 16 ? AF_INET6 : 0;

	if (!af || !inet_ntop(af, ASN1_STRING_get0_data(a), text, sizeof(text)))
		return x509_err(-EBADMSG, err, errlen, "an IP SAN of %d bytes (neither 4 nor 16)",
				n);
	if ((r = strv_push(v, text)) < 0)
		x509_err(r, err, errlen, "out of memory");
	return r;
}

static int subject_read(const X509_NAME *name, struct x509_names *n, char *err, size_t errlen)
{
	_cleanup_strv_ char **cns = NULL;
	int r = 0;

	for (int i = 0; r >= 0 && i < X509_NAME_entry_count(name); i++) {
		const X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
		int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
		if (nid == NID_commonName)
			r = push_text(&cns, X509_NAME_ENTRY_get_data(e), "CN", err, errlen);
		else if (nid == NID_organizationName)
			r = push_text(&n->orgs, X509_NAME_ENTRY_get_data(e), "O", err, errlen);
	}
	if (r >= 0 && cns && !(n->cn = strdup(cns[strv_len(cns) - 1])))
		r = x509_err(-ENOMEM, err, errlen, "out of memory");
	return r;
}

static int san_read(const GENERAL_NAMES *gens, struct x509_names *n, char *err, size_t errlen)
{
	int r = 0, type;

	for (int i = 0; r >= 0 && i < sk_GENERAL_NAME_num(gens); i++) {
		void *v = GENERAL_NAME_get0_value(sk_GENERAL_NAME_value(gens, i), &type);
		if (type == GEN_DNS)
			r = push_text(&n->dns, v, "DNS SAN", err, errlen);
		else if (type == GEN_IPADD)
			r = push_ip(&n->ips, v, err, errlen);
	}
	return r;
}

/* The subjectAltName of the extensions (NULL when there is none). */
static int san_get(const STACK_OF(X509_EXTENSION) * exts, GENERAL_NAMES **ret, char *err,
		   size_t errlen)
{
	int crit = -1;

	*ret = exts ? X509V3_get_d2i(exts, NID_subject_alt_name, &crit, NULL) : NULL;
	if (!*ret && crit == -2)
		return x509_err(-EBADMSG, err, errlen, "more than one subjectAltName extension");
	if (!*ret && crit >= 0)
		return x509_fail(-EBADMSG, err, errlen, "cannot read the subjectAltName extension");
	return 0;
}

int x509_names_read(const X509_NAME *subject, const STACK_OF(X509_EXTENSION) * exts,
		    struct x509_names *ret, char *err, size_t errlen)
{
	struct x509_names n = {0};
	GENERAL_NAMES *san = NULL;
	int r = subject_read(subject, &n, err, errlen);

	if (r >= 0)
		r = san_get(exts, &san, err, errlen);
	if (r >= 0 && san)
		r = san_read(san, &n, err, errlen);
	GENERAL_NAMES_free(san);
	ERR_clear_error();
	if (r < 0) {
		x509_names_release(&n);
		return r;
	}
	*ret = n;
	return 0;
}

void x509_names_release(struct x509_names *n)
{
	if (!n)
		return;
	free(n->cn);
	strv_free(n->orgs);
	strv_free(n->dns);
	strv_free(n->ips);
	*n = (struct x509_names){0};
}
