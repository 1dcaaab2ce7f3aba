/* common/x509: keys, certificates (self-signed and CA-signed), CSRs, reading and checks. The
 * file reaches the OpenSSL objects behind the handles (internal.h) to look at what was written
 * and to make inputs the API does not make (PKCS#1 and SEC1 keys, encrypted keys, Ed25519). */
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/secret.h"
#include "common/x509/internal.h"
#include "common/x509/x509.h"
#include "tests/unit/harness.h"

static const char *const ORGS[] = {"system:masters", "dev team", NULL};
static const char *const DNS[] = {"api.example.com", "kubernetes.default", "*.svc.local", NULL};
static const char *const IPS[] = {"10.96.0.1", "fd00::1", "127.0.0.1", NULL};

/* A CA and its key. */
struct pki {
	struct x509_key *key;
	struct x509_cert *cert;
};

static void pki_release(struct pki *p)
{
	x509_cert_free(p->cert);
	x509_key_free(p->key);
}
#define _cleanup_pki_ __attribute__((cleanup(pki_release)))

static int ca_new(const char *cn, bool rsa, struct pki *p)
{
	struct x509_spec s = {.cn = cn, .ca = true, .duration_s = 10 * X509_YEAR};
	char err[256];
	int r = rsa ? x509_key_new_rsa(2048, &p->key, err, sizeof(err))
		    : x509_key_new_ec(&p->key, err, sizeof(err));

	if (r >= 0)
		r = x509_cert_self_signed(&s, p->key, &p->cert, err, sizeof(err));
	if (r < 0)
		printf("    ca_new: %s\n", err);
	return r;
}

static bool strv_eq(char **got, const char *const *want)
{
	size_t i = 0;

	for (; want && want[i]; i++)
		if (!got || !got[i] || strcmp(got[i], want[i]) != 0)
			return false;
	return !got || !got[i];
}

/* The PEM text of pkey in the traditional form ("RSA PRIVATE KEY", "EC PRIVATE KEY"), or
 * PKCS#8 encrypted with "pw" when encrypted. */
static char *pem_of_pkey(EVP_PKEY *pkey, bool encrypted)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out = NULL;
	int ok;

	if (!b)
		return NULL;
	ok = encrypted
		 ? PEM_write_bio_PKCS8PrivateKey(b, pkey, EVP_aes_256_cbc(), "pw", 2, NULL, NULL)
		 : PEM_write_bio_PrivateKey_traditional(b, pkey, NULL, NULL, 0, NULL, NULL);
	long n = ok ? BIO_get_mem_data(b, &data) : 0;
	if (n > 0)
		out = strndup(data, (size_t)n);
	BIO_free(b);
	return out;
}

/* pem (of the label) re-encoded after a change of its DER: the byte at pos (negative: from the
 * end) flipped or, with from, the first from replaced by to (of the same length). */
static char *pem_edit(const char *pem, const char *label, long pos, const char *from,
		      const char *to)
{
	_cleanup_free_ void *der = NULL;
	_cleanup_free_ char *b64 = NULL;
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	const char *body = strchr(pem, '\n'), *end = strstr(pem, "-----END");
	char *at;
	size_t n;

	if (!body || !end ||
	    base64_decode(body + 1, (size_t)(end - body - 1), BASE64_SKIP_SPACE, &der, &n) < 0)
		return NULL;
	if (from && !(at = memmem(der, n, from, strlen(from))))
		return NULL;
	if (from)
		memcpy(at, to, strlen(to));
	else
		((unsigned char *)der)[pos < 0 ? (long)n + pos : pos] ^= 0x01;
	if (base64_encode(der, n, BASE64_STD, &b64) < 0)
		return NULL;
	buf_printf(&out, "-----BEGIN %s-----\n", label);
	for (size_t i = 0; i < strlen(b64); i += 64)
		buf_printf(&out, "%.64s\n", b64 + i);
	buf_printf(&out, "-----END %s-----\n", label);
	return buf_steal(&out);
}

