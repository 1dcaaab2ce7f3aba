/* Bootstrap data as Cluster API Provider AWS hands it to an instance (reference capa.md §10).
 *
 * The Machine's bootstrap Secret (key "value") is gzipped. With the Secrets Manager backend
 * (the default) the gzip bytes are cut into chunks of CAPA_SECRET_CHUNK bytes, each stored as
 * the SecretBinary of a secret named "<prefix>-<i>", prefix "aws.cluster.x-k8s.io/<uuid>", and
 * the instance's user data is a MIME multipart/mixed document: a text/cloud-boothook bash
 * script that fetches the chunks into /etc/secret-userdata.txt.gz (10 tries 10 s apart),
 * force-deletes them, gunzips and restarts cloud-init, then a text/x-include-url part naming
 * file:///etc/secret-userdata.txt. With spec.cloudInit.insecureSkipSecretsManager the user
 * data is the gzipped data itself.
 *
 * Everything here is pure and deterministic (the same input gives the same bytes, so that a
 * RunInstances retried with the same client token carries the same user data): the gzip header
 * has no time stamp and the MIME boundary is derived from the prefix. Nothing logs. */
#pragma once
#include <stddef.h>

#include "common/base/buf.h"

#define CAPA_SECRET_CHUNK 7000		    /* raw gzip bytes per secret, as CAPA */
#define CAPA_SECRET_ENTRY_PREFIX "aws.cluster.x-k8s.io"
#define CAPA_BOOTSTRAP_MAX (4u << 20)	    /* cap on the bootstrap data before gzip */
#define CAPA_SECRET_MAX_CHUNKS 64	    /* cap on the chunks of one machine (448 KB of gzip) */
#define CAPA_SECRET_NAME_MAX 512

/* gzip (RFC 1952) of len bytes into out (appended), best compression, mtime 0, OS "unix".
 * -E2BIG over CAPA_BOOTSTRAP_MAX, -ENOMEM, -EIO on a zlib failure. */
int capa_gzip(const void *data, size_t len, struct buf *out);
/* The reverse (tests, and reading a chunk set back); -EBADMSG for bad data, -E2BIG past max. */
int capa_gunzip(const void *data, size_t len, size_t max, struct buf *out);

/* "aws.cluster.x-k8s.io/<uuid>" into out: the uuid is the AWSMachine's UID (a lowercase
 * 8-4-4-4-12 hex UUID, checked: -EINVAL otherwise), so that a controller restarted between
 * storing the chunks and recording the prefix finds the same names. */
int capa_secret_prefix(const char *uid, char *out, size_t n);
/* True when prefix may name a secret and sit in the boothook's double quotes: 1 to 400 of
 * A-Z a-z 0-9 / _ + = . @ - (the characters Secrets Manager allows in a name). */
int capa_secret_prefix_check(const char *prefix);
/* "<prefix>-<i>". */
int capa_secret_name(const char *prefix, unsigned i, char *out, size_t n);
/* Chunks for gz_len bytes of gzip: ceil(gz_len / CAPA_SECRET_CHUNK), at least 1. */
unsigned capa_secret_chunks(size_t gz_len);

/* The user data of the Secrets Manager backend (not yet base64-encoded), appended to out.
 * endpoint is the Secrets Manager URL the instance must use (NULL or "" for AWS's own): it is
 * passed to the aws CLI as --endpoint-url, as CAPA does with a custom endpoint. -EINVAL for a
 * prefix, region or endpoint that could break out of the script's quotes, chunks 0 or over
 * CAPA_SECRET_MAX_CHUNKS. */
int capa_boothook_userdata(const char *prefix, unsigned chunks, const char *region,
			   const char *endpoint, struct buf *out);
/* The MIME boundary used for prefix: 60 lowercase hex characters (as Go's multipart writer
 * makes them), from SHA-256 of the prefix. */
int capa_mime_boundary(const char *prefix, char out[61]);
