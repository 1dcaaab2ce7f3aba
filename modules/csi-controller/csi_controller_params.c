/* CreateVolume parameters, sizes, IOPS, zones, tags and client tokens: pure functions. */
#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/ids.h"
#include "common/base/buf.h"
#include "common/base/log.h"
#include "modules/csi-controller/csi_controller_internal.h"
#include "modules/csi-controller/csi_controller_tagtpl.h"

#define MAX_PARAM_KV 256 /* tags or context entries the parameters may give */

/* AWS's documented limits (the most permissive current ones, so that nothing AWS accepts is
 * refused here): sizes in GiB, IOPS, throughput in MiB/s. */
static const struct csi_vol_type vol_types[] = {
    {"gp3", 1, 65536, true, false, 3000, 80000, 500, true, 125, 2000, 0.25, false},
    {"gp2", 1, 16384, false, false, 0, 0, 0, false, 0, 0, 0, false},
    {"io1", 4, 16384, true, true, 100, 64000, 50, false, 0, 0, 0, true},
    {"io2", 4, 65536, true, true, 100, 256000, 1000, false, 0, 0, 0, true},
    {"st1", 125, 16384, false, false, 0, 0, 0, false, 0, 0, 0, false},
    {"sc1", 125, 16384, false, false, 0, 0, 0, false, 0, 0, 0, false},
    {"standard", 1, 1024, false, false, 0, 0, 0, false, 0, 0, 0, false},
};

const struct csi_vol_type *csi_vol_type_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(vol_types); i++)
		if (name && strcasecmp(vol_types[i].name, name) == 0)
			return &vol_types[i];
	return NULL;
}

void csi_vol_params_release(struct csi_vol_params *p)
{
	if (!p)
		return;
	free(p->kms_key);
	free(p->fstype);
	free(p->outpost_arn);
	csi_kv_free(p->ctx, p->n_ctx);
	csi_kv_free(p->tags, p->n_tags);
	memset(p, 0, sizeof(*p));
}

