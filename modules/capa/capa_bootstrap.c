/* Bootstrap data as CAPA stores it: gzip, Secrets Manager chunks, the boothook user data. */
#include <errno.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <string.h>
#include <zlib.h>

#include "common/aws/ids.h"
#include "modules/capa/capa_bootstrap.h"

int capa_gzip(const void *data, size_t len, struct buf *out)
{
	if (len > CAPA_BOOTSTRAP_MAX)
		return -E2BIG;
	z_stream z = { 0 };
	/* windowBits 15 + 16: a gzip wrapper; zlib writes mtime 0 and no name by default */
	if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	gz_header h = { .os = 3 };
	deflateSetHeader(&z, &h);
	uLong bound = deflateBound(&z, (uLong)len) + 32;
	int r = buf_reserve(out, bound);
	if (r < 0) {
		deflateEnd(&z);
		return r;
	}
	z.next_in = (Bytef *)(uintptr_t)data;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out->data + out->len;
	z.avail_out = (uInt)bound;
	int zr = deflate(&z, Z_FINISH);
	if (zr != Z_STREAM_END) {
		deflateEnd(&z);
		return -EIO;
	}
	out->len += z.total_out;
	out->data[out->len] = 0;
	deflateEnd(&z);
	return 0;
}

int capa_gunzip(const void *data, size_t len, size_t max, struct buf *out)
{
	z_stream z = { 0 };
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)(uintptr_t)data;
	z.avail_in = (uInt)len;
	size_t start = out->len;
	int r = 0;
	for (;;) {
		if ((r = buf_reserve(out, 16384)) < 0)
			break;
		z.next_out = (Bytef *)out->data + out->len;
		z.avail_out = 16384;
		int zr = inflate(&z, Z_NO_FLUSH);
		out->len += 16384 - z.avail_out;
		if (out->len - start > max) {
			r = -E2BIG;
			break;
		}
		if (zr == Z_STREAM_END) {
			r = z.avail_in ? -EBADMSG : 0;
			break;
		}
		if (zr != Z_OK || (z.avail_in == 0 && z.avail_out != 0)) {
			r = -EBADMSG;
			break;
		}
	}
	inflateEnd(&z);
	if (r < 0)
		out->len = start;
	if (out->data)
		out->data[out->len] = 0;
	return r;
}

static bool uuid_valid(const char *s)
{
	static const int dash[] = { 8, 13, 18, 23 };
	if (!s || strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		bool want_dash = i == dash[0] || i == dash[1] || i == dash[2] || i == dash[3];
		char c = s[i];
		if (want_dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return true;
}

int capa_secret_prefix(const char *uid, char *out, size_t n)
{
	if (!uuid_valid(uid))
		return -EINVAL;
	return str_printf(out, n, "%s/%s", CAPA_SECRET_ENTRY_PREFIX, uid);
}

int capa_secret_prefix_check(const char *prefix)
{
	size_t len = prefix ? strlen(prefix) : 0;
	if (len == 0 || len > 400)
		return -EINVAL;
	for (const char *p = prefix; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      strchr("/_+=.@-", *p)))
			return -EINVAL;
	return 0;
}

int capa_secret_name(const char *prefix, unsigned i, char *out, size_t n)
{
	return str_printf(out, n, "%s-%u", prefix, i);
}

unsigned capa_secret_chunks(size_t gz_len)
{
	if (gz_len == 0)
		return 1;
	return (unsigned)((gz_len + CAPA_SECRET_CHUNK - 1) / CAPA_SECRET_CHUNK);
}

int capa_mime_boundary(const char *prefix, char out[61])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	static const char hex[] = "0123456789abcdef";
	SHA256((const unsigned char *)prefix, strlen(prefix), md);
	for (int i = 0; i < 30; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[60] = 0;
	return 0;
}

/* An endpoint URL goes into the script unquoted by the aws CLI's word splitting: only URL
 * characters, no quote, dollar, backquote, backslash or space. */
static bool endpoint_safe(const char *e)
{
	if (!str_has_prefix(e, "https://") && !str_has_prefix(e, "http://"))
		return false;
	if (strlen(e) > 400)
		return false;
	for (const char *p = e; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      strchr(":/._-[]%", *p)))
			return false;
	return true;
}

/* The boothook: what CAPA's secret fetch script does, step for step (same variables, same
 * files, same retries), in our own words. */
static const char boothook_head[] = "#cloud-boothook\n"
				    "#!/bin/bash\n"
				    "# aws-k8s capa: fetch this machine's bootstrap data from AWS Secrets "
				    "Manager, delete it there, restart cloud-init.\n"
				    "set -o errexit\n"
				    "set -o nounset\n"
				    "set -o pipefail\n"
				    "umask 006\n"
				    "\n";

