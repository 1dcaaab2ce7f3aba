/* Where the Kubernetes API server is and how to authenticate to it: in-cluster configuration or a
 * kubeconfig file, as client-go's clientcmd resolves them.
 *
 * Order (the first that applies wins):
 *   1. --kubeconfig FILE (--master, when also given, overrides the cluster's server);
 *   2. --master URL alone: that server, no credentials;
 *   3. $KUBECONFIG: its first file only (a ':'-separated list is not merged; the first existing
 *      file is used);
 *   4. in-cluster: $KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT with the service account's
 *      token, ca.crt and namespace under /var/run/secrets/kubernetes.io/serviceaccount;
 *   5. ~/.kube/config.
 *
 * In a kubeconfig: current-context (or the context asked for) names a cluster and a user;
 * clusters give server, certificate-authority(-data), insecure-skip-tls-verify; users give
 * client-certificate(-data), client-key(-data), token, tokenFile, username/password. Relative
 * file names are relative to the kubeconfig's directory. exec and auth-provider plugins are not
 * supported (an error says so when the user has no other credential). Errors name the file and
 * the field: "kubeconfig '/x/config': users[0].user.client-key-data: invalid base64". A token
 * (token, tokenFile, the service account's) holding a control character such as CR or LF is
 * refused at load time, with the file and the field named and the token not shown. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBE_CONFIG_MAX_FILE ((size_t)4 << 20) /* a kubeconfig file */
#define KUBE_TOKEN_MAX_FILE ((size_t)64 << 10) /* a token file */
/* client-go re-reads a token file at most once a minute. */
#define KUBE_TOKEN_REREAD_NS (60 * 1000000000LL)

struct kube_config {
	char *server; /* "https://host:port" (no trailing '/') */
	char *ca_file;
	char *ca_pem;
	char *cert_file;
	char *key_file;
	char *cert_pem;
	char *key_pem;
	char *token;	  /* bearer token (read from token_file when that is set) */
	char *token_file; /* re-read when it changes (service-account token rotation) */
	char *username;	  /* basic authentication */
	char *password;
	bool insecure_skip_verify;
	char *namespace; /* the context's namespace, the pod's namespace in-cluster, or "default" */
	char *context;	 /* the kubeconfig context used (NULL in-cluster) */
	char *source;	 /* "in-cluster", "--master", or the kubeconfig path: for messages */
	bool in_cluster;
};

struct kube_config_opts {
	const char *kubeconfig; /* --kubeconfig */
	const char *master;	/* --master */
	const char *context;	/* a context other than current-context */
	const char *sa_dir;	/* in-cluster service-account directory; NULL: KUBE_SA_DIR */
};

/* Resolves the configuration. On failure a sentence for the user is in err. -ENOENT when no
 * configuration exists at all, -EINVAL for a broken one, other -errno for I/O. */
int kube_config_load(const struct kube_config_opts *opts, struct kube_config **ret, char *err,
		     size_t errlen);
/* Parses kubeconfig text; path (may be NULL) names it in errors and anchors relative paths. */
int kube_config_parse(const char *data, size_t len, const char *path, const char *context,
		      struct kube_config **ret, char *err, size_t errlen);
/* In-cluster configuration from the environment and sa_dir (NULL: KUBE_SA_DIR). */
int kube_config_in_cluster(const char *sa_dir, struct kube_config **ret, char *err, size_t errlen);
void kube_config_free(struct kube_config *c);

/* Whether a bearer token can go into an Authorization header: 0, or -EBADMSG when it holds a
 * control character (any byte below 0x20, CR, LF and TAB included, or DEL). */
int kube_token_check(const char *token);
/* Reads a token file: whitespace around the token is dropped; -ENODATA when it is empty,
 * -EBADMSG when what is left holds a control character or the file a NUL (kube_token_check). */
int kube_read_token_file(const char *path, char **ret);
/* A kubeconfig's base64 (base64_decode: standard alphabet, padding optional, white space
 * ignored). */
int kube_base64_decode(const char *s, size_t len, char **ret, size_t *ret_len);
/* Reads a whole regular file of at most max bytes (NUL-terminated); -EFBIG when larger,
 * -EINVAL for a device or a FIFO. */
int kube_read_file(const char *path, size_t max, char **ret, size_t *ret_len);

static inline void kube_config_freep(struct kube_config **c)
{
	kube_config_free(*c);
}
#define _cleanup_kube_config_ __attribute__((cleanup(kube_config_freep)))