static int bad(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool positive_decimal(const char *s)
{
	if (!s || !*s || strlen(s) > 12 || *s == '0')
		return false;
	for (const char *p = s; *p; p++)
		if (!isdigit((unsigned char)*p))
			return false;
	return true;
}

static int parse_pos_int(const char *key, const char *v, long long *ret, char *err, size_t n)
{
	if (str_to_ll(v, 1, 1LL << 40, ret) < 0)
		return bad(err, n, "could not parse %s (%s): want a positive integer", key, v);
	return 0;
}

static int parse_bool(const char *key, const char *v, bool *ret, char *err, size_t n)
{
	if (strcasecmp(v, "true") == 0)
		*ret = true;
	else if (strcasecmp(v, "false") == 0)
		*ret = false;
	else
		return bad(err, n, "could not parse %s (%s): want true or false", key, v);
	return 0;
}

/* Format options: the volume-context key, and which file systems take it (as the node
 * checks them). */
static const struct {
	const char *key;
	bool ext, ext4_only, xfs, boolean;
} fmt_opts[] = {
    {"blockSize", true, false, true, false},
    {"inodeSize", true, false, true, false},
    {"bytesPerInode", true, false, false, false},
    {"numberOfInodes", true, false, false, false},
    {"ext4ClusterSize", true, true, false, false},
    {"ext4BigAlloc", true, true, false, true},
    {"ext4EncryptionSupport", true, true, false, true},
};

static const char *const fs_types[] = {"ext2", "ext3", "ext4", "xfs", "ntfs"};

/* Known keys, lower-cased. */
enum pkey {
	PK_TYPE,
	PK_IOPS_PER_GB,
	PK_AUTO_IOPS,
	PK_AUTO_IOPS_MODIFY,
	PK_IOPS,
	PK_THROUGHPUT,
	PK_ENCRYPTED,
	PK_KMS,
	PK_FSTYPE,
	PK_FSTYPE_LEGACY,
	PK_BLOCK_EXPRESS,
	PK_INIT_RATE,
	PK_BLOCK_ATTACH_INIT,
	PK_OUTPOST,
	PK_PVC_NAME,
	PK_PVC_NS,
	PK_PV_NAME,
	PK__MAX
};
static const char *const pkeys[PK__MAX] = {
    [PK_TYPE] = "type",
    [PK_IOPS_PER_GB] = "iopspergb",
    [PK_AUTO_IOPS] = "allowautoiopspergbincrease",
    [PK_AUTO_IOPS_MODIFY] = "allowautoiopsincreaseonmodify",
    [PK_IOPS] = "iops",
    [PK_THROUGHPUT] = "throughput",
    [PK_ENCRYPTED] = "encrypted",
    [PK_KMS] = "kmskeyid",
    [PK_FSTYPE] = "csi.storage.k8s.io/fstype",
    [PK_FSTYPE_LEGACY] = "fstype",
    [PK_BLOCK_EXPRESS] = "blockexpress",
    [PK_INIT_RATE] = "volumeinitializationrate",
    [PK_BLOCK_ATTACH_INIT] = "blockattachuntilinitialized",
    [PK_OUTPOST] = "outpostarn",
    [PK_PVC_NAME] = "csi.storage.k8s.io/pvc/name",
    [PK_PVC_NS] = "csi.storage.k8s.io/pvc/namespace",
    [PK_PV_NAME] = "csi.storage.k8s.io/pv/name",
};

int csi_tag_check(const char *key, const char *value, char *err, size_t errlen)
{
	size_t kl = strlen(key), vl = strlen(value);

	if (kl == 0 || kl > 128)
		return bad(err, errlen, "tag key \"%.40s\" must have 1 to 128 characters", key);
	if (vl > 256)
		return bad(err, errlen, "the value of tag \"%.40s\" has more than 256 characters",
			   key);
	/* upstream's validateExtraTags: the driver's own keys and two prefixes are reserved */
	if (strcmp(key, "CSIVolumeName") == 0 || strcmp(key, "CSIVolumeSnapshotName") == 0 ||
	    strcmp(key, "ebs.csi.aws.com/cluster") == 0)
		return bad(err, errlen, "tag key \"%s\" is reserved", key);
	if (strncmp(key, "kubernetes.io", 13) == 0)
		return bad(err, errlen, "tag key \"%.40s\": the kubernetes.io prefix is reserved", key);
	if (strncmp(key, "aws:", 4) == 0)
		return bad(err, errlen, "tag key \"%.40s\": the aws: prefix is reserved", key);
	return 0;
}

/* What parsing the parameters of one CreateVolume holds. */
struct parse {
	struct csi_vol_params p;
	const char *pvc, *ns, *pv; /* for tag templates */
	const struct csi_tag_opts *o;
	char *err;
	size_t errlen;
};

/* The number and boolean parameters; 1 when which is none of them. */
static int param_value(struct parse *ps, int which, const char *k, const char *v)
{
	struct csi_vol_params *p = &ps->p;
	bool b = false;

	switch (which) {
	case PK_TYPE: {
		const struct csi_vol_type *t = csi_vol_type_find(v);
		if (!t)
			return bad(ps->err, ps->errlen,
				   "unknown volume type \"%s\" (want gp3, gp2, io1, io2, st1, "
				   "sc1 or standard)",
				   v);
		str_copy(p->type, sizeof(p->type), t->name);
		return 0;
	}
	case PK_IOPS_PER_GB:
		p->iops_per_gb_set = true;
		return parse_pos_int(k, v, &p->iops_per_gb, ps->err, ps->errlen);
	case PK_AUTO_IOPS:
		return parse_bool(k, v, &p->auto_iops, ps->err, ps->errlen);
	case PK_AUTO_IOPS_MODIFY:
		return parse_bool(k, v, &p->auto_iops_on_modify, ps->err, ps->errlen);
	case PK_IOPS:
		p->iops_set = true;
		return parse_pos_int(k, v, &p->iops, ps->err, ps->errlen);
	case PK_THROUGHPUT:
		p->throughput_set = true;
		return parse_pos_int(k, v, &p->throughput, ps->err, ps->errlen);
	case PK_ENCRYPTED:
		return parse_bool(k, v, &p->encrypted, ps->err, ps->errlen);
	case PK_BLOCK_EXPRESS:
		log_warn("the blockExpress parameter is deprecated and has no effect");
		return 0;
	case PK_INIT_RATE:
		p->init_rate_set = true;
		if (str_to_ll(v, 100, 300, &p->init_rate) < 0)
			return bad(ps->err, ps->errlen,
				   "volumeInitializationRate (%s) must be 100 to 300 (MiB/s)", v);
		return 0;
	case PK_BLOCK_ATTACH_INIT:
		return parse_bool(k, v, &b, ps->err, ps->errlen);
	default:
		return 1;
	}
}

/* Replaces *dst with a copy of v. */
static int set_str(char **dst, const char *v)
{
	free(*dst);
	return (*dst = strdup(v)) ? 0 : -ENOMEM;
}

/* The string parameters and the tags the external-provisioner passes. */
static int param_string(struct parse *ps, int which, const char *v)
{
	struct csi_vol_params *p = &ps->p;
	bool known = false;
	char esc[96];
	int r;

	switch (which) {
	case PK_KMS:
		return *v ? set_str(&p->kms_key, v) : 0;
	case PK_FSTYPE:
	case PK_FSTYPE_LEGACY:
		for (size_t f = 0; f < ARRAY_SIZE(fs_types); f++)
			known |= strcasecmp(v, fs_types[f]) == 0;
		if (!known)
			return bad(ps->err, ps->errlen,
				   "unsupported fstype \"%s\" (want ext2, ext3, ext4, xfs or ntfs)",
				   v);
		if (which == PK_FSTYPE_LEGACY)
			log_warn("the \"fstype\" parameter is deprecated, use "
				 "csi.storage.k8s.io/fstype");
		if ((r = set_str(&p->fstype, v)) < 0)
			return r;
		for (char *c = p->fstype; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		return 0;
	case PK_OUTPOST:
		if (!aws_outpost_arn_valid(v))
			return bad(ps->err, ps->errlen,
				   "outpostArn \"%s\" is malformed (want "
				   "arn:aws:outposts:<region>:<account>:outpost/op-<id>)",
				   aws_value_escape(v, esc, sizeof(esc)));
		return set_str(&p->outpost_arn, v);
	case PK_PVC_NAME:
		return csi_kv_set(&p->tags, &p->n_tags, MAX_PARAM_KV,
				  "kubernetes.io/created-for/pvc/name", v);
	case PK_PVC_NS:
		return csi_kv_set(&p->tags, &p->n_tags, MAX_PARAM_KV,
				  "kubernetes.io/created-for/pvc/namespace", v);
	case PK_PV_NAME:
		return csi_kv_set(&p->tags, &p->n_tags, MAX_PARAM_KV,
				  "kubernetes.io/created-for/pv/name", v);
	default:
		return 1;
	}
}

/* A tagSpecification_N parameter: "key=value", the value a template of the PV's names. */
static int param_tag(struct parse *ps, const char *k, const char *v)
{
	const char *const values[] = {ps->pvc, ps->ns, ps->pv};
	const struct csi_tagtpl_props props = {CSI_TAGTPL_PV_TYPE, csi_tagtpl_pv_fields, values, 3};
	char *val = NULL, tagerr[512];
	const char *eq = strchr(v, '=');
	int r;

	/* as upstream: the pair is split first (no "=" is an error even with
	 * --warn-on-invalid-tag), then only the value is a template */
	if (!eq)
		return bad(ps->err, ps->errlen, "invalid tag: %s: \"%s\" is not key=value", k, v);
	_cleanup_free_ char *key = strndup(v, (size_t)(eq - v));
	if (!key)
		return -ENOMEM;
	r = csi_tagtpl_expand(k, eq + 1, &props, &val, tagerr, sizeof(tagerr));
	if (r == -ENOMEM)
		return r;
	if (r == 0 && csi_tag_check(key, val, tagerr, sizeof(tagerr)) == 0) {
		r = csi_kv_set(&ps->p.tags, &ps->p.n_tags, MAX_PARAM_KV, key, val);
		free(val);
		return r;
	}
	free(val);
	if (ps->o && ps->o->warn_on_invalid_tag) {
		log_warn("skipping an invalid tag", KV_S("problem", tagerr));
		return 0;
	}
	return bad(ps->err, ps->errlen, "invalid tag: %s", tagerr);
}

/* One parameter: a known key, a format option, a tag, or an external-provisioner key. */
static int param(struct parse *ps, const char *k, const char *v)
{
	int which = -1, r;

	for (int j = 0; j < PK__MAX; j++)
		if (strcasecmp(k, pkeys[j]) == 0)
			which = j;
	if (which >= 0 && (r = param_value(ps, which, k, v)) != 1)
		return r;
	if (which >= 0)
		return param_string(ps, which, v);
	for (size_t f = 0; f < ARRAY_SIZE(fmt_opts); f++)
		if (strcasecmp(k, fmt_opts[f].key) == 0)
			return csi_kv_set(&ps->p.ctx, &ps->p.n_ctx, MAX_PARAM_KV, fmt_opts[f].key,
					  v);
	if (strncasecmp(k, "tagSpecification", 16) == 0)
		return param_tag(ps, k, v);
	/* The external-provisioner's own keys (secrets are stripped before us). */
	if (strncasecmp(k, "csi.storage.k8s.io/", 19) == 0)
		return 0;
	return bad(ps->err, ps->errlen, "invalid parameter key %s for CreateVolume", k);
}

/* The format options against the file system (ext4 when none is given, as the node does). */
static int check_format_opts(struct parse *ps)
{
	const struct csi_vol_params *p = &ps->p;
	const char *fs = p->fstype ? p->fstype : "ext4";
	bool ext = strncmp(fs, "ext", 3) == 0, xfs = strcmp(fs, "xfs") == 0;
	bool bigalloc = false, has_cluster = false, b;
	int r;

	for (size_t i = 0; i < p->n_ctx; i++) {
		for (size_t f = 0; f < ARRAY_SIZE(fmt_opts); f++) {
			const char *key = fmt_opts[f].key, *v = p->ctx[i].value;
			if (strcmp(p->ctx[i].key, key) != 0)
				continue;
			if (!(ext && fmt_opts[f].ext &&
			      (!fmt_opts[f].ext4_only || strcmp(fs, "ext4") == 0)) &&
			    !(xfs && fmt_opts[f].xfs))
				return bad(ps->err, ps->errlen, "%s is not supported for fstype %s",
					   key, fs);
			if (fmt_opts[f].boolean) {
				b = false;
				if ((r = parse_bool(key, v, &b, ps->err, ps->errlen)) < 0)
					return r;
				if (strcmp(key, "ext4BigAlloc") == 0)
					bigalloc = b;
			} else if (!positive_decimal(v)) {
				return bad(
				    ps->err, ps->errlen,
				    "could not parse %s (%s): want a positive decimal number", key,
				    v);
			}
			if (strcmp(key, "ext4ClusterSize") == 0)
				has_cluster = true;
		}
	}
	if (has_cluster && !bigalloc)
		return bad(ps->err, ps->errlen, "ext4ClusterSize needs ext4BigAlloc=true");
	return 0;
}

int csi_vol_params_parse(const struct csi_kv *params, size_t n, const struct csi_tag_opts *o,
			 struct csi_vol_params *ret, char *err, size_t errlen)
{
	struct parse ps = {
	    .pvc = csi_kv_get(params, n, pkeys[PK_PVC_NAME]),
	    .ns = csi_kv_get(params, n, pkeys[PK_PVC_NS]),
	    .pv = csi_kv_get(params, n, pkeys[PK_PV_NAME]),
	    .o = o,
	    .err = err,
	    .errlen = errlen,
	};
	struct csi_vol_params *p = &ps.p;
	int r = 0;

	str_copy(p->type, sizeof(p->type), "gp3");
	for (size_t i = 0; i < n && r == 0; i++)
		r = param(&ps, params[i].key, params[i].value);
	if (r == 0 && p->iops_set && p->iops_per_gb_set)
		r = bad(err, errlen, "iops and iopsPerGB are mutually exclusive");
	if (p->kms_key)
		p->encrypted = true;
	if (r == 0)
		r = check_format_opts(&ps);
	if (r == 0 && p->fstype)
		r = csi_kv_set(&p->ctx, &p->n_ctx, MAX_PARAM_KV, "csi.storage.k8s.io/fstype",
			       p->fstype);
	if (r == 0) {
		*ret = *p;
		return 0;
	}
	csi_vol_params_release(p);
	if (r == -ENOMEM || r == -E2BIG)
		return bad(err, errlen, "%s",
			   r == -ENOMEM ? "out of memory" : "too many parameters");
	return -EINVAL;
}

enum csi_code csi_size_resolve(const struct csi_vol_type *t, bool has_range, long long required,
			       long long limit, long long min_gib, long long *ret_gib,
			       struct csi_error *err)
{
	long long gib;

	if (required < 0 || limit < 0) {
		return csi_error_set(
		    err, CSI_INVALID_ARGUMENT,
		    "capacity range: required_bytes and limit_bytes must not be negative");
	}
	if (limit && required > limit) {
		return csi_error_set(
		    err, CSI_INVALID_ARGUMENT,
		    "capacity range: required_bytes %lld is above limit_bytes %lld", required,
		    limit);
	}
	if (has_range && required > 0) {
		gib = required / GIB + (required % GIB != 0);
	} else {
		/* No size asked for: the source's size, or 100 GiB without a source; at least the
		 * type's minimum, within the limit. */
		gib = min_gib ? min_gib : 100;
		if (gib < t->min_gib)
			gib = t->min_gib;
		if (limit && gib * GIB > limit)
			gib = limit / GIB;
	}
	if (limit && gib * GIB > limit) {
		return csi_error_set(
		    err, CSI_OUT_OF_RANGE,
		    "capacity range: %lld bytes rounded up to whole GiB (%lld GiB) exceed "
		    "limit_bytes %lld",
		    required, gib, limit);
	}
	if (gib < t->min_gib || gib > t->max_gib) {
		return csi_error_set(err, CSI_OUT_OF_RANGE,
				     "%s volumes must be %lld to %lld GiB, not %lld GiB", t->name,
				     t->min_gib, t->max_gib, gib);
	}
	if (min_gib && gib < min_gib) {
		return csi_error_set(
		    err, CSI_OUT_OF_RANGE,
		    "the volume (%lld GiB) would be smaller than its source (%lld GiB)", gib,
		    min_gib);
	}
	*ret_gib = gib;
	return csi_error_ok(err);
}

int csi_iops_resolve(const struct csi_vol_type *t, const struct csi_vol_params *p, long long gib,
		     long long *ret_iops, char *err, size_t errlen)
{
	long long iops;

	if (!p->iops_set && !p->iops_per_gb_set) {
		if (t->iops_required)
			return bad(err, errlen, "%s volumes need the iops or iopsPerGB parameter",
				   t->name);
		*ret_iops = 0;
		return 0;
	}
	if (!t->iops_allowed)
		return bad(err, errlen, "%s volumes do not take iops or iopsPerGB", t->name);
	iops = p->iops_set ? p->iops : p->iops_per_gb * gib;
	long long ratio_max = t->iops_per_gib * gib;
	if (ratio_max < t->iops_min && !t->iops_required)
		ratio_max = t->iops_min; /* gp3: the 3000 baseline whatever the size */
	long long max = ratio_max < t->iops_max ? ratio_max : t->iops_max;
	if (iops > max)
		iops = max; /* capped, as upstream does */
	if (iops < t->iops_min) {
		if (p->auto_iops && p->iops_per_gb_set && max >= t->iops_min)
			iops = t->iops_min;
		else if (t->iops_min > max)
			return bad(
			    err, errlen,
			    "a %lld GiB %s volume cannot have %lld IOPS (%lld IOPS/GiB at most)",
			    gib, t->name, t->iops_min, t->iops_per_gib);
		else
			return bad(err, errlen, "%s volumes need at least %lld IOPS, not %lld%s",
				   t->name, t->iops_min, iops,
				   p->iops_per_gb_set
				       ? " (set allowAutoIOPSPerGBIncrease to raise it)"
				       : "");
	}
	*ret_iops = iops;
	return 0;
}

int csi_throughput_check(const struct csi_vol_type *t, long long tput, long long iops, char *err,
			 size_t errlen)
{
	if (!tput)
		return 0;
	if (!t->throughput_allowed)
		return bad(err, errlen, "%s volumes do not take a throughput", t->name);
	if (tput < t->tput_min || tput > t->tput_max)
		return bad(err, errlen, "%s throughput must be %lld to %lld MiB/s, not %lld",
			   t->name, t->tput_min, t->tput_max, tput);
	long long eff_iops = iops ? iops : t->iops_min;
	if (t->tput_per_iops > 0 && (double)tput > t->tput_per_iops * (double)eff_iops)
		return bad(err, errlen, "%lld MiB/s needs at least %lld IOPS (%.2f MiB/s per IOPS)",
			   tput, (long long)((double)tput / t->tput_per_iops + 0.999),
			   t->tput_per_iops);
	return 0;
}

static const char *segment(const struct csi_ctrl_topology *t, const char *key)
{
	for (size_t i = 0; i < t->n_segments; i++)
		if (t->segments[i].key && strcmp(t->segments[i].key, key) == 0 &&
		    t->segments[i].value && *t->segments[i].value)
			return t->segments[i].value;
	return NULL;
}

static const char *topo_zone(const struct csi_ctrl_topology *t)
{
	const char *z = segment(t, CSI_WELL_KNOWN_ZONE_KEY);
	return z ? z : segment(t, CSI_TOPOLOGY_ZONE_KEY);
}

const char *csi_pick_zone(const struct csi_ctrl_topology_req *req, const char **ret_zone_id)
{
	if (ret_zone_id)
		*ret_zone_id = NULL;
	if (!req)
		return NULL;
	for (size_t i = 0; i < req->n_preferred; i++)
		if (topo_zone(&req->preferred[i]))
			return topo_zone(&req->preferred[i]);
	for (size_t i = 0; i < req->n_requisite; i++)
		if (topo_zone(&req->requisite[i]))
			return topo_zone(&req->requisite[i]);
	if (ret_zone_id) {
		for (size_t i = 0; i < req->n_preferred && !*ret_zone_id; i++)
			*ret_zone_id = segment(&req->preferred[i], CSI_ZONE_ID_KEY);
		for (size_t i = 0; i < req->n_requisite && !*ret_zone_id; i++)
			*ret_zone_id = segment(&req->requisite[i], CSI_ZONE_ID_KEY);
	}
	return NULL;
}

bool csi_zone_allowed(const struct csi_ctrl_topology_req *req, const char *zone)
{
	bool any = false;

	if (!req)
		return true;
	for (size_t i = 0; i < req->n_requisite; i++) {
		const char *z = topo_zone(&req->requisite[i]);
		if (!z)
			continue;
		any = true;
		if (zone && strcmp(z, zone) == 0)
			return true;
	}
	return !any;
}

void csi_client_token(const char *name, const char *canonical, unsigned attempt, char ret[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char suffix[16] = "";

	if (attempt > 1)
		snprintf(suffix, sizeof(suffix), "#%u", attempt);
	if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1) {
		EVP_DigestUpdate(ctx, name, strlen(name));
		EVP_DigestUpdate(ctx, "\n", 1);
		EVP_DigestUpdate(ctx, canonical, strlen(canonical));
		EVP_DigestUpdate(ctx, suffix, strlen(suffix));
		EVP_DigestFinal_ex(ctx, md, &mdlen);
	}
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; i < 32; i++)
		snprintf(ret + 2 * i, 3, "%02x", i < mdlen ? md[i] : 0);
	ret[64] = 0;
}
