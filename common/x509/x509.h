/* X.509 on OpenSSL 3: keys, certificates and CSRs for the certificates a module serves with or
 * issues: the ccm's self-signed serving pair today, rbac-proxy's, and the control-plane
 * manager's kubeadm set (CA, apiserver, kubelet client, front-proxy, etcd, service-account key
 * pair). A struct x509_spec says what a certificate (or a CSR) should hold; the rest reads,
 * checks and writes PEM text.
 *
 *   struct x509_key *ca_key = NULL, *key = NULL;
 *   struct x509_cert *ca = NULL, *crt = NULL;
 *   char err[256], *pem = NULL;
 *   struct x509_spec cs = {.cn = "kubernetes", .ca = true, .duration_s = 10 * X509_YEAR};
 *   r = x509_key_new_rsa(2048, &ca_key, err, sizeof(err));
 *   if (r >= 0) r = x509_cert_self_signed(&cs, ca_key, &ca, err, sizeof(err));
 *   static const char *const dns[] = {"kubernetes", "kubernetes.default", NULL};
 *   static const char *const ips[] = {"10.96.0.1", "fd00::1", NULL};
 *   struct x509_spec s = {.cn = "kube-apiserver", .dns = dns, .ips = ips,
 *                         .usages = X509_USAGE_SERVER, .duration_s = X509_YEAR};
 *   if (r >= 0) r = x509_key_new_ec(&key, err, sizeof(err));
 *   if (r >= 0) r = x509_cert_signed(&s, key, ca, ca_key, &crt, err, sizeof(err));
 *   if (r >= 0) r = x509_cert_to_pem(crt, &pem, err, sizeof(err));   // free(pem)
 *   if (r < 0) log_error("cannot issue the certificate", KV_S("error", err));
 *   ...x509_cert_verify_signed_by(crt, ca, ...) == 0; x509_cert_check_time(crt, 0, 30 * 86400)
 *   free(pem); x509_cert_free(crt); x509_cert_free(ca); x509_key_free(key); x509_key_free(ca_key);
 *
 * Keys are EC P-256 or RSA (2048 to 8192 bits); certificates and CSRs are signed with SHA-256.
 * A certificate has a random positive 128-bit serial, a subjectKeyIdentifier and an
 * authorityKeyIdentifier (the CA's, when it has one), and is valid from backdate_s (default
 * X509_SKEW_S) before its start (clock skew) to duration_s after it. A CA gets basicConstraints CA:TRUE and keyUsage
 * keyCertSign, cRLSign, digitalSignature (both critical); a leaf gets CA:FALSE, keyUsage
 * digitalSignature (and keyEncipherment for an RSA key) and the extKeyUsage of its usages. A CA
 * with usages also gets that extKeyUsage (a self-signed serving certificate, as the ccm's).
 *
 * Every function that can fail returns 0 (or a positive value it documents) or -errno, and
 * writes what went wrong to err (lower case, the bad value in quotes; errlen 0 is fine):
 *   -EINVAL        the caller asked for something that cannot be made (an IP SAN "1.2.3", an
 *                  empty CN, a 1024-bit RSA key, a public key where a private one is needed)
 *   -EBADMSG       the text is not what it should be (not PEM, bad DER, an unsupported or
 *                  encrypted key, a CSR whose self-signature does not verify)
 *   -EKEYREJECTED  a relation does not hold: not issued by that CA, a key that does not match
 *   -E2BIG         a PEM text over X509_PEM_MAX bytes, a bundle over X509_BUNDLE_MAX
 *   -ENOMEM, -EIO  OpenSSL could not allocate, or failed inside
 * Every string returned is malloc'd (free(); a private key's PEM: secret_free(), which wipes
 * it); every object has its _free (NULL is fine). Nothing logs; nothing starts a thread. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define X509_YEAR ((int64_t)365 * 24 * 3600)
/* A certificate's not-before is by default this long before its start (client-go's self-signed
 * certificates; kubeadm backdates by 5 minutes: x509_spec.backdate_s). */
#define X509_SKEW_S ((int64_t)3600)
#define X509_PEM_MAX ((size_t)1 << 20)
#define X509_BUNDLE_MAX 1000
/* The longest CN or organisation (RFC 5280's ub-common-name, ub-organization-name). */
#define X509_NAME_MAX 64