TEST(x509_key_ec_pem_round_trip)
{
	_cleanup_x509_key_ struct x509_key *k = NULL, *k2 = NULL, *pub = NULL, *other = NULL;
	_cleanup_secret_ char *pem = NULL;
	_cleanup_free_ char *pub_pem = NULL;
	char err[256];

	ASSERT_OK(x509_key_new_ec(&k, err, sizeof(err)));
	ASSERT_EQ(x509_key_type(k), X509_KEY_EC_P256);
	ASSERT_TRUE(x509_key_is_private(k));
	ASSERT_OK(x509_key_to_pem(k, &pem, err, sizeof(err)));
	ASSERT_TRUE(str_has_prefix(pem, "-----BEGIN PRIVATE KEY-----\n"));
	ASSERT_OK(x509_key_from_pem(pem, &k2, err, sizeof(err)));
	ASSERT_EQ(x509_key_type(k2), X509_KEY_EC_P256);
	ASSERT_TRUE(x509_key_same_public(k, k2));
	ASSERT_OK(x509_key_public_to_pem(k, &pub_pem, err, sizeof(err)));
	ASSERT_TRUE(str_has_prefix(pub_pem, "-----BEGIN PUBLIC KEY-----\n"));
	ASSERT_NOT_CONTAINS(pub_pem, "PRIVATE");
	ASSERT_OK(x509_key_from_public_pem(pub_pem, &pub, err, sizeof(err)));
	ASSERT_FALSE(x509_key_is_private(pub));
	ASSERT_TRUE(x509_key_same_public(pub, k));
	ASSERT_OK(x509_key_new_ec(&other, err, sizeof(err)));
	ASSERT_FALSE(x509_key_same_public(other, k));
	ASSERT_FALSE(x509_key_same_public(NULL, k));
	/* a public key has no private PEM; a private PEM is no public one and the reverse */
	char *none = NULL;
	ASSERT_ERR(x509_key_to_pem(pub, &none, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "public key");
	ASSERT_NULL(none);
	ASSERT_ERR(x509_key_from_pem(pub_pem, &k2, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "no private key in the text");
}

TEST(x509_key_rsa_pem_round_trip_and_sizes)
{
	_cleanup_x509_key_ struct x509_key *k = NULL, *k2 = NULL, *pub = NULL;
	_cleanup_secret_ char *pem = NULL;
	_cleanup_free_ char *pub_pem = NULL;
	char err[256];

	ASSERT_OK(x509_key_new_rsa(2048, &k, err, sizeof(err)));
	ASSERT_EQ(x509_key_type(k), X509_KEY_RSA);
	ASSERT_EQ(EVP_PKEY_get_bits(k->pkey), 2048);
	ASSERT_OK(x509_key_to_pem(k, &pem, err, sizeof(err)));
	ASSERT_TRUE(str_has_prefix(pem, "-----BEGIN PRIVATE KEY-----\n"));
	ASSERT_OK(x509_key_from_pem(pem, &k2, err, sizeof(err)));
	ASSERT_EQ(x509_key_type(k2), X509_KEY_RSA);
	ASSERT_TRUE(x509_key_same_public(k, k2));
	ASSERT_OK(x509_key_public_to_pem(k2, &pub_pem, err, sizeof(err)));
	ASSERT_OK(x509_key_from_public_pem(pub_pem, &pub, err, sizeof(err)));
	ASSERT_TRUE(x509_key_same_public(pub, k));

	struct x509_key *bad = NULL;
	ASSERT_ERR(x509_key_new_rsa(1024, &bad, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "RSA key size 1024 is out of range");
	ASSERT_ERR(x509_key_new_rsa(16384, &bad, err, sizeof(err)), EINVAL);
	ASSERT_NULL(bad);
}

TEST(x509_key_reads_pkcs1_and_sec1)
{
	_cleanup_x509_key_ struct x509_key *rsa = NULL, *ec = NULL, *r2 = NULL, *e2 = NULL;
	_cleanup_free_ char *rsa_pem = NULL, *ec_pem = NULL;
	char err[256];

	ASSERT_OK(x509_key_new_rsa(2048, &rsa, err, sizeof(err)));
	ASSERT_OK(x509_key_new_ec(&ec, err, sizeof(err)));
	ASSERT_NOT_NULL(rsa_pem = pem_of_pkey(rsa->pkey, false));
	ASSERT_NOT_NULL(ec_pem = pem_of_pkey(ec->pkey, false));
	ASSERT_TRUE(str_has_prefix(rsa_pem, "-----BEGIN RSA PRIVATE KEY-----\n"));
	ASSERT_TRUE(str_has_prefix(ec_pem, "-----BEGIN EC PRIVATE KEY-----\n"));
	ASSERT_OK(x509_key_from_pem(rsa_pem, &r2, err, sizeof(err)));
	ASSERT_OK(x509_key_from_pem(ec_pem, &e2, err, sizeof(err)));
	ASSERT_EQ(x509_key_type(r2), X509_KEY_RSA);
	ASSERT_EQ(x509_key_type(e2), X509_KEY_EC_P256);
	ASSERT_TRUE(x509_key_same_public(r2, rsa));
	ASSERT_TRUE(x509_key_same_public(e2, ec));
	ASSERT_FALSE(x509_key_same_public(r2, e2));
}

TEST(x509_key_refuses_encrypted_and_other_types)
{
	_cleanup_x509_key_ struct x509_key *ec = NULL;
	struct x509_key *k = NULL;
	char err[256], *pem;
	EVP_PKEY *p;

	ASSERT_OK(x509_key_new_ec(&ec, err, sizeof(err)));
	ASSERT_NOT_NULL(pem = pem_of_pkey(ec->pkey, true));
	ASSERT_CONTAINS(pem, "ENCRYPTED PRIVATE KEY");
	int r = x509_key_from_pem(pem, &k, err, sizeof(err));
	free(pem);
	ASSERT_ERR(r, EBADMSG);
	ASSERT_CONTAINS(err, "the private key is encrypted");

	static const char *const other[][2] = {{"ED25519", NULL}, {"EC", "P-384"}};
	static const char *const why[] = {"unsupported key type 'ED25519'",
					  "unsupported key type 'EC secp384r1'"};
	for (size_t i = 0; i < ARRAY_SIZE(other); i++) {
		p = other[i][1] ? EVP_PKEY_Q_keygen(NULL, NULL, other[i][0], other[i][1])
				: EVP_PKEY_Q_keygen(NULL, NULL, other[i][0]);
		ASSERT_NOT_NULL(p);
		BIO *b = BIO_new(BIO_s_mem());
		char *data = NULL;
		PEM_write_bio_PrivateKey(b, p, NULL, NULL, 0, NULL, NULL);
		long n = BIO_get_mem_data(b, &data);
		pem = strndup(data, (size_t)n);
		BIO_free(b);
		EVP_PKEY_free(p);
		r = x509_key_from_pem(pem, &k, err, sizeof(err));
		free(pem);
		ASSERT_ERR(r, EBADMSG);
		ASSERT_CONTAINS(err, why[i]);
	}
	ASSERT_NULL(k);
}

TEST(x509_key_bad_pem)
{
	_cleanup_x509_key_ struct x509_key *ec = NULL;
	_cleanup_secret_ char *pem = NULL;
	struct x509_key *k = NULL;
	char err[256];

	ASSERT_ERR(x509_key_from_pem(NULL, &k, err, sizeof(err)), EBADMSG);
	ASSERT_STREQ(err, "no private key in an empty text");
	ASSERT_ERR(x509_key_from_pem("", &k, err, sizeof(err)), EBADMSG);
	ASSERT_ERR(x509_key_from_pem("hello, world\n", &k, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "no private key in the text");
	ASSERT_ERR(x509_key_from_public_pem("garbage", &k, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "no public key in the text");
	ASSERT_ERR(
	    x509_key_from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", &k,
			      err, sizeof(err)),
	    EBADMSG);
	ASSERT_CONTAINS(err, "cannot read the private key");
	/* every truncation of a good key is refused */
	ASSERT_OK(x509_key_new_ec(&ec, err, sizeof(err)));
	ASSERT_OK(x509_key_to_pem(ec, &pem, err, sizeof(err)));
	size_t end = (size_t)(strstr(pem, "-----END") - pem);
	for (size_t n = 0; n < end + 8; n++) {
		char *cut = strndup(pem, n);
		ASSERT_NOT_NULL(cut);
		int r = x509_key_from_pem(cut, &k, err, sizeof(err));
		free(cut);
		ASSERT_ERR(r, EBADMSG);
	}
	ASSERT_NULL(k);
	/* a private key's text is no key when only its public part is asked for, and no cert */
	ASSERT_ERR(x509_key_from_public_pem(pem, &k, err, sizeof(err)), EBADMSG);
	struct x509_cert *c = NULL;
	ASSERT_ERR(x509_cert_from_pem(pem, &c, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "no certificate in the text");
	ASSERT_NULL(c);
}

TEST(x509_self_signed_ca)
{
	_cleanup_pki_ struct pki ca = {0};
	_cleanup_x509_names_ struct x509_names n = {0};
	int64_t nb, na, t0 = time(NULL);
	X509 *x;
	char err[256];

	ASSERT_OK(ca_new("kubernetes", false, &ca));
	x = ca.cert->x;
	ASSERT_TRUE(x509_cert_is_ca(ca.cert));
	ASSERT_OK(x509_cert_names(ca.cert, &n, err, sizeof(err)));
	ASSERT_STREQ(n.cn, "kubernetes");
	ASSERT_NULL(n.orgs);
	ASSERT_NULL(n.dns);
	ASSERT_NULL(n.ips);
	ASSERT_OK(x509_cert_validity(ca.cert, &nb, &na, err, sizeof(err)));
	ASSERT_TRUE(nb >= t0 - X509_SKEW_S - 2 && nb <= t0 - X509_SKEW_S + 2);
	ASSERT_TRUE(na >= t0 + 10 * X509_YEAR - 2 && na <= t0 + 10 * X509_YEAR + 2);
	/* self-signed: it verifies against itself, its key matches */
	ASSERT_OK(x509_cert_verify_signed_by(ca.cert, ca.cert, err, sizeof(err)));
	ASSERT_OK(x509_cert_key_match(ca.cert, ca.key, err, sizeof(err)));
	/* basicConstraints CA:TRUE critical; keyUsage critical certSign, cRLSign, digitalSignature;
	 * no extKeyUsage; SKID == AKID */
	int i = X509_get_ext_by_NID(x, NID_basic_constraints, -1);
	ASSERT_GE(i, 0);
	ASSERT_EQ(X509_EXTENSION_get_critical(X509_get_ext(x, i)), 1);
	i = X509_get_ext_by_NID(x, NID_key_usage, -1);
	ASSERT_GE(i, 0);
	ASSERT_EQ(X509_EXTENSION_get_critical(X509_get_ext(x, i)), 1);
	ASSERT_EQ(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN | KU_DIGITAL_SIGNATURE);
	ASSERT_LT(X509_get_ext_by_NID(x, NID_ext_key_usage, -1), 0);
	ASSERT_NOT_NULL(X509_get0_subject_key_id(x));
	ASSERT_NOT_NULL(X509_get0_authority_key_id(x));
	ASSERT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_subject_key_id(x), X509_get0_authority_key_id(x)),
		  0);
	ASSERT_EQ(X509_get_version(x), 2);
	ASSERT_EQ(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
}

TEST(x509_chain_ca_to_leaf_verifies)
{
	_cleanup_pki_ struct pki ca = {0}, other = {0}, same_name = {0};
	_cleanup_x509_key_ struct x509_key *key = NULL;
	_cleanup_x509_cert_ struct x509_cert *leaf = NULL;
	_cleanup_x509_names_ struct x509_names n = {0};
	struct x509_spec s = {.cn = "kube-apiserver",
			      .orgs = ORGS,
			      .dns = DNS,
			      .ips = IPS,
			      .usages = X509_USAGE_SERVER | X509_USAGE_CLIENT,
			      .duration_s = X509_YEAR};
	char err[256];

	ASSERT_OK(ca_new("kubernetes", false, &ca));
	ASSERT_OK(ca_new("etcd-ca", false, &other));
	ASSERT_OK(ca_new("kubernetes", false, &same_name));
	ASSERT_OK(x509_key_new_ec(&key, err, sizeof(err)));
	ASSERT_OK(x509_cert_signed(&s, key, ca.cert, ca.key, &leaf, err, sizeof(err)));
	ASSERT_FALSE(x509_cert_is_ca(leaf));
	ASSERT_OK(x509_cert_key_match(leaf, key, err, sizeof(err)));
	ASSERT_OK(x509_cert_verify_signed_by(leaf, ca.cert, err, sizeof(err)));
	/* SANs and names read back as asked */
	ASSERT_OK(x509_cert_names(leaf, &n, err, sizeof(err)));
	ASSERT_STREQ(n.cn, "kube-apiserver");
	ASSERT_TRUE(strv_eq(n.orgs, ORGS));
	ASSERT_TRUE(strv_eq(n.dns, DNS));
	ASSERT_TRUE(strv_eq(n.ips, IPS));
	/* another CA, and one with the same name but another key, did not issue it; nor itself */
	ASSERT_ERR(x509_cert_verify_signed_by(leaf, other.cert, err, sizeof(err)), EKEYREJECTED);
	ASSERT_CONTAINS(err, "'kube-apiserver' was not issued by 'etcd-ca'");
	ASSERT_ERR(x509_cert_verify_signed_by(leaf, same_name.cert, err, sizeof(err)),
		   EKEYREJECTED);
	ASSERT_CONTAINS(err, "was not issued by 'kubernetes'");
	ASSERT_ERR(x509_cert_verify_signed_by(leaf, leaf, err, sizeof(err)), EKEYREJECTED);
	ASSERT_ERR(x509_cert_verify_signed_by(ca.cert, other.cert, err, sizeof(err)), EKEYREJECTED);
	/* the issuer is the CA's subject, the AKID the CA's SKID */
	ASSERT_EQ(X509_NAME_cmp(X509_get_issuer_name(leaf->x), X509_get_subject_name(ca.cert->x)),
		  0);
	ASSERT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(leaf->x),
					X509_get0_subject_key_id(ca.cert->x)),
		  0);
}

TEST(x509_leaf_extensions_rsa_and_ec)
{
	_cleanup_pki_ struct pki ca = {0};
	_cleanup_x509_key_ struct x509_key *rsa = NULL, *ec = NULL;
	_cleanup_x509_cert_ struct x509_cert *srv = NULL, *cli = NULL, *both = NULL;
	struct x509_spec s = {.cn = "leaf", .duration_s = X509_YEAR};
	char err[256];

	ASSERT_OK(ca_new("rsa-ca", true, &ca));
	ASSERT_EQ(X509_get_signature_nid(ca.cert->x), NID_sha256WithRSAEncryption);
	ASSERT_OK(x509_key_new_rsa(2048, &rsa, err, sizeof(err)));
	ASSERT_OK(x509_key_new_ec(&ec, err, sizeof(err)));
	s.usages = X509_USAGE_SERVER;
	ASSERT_OK(x509_cert_signed(&s, rsa, ca.cert, ca.key, &srv, err, sizeof(err)));
	s.usages = X509_USAGE_CLIENT;
	ASSERT_OK(x509_cert_signed(&s, ec, ca.cert, ca.key, &cli, err, sizeof(err)));
	s.usages = X509_USAGE_SERVER | X509_USAGE_CLIENT;
	ASSERT_OK(x509_cert_signed(&s, ec, ca.cert, ca.key, &both, err, sizeof(err)));
	ASSERT_OK(x509_cert_verify_signed_by(srv, ca.cert, err, sizeof(err)));
	ASSERT_OK(x509_cert_verify_signed_by(cli, ca.cert, err, sizeof(err)));
	ASSERT_EQ(X509_get_signature_nid(srv->x), NID_sha256WithRSAEncryption);
	/* keyEncipherment for RSA only; extKeyUsage per usages; CA:FALSE critical */
	ASSERT_EQ(X509_get_key_usage(srv->x), KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT);
	ASSERT_EQ(X509_get_key_usage(cli->x), KU_DIGITAL_SIGNATURE);
	ASSERT_EQ(X509_get_extended_key_usage(srv->x), XKU_SSL_SERVER);
	ASSERT_EQ(X509_get_extended_key_usage(cli->x), XKU_SSL_CLIENT);
	ASSERT_EQ(X509_get_extended_key_usage(both->x), XKU_SSL_SERVER | XKU_SSL_CLIENT);
	int i = X509_get_ext_by_NID(cli->x, NID_basic_constraints, -1);
	ASSERT_GE(i, 0);
	ASSERT_EQ(X509_EXTENSION_get_critical(X509_get_ext(cli->x, i)), 1);
	ASSERT_FALSE(x509_cert_is_ca(cli));
	/* no SAN asked: none written */
	ASSERT_LT(X509_get_ext_by_NID(cli->x, NID_subject_alt_name, -1), 0);
	/* random positive serials of at most 128 bits, different each time */
	BIGNUM *a = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cli->x), NULL);
	BIGNUM *b = ASN1_INTEGER_to_BN(X509_get0_serialNumber(both->x), NULL);
	bool ok = a && b && !BN_is_negative(a) && !BN_is_zero(a) && BN_num_bits(a) <= 128 &&
		  BN_num_bits(a) > 64 && BN_cmp(a, b) != 0;
	BN_free(a);
	BN_free(b);
	ASSERT_TRUE(ok);
}

