/* Keys (x509.h): EC P-256 and RSA, made or read from PEM, written as PKCS#8 or
 * SubjectPublicKeyInfo PEM. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

#include "common/x509/internal.h"

#define RSA_MIN_BITS 2048
#define RSA_MAX_BITS 8192

int x509_key_wrap(EVP_PKEY *pkey, bool priv, struct x509_key **ret, char *err, size_t errlen)
{
	struct x509_key *k = malloc(sizeof(*k));

	if (!k) {
		EVP_PKEY_free(pkey);
		return x509_err(-ENOMEM, err, errlen, "out of memory");
	}
	*k = (struct x509_key){.pkey = pkey, .priv = priv};
	*ret = k;
	return 0;
}

int x509_key_check_type(EVP_PKEY *pkey, char *err, size_t errlen)
{
	char group[64] = "";

	if (EVP_PKEY_is_a(pkey, "RSA"))
		return 0;
	if (EVP_PKEY_is_a(pkey, "EC") &&
	    EVP_PKEY_get_group_name(pkey, group, sizeof(group), NULL) == 1 &&
	    strcmp(group, "prime256v1") == 0)
		return 0;
	ERR_clear_error();
	return x509_err(-EBADMSG, err, errlen,
			"unsupported key type '%s%s%s' (RSA or EC P-256 only)",
			EVP_PKEY_get0_type_name(pkey), *group ? " " : "", group);
}

int x509_key_need_private(const struct x509_key *k, const char *what, char *err, size_t errlen)
{
	if (!k)
		return x509_err(-EINVAL, err, errlen, "%s is missing", what);
	if (!k->priv)
		return x509_err(-EINVAL, err, errlen, "%s is a public key: a private key is needed",
				what);
	return 0;
}

int x509_key_new_ec(struct x509_key **ret, char *err, size_t errlen)
{
	EVP_PKEY *p = EVP_EC_gen("P-256");

	if (!p)
		return x509_fail(-EIO, err, errlen, "cannot make an EC P-256 key");
	return x509_key_wrap(p, true, ret, err, errlen);
}

int x509_key_new_rsa(unsigned bits, struct x509_key **ret, char *err, size_t errlen)
{
	EVP_PKEY *p;

	if (bits < RSA_MIN_BITS || bits > RSA_MAX_BITS)
		return x509_err(-EINVAL, err, errlen,
				"RSA key size %u is out of range (%d to %d bits)", bits,
				RSA_MIN_BITS, RSA_MAX_BITS);
	if (!(p = EVP_RSA_gen(bits)))
		return x509_fail(-EIO, err, errlen, "cannot make a %u-bit RSA key", bits);
	return x509_key_wrap(p, true, ret, err, errlen);
}

void x509_key_free(struct x509_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pkey);
	free(k);
}

enum x509_key_type x509_key_type(const struct x509_key *k)
{
	return EVP_PKEY_is_a(k->pkey, "RSA") ? X509_KEY_RSA : X509_KEY_EC_P256;
}

bool x509_key_is_private(const struct x509_key *k)
{
	return k && k->priv;
}

bool x509_key_same_public(const struct x509_key *a, const struct x509_key *b)
{
	bool same = a && b && EVP_PKEY_eq(a->pkey, b->pkey) == 1;

	ERR_clear_error();
	return same;
}

static int write_private(BIO *b, const void *pkey)
{
	return PEM_write_bio_PrivateKey(b, pkey, NULL, NULL, 0, NULL, NULL);
}

static int write_public(BIO *b, const void *pkey)
{
	return PEM_write_bio_PUBKEY(b, pkey);
}

int x509_key_to_pem(const struct x509_key *k, char **ret, char *err, size_t errlen)
{
	int r = x509_key_need_private(k, "the key", err, errlen);

	if (r < 0)
		return r;
	return x509_to_pem(write_private, k->pkey, true, "private key", ret, err, errlen);
}

int x509_key_public_to_pem(const struct x509_key *k, char **ret, char *err, size_t errlen)
{
	if (!k)
		return x509_err(-EINVAL, err, errlen, "the key is missing");
	return x509_to_pem(write_public, k->pkey, false, "public key", ret, err, errlen);
}

/* The passphrase callback: an encrypted key is refused, and noted. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	*(bool *)u = true;
	return -1;
}

static void *read_private(BIO *b, void *encrypted)
{
	return PEM_read_bio_PrivateKey(b, NULL, no_passphrase, encrypted);
}

static void *read_public(BIO *b, void *ud)
{
	return PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
}

/* Reads a private or a public key, and keeps it when its type is supported. */
static int key_read(const char *pem, bool priv, struct x509_key **ret, char *err, size_t errlen)
{
	bool encrypted = false;
	void *p = NULL;
	int r = x509_from_pem(pem, priv ? "private key" : "public key",
			      priv ? read_private : read_public, &encrypted, &p, err, errlen);

	if (encrypted) {
		if (r >= 0)
			EVP_PKEY_free(p);
		return x509_err(-EBADMSG, err, errlen,
				"the private key is encrypted: give it without a passphrase");
	}
	if (r >= 0 && (r = x509_key_check_type(p, err, errlen)) < 0)
		EVP_PKEY_free(p);
	if (r < 0)
		return r;
	return x509_key_wrap(p, priv, ret, err, errlen);
}

int x509_key_from_pem(const char *pem, struct x509_key **ret, char *err, size_t errlen)
{
	return key_read(pem, true, ret, err, errlen);
}

int x509_key_from_public_pem(const char *pem, struct x509_key **ret, char *err, size_t errlen)
{
	return key_read(pem, false, ret, err, errlen);
}