struct x509_key;  /* a private key, or a public one (x509_key_from_public_pem, x509_csr_key) */
struct x509_cert; /* a parsed or made certificate */
struct x509_csr;  /* a parsed CSR whose self-signature verified */

enum x509_key_type {
	X509_KEY_EC_P256 = 1,
	X509_KEY_RSA = 2,
};

enum x509_usage {
	X509_USAGE_SERVER = 1 << 0, /* extKeyUsage serverAuth */
	X509_USAGE_CLIENT = 1 << 1, /* extKeyUsage clientAuth */
};

/* What a certificate or a CSR holds. The lists are NULL-terminated (NULL: none). A CSR takes
 * the names only (cn, orgs, dns, ips). */
struct x509_spec {
	const char *cn;		 /* subject CN, 1 to X509_NAME_MAX bytes */
	const char *const *orgs; /* subject O, one RDN each (kubeadm's "system:masters") */
	const char *const *dns;	 /* DNS SANs: letters, digits, '-', '.', '_', '*' */
	const char *const *ips;	 /* IP SANs, IPv4 ("10.0.0.1") or IPv6 ("fd00::1") */
	bool ca;
	unsigned usages;    /* enum x509_usage bits; a leaf needs at least one */
	int64_t start;	    /* unix seconds; 0: now */
	int64_t duration_s; /* > 0: not-after = start + duration_s */
	int64_t backdate_s; /* > 0: not-before = start - backdate_s; 0: start - X509_SKEW_S */
};

/* Names read back from a certificate or a CSR. Each list is NULL when empty. */
struct x509_names {
	char *cn;    /* the subject's CN (the last one, as Go's crypto/x509), NULL if none */
	char **orgs; /* the subject's O values, in order */
	char **dns;  /* the DNS SANs */
	char **ips;  /* the IP SANs as text ("10.0.0.1", "fd00::1") */
};

/* x509_cert_check_time's results. */
enum x509_time {
	X509_TIME_VALID = 0,
	X509_TIME_EXPIRES_SOON = 1, /* valid now, not-after within the window */
	X509_TIME_EXPIRED = 2,
	X509_TIME_NOT_YET_VALID = 3,
};

/* Keys (key.c). */
int x509_key_new_ec(struct x509_key **ret, char *err, size_t errlen);
int x509_key_new_rsa(unsigned bits, struct x509_key **ret, char *err, size_t errlen);
void x509_key_free(struct x509_key *k);
enum x509_key_type x509_key_type(const struct x509_key *k);
bool x509_key_is_private(const struct x509_key *k);
/* The private key as PKCS#8 PEM ("PRIVATE KEY"); free it with secret_free(). */
int x509_key_to_pem(const struct x509_key *k, char **ret, char *err, size_t errlen);
/* The first private key of the text: "PRIVATE KEY" (PKCS#8), "RSA PRIVATE KEY" or "EC PRIVATE
 * KEY"; an encrypted key is refused. */
int x509_key_from_pem(const char *pem, struct x509_key **ret, char *err, size_t errlen);
/* The public key as PEM ("PUBLIC KEY", SubjectPublicKeyInfo), from a private or public key. */
int x509_key_public_to_pem(const struct x509_key *k, char **ret, char *err, size_t errlen);
int x509_key_from_public_pem(const char *pem, struct x509_key **ret, char *err, size_t errlen);
/* True when both hold the same public key (sa.key and sa.pub). */
bool x509_key_same_public(const struct x509_key *a, const struct x509_key *b);

/* Making certificates (cert.c). key: the subject's; it must be private for a self-signed one.
 * For a CA-signed one it may be public only (from a CSR); ca_key must be the CA's private
 * key and ca a CA. */
int x509_cert_self_signed(const struct x509_spec *s, const struct x509_key *key,
			  struct x509_cert **ret, char *err, size_t errlen);
int x509_cert_signed(const struct x509_spec *s, const struct x509_key *key,
		     const struct x509_cert *ca, const struct x509_key *ca_key,
		     struct x509_cert **ret, char *err, size_t errlen);