static const char boothook_body[] =
    "FILE=\"/etc/secret-userdata.txt\"\n"
    "FINAL_INDEX=$((CHUNKS - 1))\n"
    "MAX_RETRIES=10\n"
    "RETRY_DELAY=10 # in seconds\n"
    "\n"
    "info() { echo \"+++ [$(date --iso-8601=seconds)] $*\"; }\n"
    "error() { echo \"!!! [$(date --iso-8601=seconds)] $*\" >&2; }\n"
    "finish() { info \"aws.cluster.x-k8s.io encrypted cloud-init script $0 finished\"; exit 0; }\n"
    "fail() {\n"
    "  error \"$1\"\n"
    "  error \"aws.cluster.x-k8s.io encrypted cloud-init script $0 exiting with status $2\"\n"
    "  exit \"$2\"\n"
    "}\n"
    "\n"
    "# Runs one aws CLI call with errexit off; prints its output on failure.\n"
    "sm() {\n"
    "  local out rc\n"
    "  set +o errexit +o nounset +o pipefail\n"
    "  out=$(aws secretsmanager ${ENDPOINT} --region \"${REGION}\" \"$@\" 2>&1)\n"
    "  rc=$?\n"
    "  set -o errexit -o nounset -o pipefail\n"
    "  if [ \"${rc}\" -ne 0 ]; then\n"
    "    error \"AWS CLI exited with ${rc} for secretsmanager $1: ${out//[$'\\t\\r\\n']/}\"\n"
    "    return 1\n"
    "  fi\n"
    "  SM_OUT=\"${out}\"\n"
    "}\n"
    "\n"
    "with_retries() {\n"
    "  local try\n"
    "  for try in $(seq 1 \"${MAX_RETRIES}\"); do\n"
    "    if \"$@\"; then return 0; fi\n"
    "    info \"retrying in ${RETRY_DELAY} seconds (attempt ${try} of ${MAX_RETRIES})\"\n"
    "    sleep \"${RETRY_DELAY}\"\n"
    "  done\n"
    "  return 1\n"
    "}\n"
    "\n"
    "fetch_chunk() {\n"
    "  sm get-secret-value --output text --query SecretBinary --secret-id "
    "\"${SECRET_PREFIX}-$1\" || return 1\n"
    "  echo \"${SM_OUT}\" | base64 -d >>\"${FILE}.gz\"\n"
    "}\n"
    "\n"
    "delete_chunk() {\n"
    "  sm delete-secret --force-delete-without-recovery --secret-id \"${SECRET_PREFIX}-$1\"\n"
    "}\n"
    "\n"
    "info \"aws.cluster.x-k8s.io encrypted cloud-init script $0 started\"\n"
    "info \"secret prefix: ${SECRET_PREFIX}\"\n"
    "info \"secret count: ${CHUNKS}\"\n"
    "if test -f \"${FILE}\"; then\n"
    "  info \"encrypted userdata already written to disk\"\n"
    "  finish\n"
    "fi\n"
    "rm -f \"${FILE}.gz\"\n"
    "for i in $(seq 0 \"${FINAL_INDEX}\"); do\n"
    "  with_retries fetch_chunk \"${i}\" || error \"could not get secret ${i} after ${MAX_RETRIES} "
    "attempts\"\n"
    "done\n"
    "for i in $(seq 0 \"${FINAL_INDEX}\"); do\n"
    "  with_retries delete_chunk \"${i}\" || fail \"could not delete secret ${i}\" 1\n"
    "done\n"
    "info \"decompressing userdata to ${FILE}\"\n"
    "gunzip \"${FILE}.gz\" || fail \"could not unzip data\" 4\n"
    "info \"restarting cloud-init\"\n"
    "systemctl restart cloud-init\n"
    "finish\n";

int capa_boothook_userdata(const char *prefix, unsigned chunks, const char *region,
			   const char *endpoint, struct buf *out)
{
	char boundary[61];
	if (capa_secret_prefix_check(prefix) < 0 || !aws_region_valid(region))
		return -EINVAL;
	if (chunks == 0 || chunks > CAPA_SECRET_MAX_CHUNKS)
		return -EINVAL;
	if (endpoint && *endpoint && !endpoint_safe(endpoint))
		return -EINVAL;
	capa_mime_boundary(prefix, boundary);
	size_t start = out->len;
	int r = buf_printf(out, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"%s\"\n\n\n",
			   boundary);
	/* the parts as Go's mime/multipart writes them: CRLF line ends around the headers */
	if (r >= 0)
		r = buf_printf(out, "--%s\r\nContent-Type: text/cloud-boothook\r\n\r\n", boundary);
	if (r >= 0)
		r = buf_puts(out, boothook_head);
	if (r >= 0)
		r = buf_printf(out, "REGION=\"%s\"\nENDPOINT=\"%s%s\"\nSECRET_PREFIX=\"%s\"\nCHUNKS=\"%u\"\n",
			       region, endpoint && *endpoint ? "--endpoint-url " : "",
			       endpoint ? endpoint : "", prefix, chunks);
	if (r >= 0)
		r = buf_puts(out, boothook_body);
	if (r >= 0)
		r = buf_printf(out, "\r\n--%s\r\nContent-Type: text/x-include-url\r\n\r\n", boundary);
	if (r >= 0)
		r = buf_puts(out, "file:///etc/secret-userdata.txt\n");
	if (r >= 0)
		r = buf_printf(out, "\r\n--%s--\r\n", boundary);
	if (r < 0)
		out->len = start;
	return r;
}