TEST(x509_cert_pem_round_trip_and_bundle)
{
	_cleanup_pki_ struct pki ca = {0};
	_cleanup_x509_key_ struct x509_key *key = NULL;
	_cleanup_x509_cert_ struct x509_cert *leaf = NULL, *back = NULL;
	_cleanup_x509_certs_ struct x509_cert **v = NULL;
	_cleanup_free_ char *leaf_pem = NULL, *ca_pem = NULL, *again = NULL;
	_cleanup_secret_ char *key_pem = NULL;
	_cleanup_buf_ struct buf bundle = BUF_INIT(0);
	struct x509_spec s = {
	    .cn = "front-proxy-client", .usages = X509_USAGE_CLIENT, .duration_s = X509_YEAR};
	char err[256];

	ASSERT_OK(ca_new("front-proxy-ca", false, &ca));
	ASSERT_OK(x509_key_new_ec(&key, err, sizeof(err)));
	ASSERT_OK(x509_cert_signed(&s, key, ca.cert, ca.key, &leaf, err, sizeof(err)));
	ASSERT_OK(x509_cert_to_pem(leaf, &leaf_pem, err, sizeof(err)));
	ASSERT_OK(x509_cert_to_pem(ca.cert, &ca_pem, err, sizeof(err)));
	ASSERT_OK(x509_key_to_pem(key, &key_pem, err, sizeof(err)));
	ASSERT_TRUE(str_has_prefix(leaf_pem, "-----BEGIN CERTIFICATE-----\n"));
	/* a key block first is skipped: the first certificate is read */
	buf_printf(&bundle, "%s%s%s", key_pem, leaf_pem, ca_pem);
	ASSERT_OK(x509_cert_from_pem(bundle.data, &back, err, sizeof(err)));
	ASSERT_EQ(X509_cmp(back->x, leaf->x), 0);
	ASSERT_OK(x509_cert_to_pem(back, &again, err, sizeof(err)));
	ASSERT_STREQ(again, leaf_pem);
	ASSERT_OK(x509_cert_verify_signed_by(back, ca.cert, err, sizeof(err)));
	/* and the key of a combined file: the blocks before it are skipped too */
	_cleanup_x509_key_ struct x509_key *k2 = NULL;
	ASSERT_OK(x509_key_from_pem(bundle.data, &k2, err, sizeof(err)));
	ASSERT_OK(x509_cert_key_match(leaf, k2, err, sizeof(err)));
	buf_reset(&bundle);
	buf_printf(&bundle, "%s%s%s", leaf_pem, ca_pem, key_pem);
	x509_key_free(TAKE_PTR(k2));
	ASSERT_OK(x509_key_from_pem(bundle.data, &k2, err, sizeof(err)));
	ASSERT_OK(x509_cert_key_match(leaf, k2, err, sizeof(err)));
	buf_reset(&bundle);
	buf_printf(&bundle, "%s%s%s", key_pem, leaf_pem, ca_pem);
	/* the bundle: both, in order */
	ASSERT_OK(x509_certs_from_pem(bundle.data, &v, err, sizeof(err)));
	ASSERT_NOT_NULL(v[0]);
	ASSERT_NOT_NULL(v[1]);
	ASSERT_NULL(v[2]);
	ASSERT_EQ(X509_cmp(v[0]->x, leaf->x), 0);
	ASSERT_EQ(X509_cmp(v[1]->x, ca.cert->x), 0);
	ASSERT_TRUE(x509_cert_is_ca(v[1]));
	/* a bundle whose second certificate is cut is refused, as one without any */
	struct x509_cert **bad = NULL;
	buf_reset(&bundle);
	buf_printf(&bundle, "%s%.*s", leaf_pem, (int)(strlen(ca_pem) - 40), ca_pem);
	ASSERT_ERR(x509_certs_from_pem(bundle.data, &bad, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "cannot read the certificate");
	ASSERT_ERR(x509_certs_from_pem(key_pem, &bad, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "no certificate in the text");
	ASSERT_ERR(x509_certs_from_pem("", &bad, err, sizeof(err)), EBADMSG);
	ASSERT_NULL(bad);
}

TEST(x509_cert_bad_pem)
{
	_cleanup_pki_ struct pki ca = {0};
	_cleanup_free_ char *pem = NULL, *big = NULL, *flipped = NULL;
	struct x509_cert *c = NULL;
	char err[256];

	ASSERT_ERR(x509_cert_from_pem(NULL, &c, err, sizeof(err)), EBADMSG);
	ASSERT_STREQ(err, "no certificate in an empty text");
	ASSERT_ERR(x509_cert_from_pem("", &c, err, sizeof(err)), EBADMSG);
	ASSERT_ERR(x509_cert_from_pem("\x01\x02garbage\xff", &c, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "no certificate in the text");
	ASSERT_ERR(
	    x509_cert_from_pem("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n", &c,
			       err, sizeof(err)),
	    EBADMSG);
	ASSERT_CONTAINS(err, "cannot read the certificate: ");
	ASSERT_OK(ca_new("ca", false, &ca));
	ASSERT_OK(x509_cert_to_pem(ca.cert, &pem, err, sizeof(err)));
	size_t end = (size_t)(strstr(pem, "-----END") - pem);
	for (size_t n = 0; n < end + 8; n++) {
		char *cut = strndup(pem, n);
		ASSERT_NOT_NULL(cut);
		int r = x509_cert_from_pem(cut, &c, err, sizeof(err));
		free(cut);
		ASSERT_ERR(r, EBADMSG);
	}
	/* DER that breaks in the middle (a length byte changed) */
	ASSERT_NOT_NULL(flipped = pem_edit(pem, "CERTIFICATE", 1, NULL, NULL));
	ASSERT_ERR(x509_cert_from_pem(flipped, &c, err, sizeof(err)), EBADMSG);
	/* over the cap */
	ASSERT_NOT_NULL(big = malloc(X509_PEM_MAX + 2));
	memset(big, 'A', X509_PEM_MAX + 1);
	big[X509_PEM_MAX + 1] = '\0';
	ASSERT_ERR(x509_cert_from_pem(big, &c, err, sizeof(err)), E2BIG);
	ASSERT_NULL(c);
}

TEST(x509_expiry_check)
{
	_cleanup_x509_key_ struct x509_key *key = NULL;
	_cleanup_x509_cert_ struct x509_cert *one = NULL, *month = NULL, *now = NULL;
	const int64_t t = 1700000000, day = 86400;
	struct x509_spec s = {
	    .cn = "short", .usages = X509_USAGE_SERVER, .start = t, .duration_s = 1};
	int64_t nb, na;
	char err[256];

	ASSERT_OK(x509_key_new_ec(&key, err, sizeof(err)));
	ASSERT_OK(x509_cert_self_signed(&s, key, &one, err, sizeof(err)));
	ASSERT_OK(x509_cert_validity(one, &nb, &na, err, sizeof(err)));
	ASSERT_EQ(nb, t - X509_SKEW_S);
	ASSERT_EQ(na, t + 1);
	ASSERT_EQ(x509_cert_check_time(one, t, 0), X509_TIME_VALID);
	ASSERT_EQ(x509_cert_check_time(one, t + 1, 0), X509_TIME_VALID);
	ASSERT_EQ(x509_cert_check_time(one, t + 2, 0), X509_TIME_EXPIRED);
	ASSERT_EQ(x509_cert_check_time(one, t - X509_SKEW_S, 0), X509_TIME_VALID);
	ASSERT_EQ(x509_cert_check_time(one, t - X509_SKEW_S - 1, 0), X509_TIME_NOT_YET_VALID);
	ASSERT_EQ(x509_cert_check_time(one, t, 2), X509_TIME_EXPIRES_SOON);
	/* backdate_s replaces the default skew (kubeadm's 5 minutes) */
	_cleanup_x509_cert_ struct x509_cert *kubeadm = NULL;
	s.backdate_s = 300;
	ASSERT_OK(x509_cert_self_signed(&s, key, &kubeadm, err, sizeof(err)));
	ASSERT_OK(x509_cert_validity(kubeadm, &nb, &na, err, sizeof(err)));
	ASSERT_EQ(nb, t - 300);
	ASSERT_EQ(na, t + 1);
	s.backdate_s = 0;
	/* the 1-second certificate made a while ago has expired by the clock */
	ASSERT_EQ(x509_cert_check_time(one, 0, 0), X509_TIME_EXPIRED);
	/* 30 days: expires within 31 days, not within 29 */
	s.duration_s = 30 * day;
	ASSERT_OK(x509_cert_self_signed(&s, key, &month, err, sizeof(err)));
	ASSERT_EQ(x509_cert_check_time(month, t, 31 * day), X509_TIME_EXPIRES_SOON);
	ASSERT_EQ(x509_cert_check_time(month, t, 29 * day), X509_TIME_VALID);
	ASSERT_EQ(x509_cert_check_time(month, t + 31 * day, 0), X509_TIME_EXPIRED);
	/* start 0 is now; now 0 is the clock's */
	s.start = 0;
	s.duration_s = X509_YEAR;
	ASSERT_OK(x509_cert_self_signed(&s, key, &now, err, sizeof(err)));
	ASSERT_EQ(x509_cert_check_time(now, 0, 30 * day), X509_TIME_VALID);
	ASSERT_EQ(x509_cert_check_time(now, 0, 400 * day), X509_TIME_EXPIRES_SOON);
	ASSERT_EQ(x509_cert_check_time(now, time(NULL) + 2 * X509_YEAR, 0), X509_TIME_EXPIRED);
	ASSERT_STREQ(x509_time_name(X509_TIME_VALID), "valid");
	ASSERT_STREQ(x509_time_name(X509_TIME_EXPIRES_SOON), "expires soon");
	ASSERT_STREQ(x509_time_name(X509_TIME_EXPIRED), "expired");
	ASSERT_STREQ(x509_time_name(X509_TIME_NOT_YET_VALID), "not yet valid");
	ASSERT_STREQ(x509_time_name(-1), "invalid");
}

TEST(x509_key_mismatch_detected)
{
	_cleanup_pki_ struct pki ca = {0}, other = {0};
	_cleanup_x509_key_ struct x509_key *key = NULL, *pub = NULL;
	_cleanup_x509_cert_ struct x509_cert *leaf = NULL;
	_cleanup_free_ char *pub_pem = NULL;
	struct x509_cert *c = NULL;
	struct x509_spec s = {.cn = "kubelet-client",
			      .orgs = ORGS,
			      .usages = X509_USAGE_CLIENT,
			      .duration_s = X509_YEAR};
	char err[256];

	ASSERT_OK(ca_new("ca", false, &ca));
	ASSERT_OK(ca_new("other", true, &other));
	ASSERT_OK(x509_cert_key_match(ca.cert, ca.key, err, sizeof(err)));
	ASSERT_ERR(x509_cert_key_match(ca.cert, other.key, err, sizeof(err)), EKEYREJECTED);
	ASSERT_STREQ(err, "the key does not match the certificate 'ca'");
	ASSERT_ERR(x509_cert_key_match(other.cert, ca.key, err, sizeof(err)), EKEYREJECTED);
	ASSERT_ERR(x509_cert_key_match(ca.cert, NULL, err, sizeof(err)), EKEYREJECTED);
	/* a public key matches too */
	ASSERT_OK(x509_key_public_to_pem(ca.key, &pub_pem, err, sizeof(err)));
	ASSERT_OK(x509_key_from_public_pem(pub_pem, &pub, err, sizeof(err)));
	ASSERT_OK(x509_cert_key_match(ca.cert, pub, err, sizeof(err)));
	/* signing: the CA key must be the CA's and private, the CA a CA */
	ASSERT_OK(x509_key_new_ec(&key, err, sizeof(err)));
	ASSERT_ERR(x509_cert_signed(&s, key, ca.cert, other.key, &c, err, sizeof(err)), EINVAL);
	ASSERT_STREQ(err, "the CA key is not the key of the CA 'ca'");
	ASSERT_ERR(x509_cert_signed(&s, key, ca.cert, pub, &c, err, sizeof(err)), EINVAL);
	ASSERT_STREQ(err, "the CA key is a public key: a private key is needed");
	ASSERT_OK(x509_cert_signed(&s, key, ca.cert, ca.key, &leaf, err, sizeof(err)));
	ASSERT_ERR(x509_cert_signed(&s, key, leaf, key, &c, err, sizeof(err)), EINVAL);
	ASSERT_STREQ(err,
		     "the certificate 'kubelet-client' is not a CA (no basicConstraints CA:TRUE)");
	ASSERT_ERR(x509_cert_self_signed(&s, pub, &c, err, sizeof(err)), EINVAL);
	ASSERT_ERR(x509_cert_signed(&s, NULL, ca.cert, ca.key, &c, err, sizeof(err)), EINVAL);
	ASSERT_STREQ(err, "the key is missing");
	ASSERT_NULL(c);
}

TEST(x509_csr_round_trip_and_signing)
{
	_cleanup_pki_ struct pki ca = {0};
	bool rsa_key[] = {false, true};

	ASSERT_OK(ca_new("kubernetes", false, &ca));
	for (size_t i = 0; i < ARRAY_SIZE(rsa_key); i++) {
		_cleanup_x509_key_ struct x509_key *key = NULL, *csr_key = NULL;
		_cleanup_x509_csr_ struct x509_csr *csr = NULL;
		_cleanup_x509_names_ struct x509_names n = {0}, cn = {0};
		_cleanup_x509_cert_ struct x509_cert *crt = NULL;
		_cleanup_free_ char *pem = NULL;
		struct x509_spec s = {
		    .cn = "system:node:ip-10-0-0-1", .orgs = ORGS, .dns = DNS, .ips = IPS};
		char err[256];

		ASSERT_OK(rsa_key[i] ? x509_key_new_rsa(2048, &key, err, sizeof(err))
				     : x509_key_new_ec(&key, err, sizeof(err)));
		ASSERT_OK(x509_csr_new(&s, key, &pem, err, sizeof(err)));
		ASSERT_TRUE(str_has_prefix(pem, "-----BEGIN CERTIFICATE REQUEST-----\n"));
		ASSERT_OK(x509_csr_from_pem(pem, &csr, err, sizeof(err)));
		ASSERT_OK(x509_csr_names(csr, &n, err, sizeof(err)));
		ASSERT_STREQ(n.cn, s.cn);
		ASSERT_TRUE(strv_eq(n.orgs, ORGS));
		ASSERT_TRUE(strv_eq(n.dns, DNS));
		ASSERT_TRUE(strv_eq(n.ips, IPS));
		ASSERT_OK(x509_csr_key(csr, &csr_key, err, sizeof(err)));
		ASSERT_FALSE(x509_key_is_private(csr_key));
		ASSERT_TRUE(x509_key_same_public(csr_key, key));
		/* the signer issues a client certificate from what the CSR asks */
		struct x509_spec issue = {.cn = n.cn,
					  .orgs = (const char *const *)n.orgs,
					  .dns = (const char *const *)n.dns,
					  .ips = (const char *const *)n.ips,
					  .usages = X509_USAGE_SERVER,
					  .duration_s = X509_YEAR};
		ASSERT_OK(
		    x509_cert_signed(&issue, csr_key, ca.cert, ca.key, &crt, err, sizeof(err)));
		ASSERT_OK(x509_cert_key_match(crt, key, err, sizeof(err)));
		ASSERT_OK(x509_cert_verify_signed_by(crt, ca.cert, err, sizeof(err)));
		ASSERT_OK(x509_cert_names(crt, &cn, err, sizeof(err)));
		ASSERT_TRUE(strv_eq(cn.ips, IPS));
		ASSERT_EQ(X509_get_key_usage(crt->x),
			  rsa_key[i] ? KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT
				     : KU_DIGITAL_SIGNATURE);
	}
}

TEST(x509_csr_without_sans_and_public_key_refused)
{
	_cleanup_x509_key_ struct x509_key *key = NULL, *pub = NULL;
	_cleanup_x509_csr_ struct x509_csr *csr = NULL;
	_cleanup_x509_names_ struct x509_names n = {0};
	_cleanup_free_ char *pem = NULL, *pub_pem = NULL;
	struct x509_spec s = {.cn = "system:kube-scheduler"};
	char err[256], *none = NULL;

	ASSERT_OK(x509_key_new_ec(&key, err, sizeof(err)));
	ASSERT_OK(x509_csr_new(&s, key, &pem, err, sizeof(err)));
	ASSERT_OK(x509_csr_from_pem(pem, &csr, err, sizeof(err)));
	ASSERT_OK(x509_csr_names(csr, &n, err, sizeof(err)));
	ASSERT_STREQ(n.cn, "system:kube-scheduler");
	ASSERT_NULL(n.orgs);
	ASSERT_NULL(n.dns);
	ASSERT_NULL(n.ips);
	ASSERT_OK(x509_key_public_to_pem(key, &pub_pem, err, sizeof(err)));
	ASSERT_OK(x509_key_from_public_pem(pub_pem, &pub, err, sizeof(err)));
	ASSERT_ERR(x509_csr_new(&s, pub, &none, err, sizeof(err)), EINVAL);
	ASSERT_ERR(x509_csr_new(NULL, key, &none, err, sizeof(err)), EINVAL);
	ASSERT_NULL(none);
}

TEST(x509_csr_tampered_rejected)
{
	_cleanup_x509_key_ struct x509_key *key = NULL;
	_cleanup_free_ char *pem = NULL, *sig = NULL, *subj = NULL;
	struct x509_csr *csr = NULL;
	struct x509_spec s = {.cn = "csr-node", .dns = DNS};
	char err[256];

	ASSERT_OK(x509_key_new_ec(&key, err, sizeof(err)));
	ASSERT_OK(x509_csr_new(&s, key, &pem, err, sizeof(err)));
	/* a byte of the signature (near the end) changed */
	ASSERT_NOT_NULL(sig = pem_edit(pem, "CERTIFICATE REQUEST", -3, NULL, NULL));
	ASSERT_ERR(x509_csr_from_pem(sig, &csr, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "the CSR's signature does not verify");
	/* the CN changed after signing */
	ASSERT_NOT_NULL(subj = pem_edit(pem, "CERTIFICATE REQUEST", 0, "csr-node", "csr-nodf"));
	ASSERT_ERR(x509_csr_from_pem(subj, &csr, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "the CSR's signature does not verify");
	/* not a CSR at all */
	ASSERT_ERR(x509_csr_from_pem("nope", &csr, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "no CSR in the text");
	ASSERT_ERR(x509_csr_from_pem("", &csr, err, sizeof(err)), EBADMSG);
	size_t end = (size_t)(strstr(pem, "-----END") - pem);
	for (size_t n = 0; n < end + 8; n += 3) {
		char *cut = strndup(pem, n);
		ASSERT_NOT_NULL(cut);
		int r = x509_csr_from_pem(cut, &csr, err, sizeof(err));
		free(cut);
		ASSERT_ERR(r, EBADMSG);
	}
	ASSERT_NULL(csr);
}

TEST(x509_bad_names_rejected)
{
	_cleanup_x509_key_ struct x509_key *key = NULL;
	_cleanup_pki_ struct pki ca = {0};
	static const char *const bad_ips[] = {"1.2.3", "::g",	       "256.1.1.1", "1.2.3.4 ",
					      "",      "fe80::1%eth0", "01.2.3.4",  "10.0.0.1/8"};
	static const char *const bad_dns[] = {"a b", "a,IP:1.2.3.4", "", "x\n", "é.example"};
	char err[256], *pem = NULL, long_cn[X509_NAME_MAX + 2];
	struct x509_cert *c = NULL;

	ASSERT_OK(x509_key_new_ec(&key, err, sizeof(err)));
	ASSERT_OK(ca_new("ca", false, &ca));
	for (size_t i = 0; i < ARRAY_SIZE(bad_ips); i++) {
		const char *ips[] = {"10.0.0.1", bad_ips[i], NULL};
		struct x509_spec s = {
		    .cn = "x", .ips = ips, .usages = X509_USAGE_SERVER, .duration_s = 60};
		char want[64];
		str_printf(want, sizeof(want), "invalid IP address '%s' in the IP SANs",
			   bad_ips[i]);
		ASSERT_ERR(x509_cert_self_signed(&s, key, &c, err, sizeof(err)), EINVAL);
		ASSERT_CONTAINS(err, want);
		ASSERT_ERR(x509_cert_signed(&s, key, ca.cert, ca.key, &c, err, sizeof(err)),
			   EINVAL);
		ASSERT_CONTAINS(err, want);
		ASSERT_ERR(x509_csr_new(&s, key, &pem, err, sizeof(err)), EINVAL);
		ASSERT_CONTAINS(err, want);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad_dns); i++) {
		const char *dns[] = {bad_dns[i], NULL};
		struct x509_spec s = {
		    .cn = "x", .dns = dns, .usages = X509_USAGE_SERVER, .duration_s = 60};
		ASSERT_ERR(x509_cert_self_signed(&s, key, &c, err, sizeof(err)), EINVAL);
		ASSERT_CONTAINS(err, "invalid DNS name");
		ASSERT_ERR(x509_csr_new(&s, key, &pem, err, sizeof(err)), EINVAL);
	}
	/* CN and O: present, at most 64 bytes; a leaf needs a usage; a validity > 0 */
	memset(long_cn, 'a', sizeof(long_cn) - 1);
	long_cn[sizeof(long_cn) - 1] = '\0';
	const char *empty_org[] = {"", NULL};
	struct x509_spec s = {.cn = long_cn, .usages = X509_USAGE_CLIENT, .duration_s = 60};
	ASSERT_ERR(x509_cert_self_signed(&s, key, &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "is longer than 64 bytes");
	long_cn[X509_NAME_MAX] = '\0';
	ASSERT_OK(x509_cert_self_signed(&s, key, &c, err, sizeof(err)));
	x509_cert_free(c);
	c = NULL;
	s.cn = NULL;
	ASSERT_ERR(x509_cert_self_signed(&s, key, &c, err, sizeof(err)), EINVAL);
	ASSERT_STREQ(err, "the common name (CN) is empty");
	s.cn = "x";
	s.orgs = empty_org;
	ASSERT_ERR(x509_csr_new(&s, key, &pem, err, sizeof(err)), EINVAL);
	ASSERT_STREQ(err, "the organisation (O) is empty");
	s.orgs = NULL;
	s.usages = 0;
	ASSERT_ERR(x509_cert_self_signed(&s, key, &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "needs a usage");
	s.usages = 1u << 5;
	ASSERT_ERR(x509_cert_self_signed(&s, key, &c, err, sizeof(err)), EINVAL);
	s.usages = X509_USAGE_CLIENT;
	s.duration_s = 0;
	ASSERT_ERR(x509_cert_self_signed(&s, key, &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "validity");
	ASSERT_ERR(x509_cert_self_signed(NULL, key, &c, err, sizeof(err)), EINVAL);
	ASSERT_NULL(c);
	ASSERT_NULL(pem);
}

TEST(x509_self_signed_pem_serving_pair)
{
	_cleanup_free_ char *cert = NULL;
	_cleanup_secret_ char *key = NULL;
	_cleanup_x509_cert_ struct x509_cert *c = NULL;
	_cleanup_x509_key_ struct x509_key *k = NULL;
	_cleanup_x509_names_ struct x509_names n = {0};
	static const char *const dns[] = {"localhost", NULL}, *const ips[] = {"127.0.0.1", NULL};
	struct x509_spec s = {.cn = "localhost@1700000000",
			      .dns = dns,
			      .ips = ips,
			      .ca = true,
			      .usages = X509_USAGE_SERVER,
			      .duration_s = X509_YEAR};
	int64_t nb, na;
	char err[256];

	ASSERT_OK(x509_self_signed_pem(&s, &cert, &key, err, sizeof(err)));
	ASSERT_TRUE(str_has_prefix(cert, "-----BEGIN CERTIFICATE-----\n"));
	ASSERT_TRUE(str_has_prefix(key, "-----BEGIN PRIVATE KEY-----\n"));
	ASSERT_OK(x509_cert_from_pem(cert, &c, err, sizeof(err)));
	ASSERT_OK(x509_key_from_pem(key, &k, err, sizeof(err)));
	ASSERT_EQ(x509_key_type(k), X509_KEY_EC_P256);
	ASSERT_OK(x509_cert_key_match(c, k, err, sizeof(err)));
	ASSERT_TRUE(x509_cert_is_ca(c));
	ASSERT_EQ(X509_get_extended_key_usage(c->x), XKU_SSL_SERVER);
	ASSERT_OK(x509_cert_names(c, &n, err, sizeof(err)));
	ASSERT_STREQ(n.cn, "localhost@1700000000");
	ASSERT_TRUE(strv_eq(n.dns, dns));
	ASSERT_TRUE(strv_eq(n.ips, ips));
	ASSERT_OK(x509_cert_validity(c, &nb, &na, err, sizeof(err)));
	ASSERT_EQ(na - nb, X509_YEAR + X509_SKEW_S);
	/* a failure leaves the outputs alone */
	char *c2 = NULL, *k2 = NULL;
	s.cn = "";
	ASSERT_ERR(x509_self_signed_pem(&s, &c2, &k2, err, sizeof(err)), EINVAL);
	ASSERT_NULL(c2);
	ASSERT_NULL(k2);
}

TEST(x509_names_read_last_cn_and_refuse_nul)
{
	_cleanup_x509_key_ struct x509_key *key = NULL;
	_cleanup_x509_cert_ struct x509_cert *c = NULL;
	_cleanup_x509_names_ struct x509_names n = {0};
	struct x509_names bad = {0};
	struct x509_spec s = {.cn = "first", .usages = X509_USAGE_CLIENT, .duration_s = 60};
	char err[256];

	ASSERT_OK(x509_key_new_ec(&key, err, sizeof(err)));
	ASSERT_OK(x509_cert_self_signed(&s, key, &c, err, sizeof(err)));
	/* a second CN, then a CN with a NUL byte inside (set on the parsed object) */
	X509_NAME *name = X509_get_subject_name(c->x);
	ASSERT_TRUE(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
					       (const unsigned char *)"second", -1, -1, 0));
	ASSERT_OK(x509_cert_names(c, &n, err, sizeof(err)));
	ASSERT_STREQ(n.cn, "second");
	ASSERT_TRUE(X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
					       (const unsigned char *)"adm\0in", 6, -1, 0));
	ASSERT_ERR(x509_cert_names(c, &bad, err, sizeof(err)), EBADMSG);
	ASSERT_STREQ(err, "a name (O) holds a NUL byte");
	ASSERT_NULL(bad.cn);
	ASSERT_NULL(bad.orgs);
	x509_names_release(NULL);
}