/* A new P-256 key and a self-signed certificate for it, both as PEM: a serving pair made at
 * start. Free the key's PEM with secret_free(). */
int x509_self_signed_pem(const struct x509_spec *s, char **ret_cert, char **ret_key, char *err,
			 size_t errlen);

/* Reading and checking certificates (cert_read.c). */
/* The first certificate of the text (other PEM blocks before it are skipped). */
int x509_cert_from_pem(const char *pem, struct x509_cert **ret, char *err, size_t errlen);
/* One DER certificate (a TLS peer's), with nothing after it. */
int x509_cert_from_der(const void *der, size_t len, struct x509_cert **ret, char *err,
		       size_t errlen);
/* Every certificate of a bundle, in order, as a NULL-terminated vector (at least one). */
int x509_certs_from_pem(const char *pem, struct x509_cert ***ret, char *err, size_t errlen);
void x509_cert_free(struct x509_cert *c);
void x509_certs_free(struct x509_cert **v);
int x509_cert_to_pem(const struct x509_cert *c, char **ret, char *err, size_t errlen);
int x509_cert_names(const struct x509_cert *c, struct x509_names *ret, char *err, size_t errlen);
/* Not-before and not-after as unix seconds (either pointer may be NULL). */
int x509_cert_validity(const struct x509_cert *c, int64_t *ret_not_before, int64_t *ret_not_after,
		       char *err, size_t errlen);
/* basicConstraints CA:TRUE. */
bool x509_cert_is_ca(const struct x509_cert *c);
/* Where now (unix seconds; <= 0: the clock's) stands in the validity: an enum x509_time, with
 * EXPIRES_SOON when not-after is within within_s of now; or -EBADMSG. */
int x509_cert_check_time(const struct x509_cert *c, int64_t now, int64_t within_s);
const char *x509_time_name(int t);
/* 0 when ca issued c: its subject is c's issuer, its key identifier c's authority key
 * identifier (when both are there), its keyUsage allows signing certificates, and c's signature
 * verifies with its key; else -EKEYREJECTED and why. Times are not checked. */
int x509_cert_verify_signed_by(const struct x509_cert *c, const struct x509_cert *ca, char *err,
			       size_t errlen);
/* 0 when key (private or public) is the certificate's key, else -EKEYREJECTED. */
int x509_cert_key_match(const struct x509_cert *c, const struct x509_key *key, char *err,
			size_t errlen);

/* Frees the names and zeroes *n (names.c). */
void x509_names_release(struct x509_names *n);

/* CSRs (csr.c). x509_csr_new signs a CSR with key (private) holding s's CN and orgs, and its DNS
 * and IP SANs in an extensionRequest; x509_csr_from_pem reads one and verifies its signature. */
int x509_csr_new(const struct x509_spec *s, const struct x509_key *key, char **ret_pem, char *err,
		 size_t errlen);
int x509_csr_from_pem(const char *pem, struct x509_csr **ret, char *err, size_t errlen);
void x509_csr_free(struct x509_csr *c);
int x509_csr_names(const struct x509_csr *c, struct x509_names *ret, char *err, size_t errlen);
/* The CSR's public key, for x509_cert_signed(). */
int x509_csr_key(const struct x509_csr *c, struct x509_key **ret, char *err, size_t errlen);

static inline void x509_key_freep(struct x509_key **k)
{
	x509_key_free(*k);
}
static inline void x509_cert_freep(struct x509_cert **c)
{
	x509_cert_free(*c);
}
static inline void x509_certs_freep(struct x509_cert ***v)
{
	x509_certs_free(*v);
}
static inline void x509_csr_freep(struct x509_csr **c)
{
	x509_csr_free(*c);
}
#define _cleanup_x509_key_ __attribute__((cleanup(x509_key_freep)))
#define _cleanup_x509_cert_ __attribute__((cleanup(x509_cert_freep)))
#define _cleanup_x509_certs_ __attribute__((cleanup(x509_certs_freep)))
#define _cleanup_x509_csr_ __attribute__((cleanup(x509_csr_freep)))
#define _cleanup_x509_names_ __attribute__((cleanup(x509_names_release)))
