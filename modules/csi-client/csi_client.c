/* aws-k8s csi-client: calls any CSI v1 method on a plugin socket and prints the reply as JSON.
 *
 *   aws-k8s csi-client --endpoint unix:///tmp/csi.sock create-volume --name v1 --size 10Gi \
 *           --param type=gp3 --capability mount:ext4 --zone us-east-1a
 *   aws-k8s csi-client node-stage --volume vol-1 --staging-path /st --publish-context
 * devicePath=/dev/xvdaa aws-k8s csi-client call /csi.v1.Controller/ListVolumes --data
 * '{"max_entries": 2}'
 *
 * Each call's request is built as JSON from the flags, then encoded through the message
 * descriptors (common/grpc/pbjson.h), so `call --data` accepts exactly what the flags build.
 * A gRPC error prints "rpc error: code = <Code> desc = <message>" on stderr (as grpc-go does)
 * and exits 1; usage errors exit 2. */
#include "modules/csi-client/csi_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/csi/csi.pb-c.h"
#include "common/csi/plugin.h"
#include "common/csi/volume.h"
#include "common/grpc/client.h"
#include "common/grpc/pbjson.h"

static const char client_usage[] =
    "Calls a CSI plugin over its socket and prints the reply as JSON:\n\n"
    "  aws-k8s csi-client [--endpoint E] <call> [flags]\n\n"
    "Calls and their flags:\n"
    "%s\n"
    "  call PATH --data JSON           any method, request as JSON (proto field names)\n"
    "  call PATH --raw-hex HEX         any method, request as raw protobuf bytes\n\n"
    "Capabilities: --capability mount[:FSTYPE] | block (repeatable), with --access-mode\n"
    "(default SINGLE_NODE_WRITER), --mount-flags and --fs-group. Sizes take Kubernetes\n"
    "quantities (10Gi, 500M, bytes). Maps take key=value, repeated or comma-separated.\n"
    "--count N [--parallel P] repeats the call and prints the rate instead of the reply.";

/* ---- flags ---- */
static char *o_endpoint, *o_name, *o_volume, *o_node, *o_snapshot, *o_source_volume, *o_size,
    *o_limit, *o_staging, *o_target, *o_volume_path, *o_access_mode, *o_zone, *o_topo_key,
    *o_from_snapshot, *o_clone_of, *o_token, *o_data, *o_raw_hex, *o_fs_group;
static char **o_params, **o_mutable, **o_secrets, **o_vctx, **o_pctx, **o_caps, **o_mount_flags;
static long long o_max_entries, o_count, o_parallel;
static bool o_readonly, o_defaults;
static int64_t o_timeout;

static const struct flag common_flags[] = {
    {"endpoint", FLAG_STRING, &o_endpoint, CSI_ENDPOINT_DEFAULT, "CSI_ENDPOINT",
     "CSI endpoint of the plugin (unix:///path, /path or tcp://host:port)."},
    {"timeout", FLAG_DURATION, &o_timeout, "2m", NULL, "Deadline of each call."},
    {"count", FLAG_INT, &o_count, "1", NULL, "Make the call this many times and print the rate.", 1,
     100000000},
    {"parallel", FLAG_INT, &o_parallel, "1", NULL, "Calls in flight at once with --count.", 1,
     1024},
    {"print-defaults", FLAG_BOOL, &o_defaults, "false", NULL,
     "Print fields that hold their default value too."},
    LOG_FLAGS,
};

static const struct flag call_flags[] = {
    {"name", FLAG_STRING, &o_name, NULL, NULL, "Name of the volume or snapshot to create."},
    {"volume", FLAG_STRING, &o_volume, NULL, NULL, "Volume id."},
    {"node", FLAG_STRING, &o_node, NULL, NULL, "Node id."},
    {"snapshot", FLAG_STRING, &o_snapshot, NULL, NULL, "Snapshot id."},
    {"source-volume", FLAG_STRING, &o_source_volume, NULL, NULL, "Source volume id of a snapshot."},
    {"size", FLAG_STRING, &o_size, NULL, NULL, "Required bytes (capacity_range.required_bytes)."},
    {"limit", FLAG_STRING, &o_limit, NULL, NULL, "Limit bytes (capacity_range.limit_bytes)."},
    {"param", FLAG_MAP, &o_params, NULL, NULL, "Parameter key=value."},
    {"mutable-param", FLAG_MAP, &o_mutable, NULL, NULL, "Mutable parameter key=value."},
    {"secret", FLAG_MAP, &o_secrets, NULL, NULL, "Secret key=value."},
    {"volume-context", FLAG_MAP, &o_vctx, NULL, NULL, "Volume context key=value."},
    {"publish-context", FLAG_MAP, &o_pctx, NULL, NULL, "Publish context key=value."},
    {"capability", FLAG_STRLIST, &o_caps, NULL, NULL, "mount[:FSTYPE] or block (default mount)."},
    {"access-mode", FLAG_STRING, &o_access_mode, "SINGLE_NODE_WRITER", NULL,
     "Access mode of the capabilities."},
    {"mount-flags", FLAG_STRLIST, &o_mount_flags, NULL, NULL, "Mount flags of mount capabilities."},
    {"fs-group", FLAG_STRING, &o_fs_group, NULL, NULL, "volume_mount_group of mount capabilities."},
    {"zone", FLAG_STRING, &o_zone, NULL, NULL, "Zone for the accessibility requirements."},
    {"topology-key", FLAG_STRING, &o_topo_key, CSI_WELL_KNOWN_ZONE_KEY, NULL,
     "Topology key used with --zone."},
    {"from-snapshot", FLAG_STRING, &o_from_snapshot, NULL, NULL,
     "Create the volume from this snapshot."},
    {"clone-of", FLAG_STRING, &o_clone_of, NULL, NULL,
     "Create the volume as a clone of this volume."},
    {"staging-path", FLAG_STRING, &o_staging, NULL, NULL, "Staging target path."},
    {"target", FLAG_STRING, &o_target, NULL, NULL, "Target path."},
    {"volume-path", FLAG_STRING, &o_volume_path, NULL, NULL, "Volume path (stats, expand)."},
    {"readonly", FLAG_BOOL, &o_readonly, "false", NULL, "Publish read-only."},
    {"max-entries", FLAG_INT, &o_max_entries, "0", NULL, "Page size of a list call.", 0,
     2147483647},
    {"starting-token", FLAG_STRING, &o_token, NULL, NULL, "Paging token of a list call."},
    {"data", FLAG_STRING, &o_data, NULL, NULL, "Request as JSON (call)."},
    {"raw-hex", FLAG_STRING, &o_raw_hex, NULL, NULL, "Request as hex-encoded protobuf (call)."},
};

/* ---- request building ---- */

static int fail_usage(const char *what, const char *call)
{
	fprintf(stderr, "aws-k8s csi-client %s: %s\n", call, what);
	return -EINVAL;
}

static int put_map(cJSON *o, const char *field, char **kv)
{
	cJSON *m;

	if (!kv || !*kv)
		return 0;
	if (!(m = cJSON_AddObjectToObject(o, field)))
		return -ENOMEM;
	for (char **p = kv; *p; p++) {
		const char *eq = strchr(*p, '=');
		char key[512];
		size_t n = eq ? (size_t)(eq - *p) : strlen(*p);
		if (n >= sizeof(key))
			return -EINVAL;
		memcpy(key, *p, n);
		key[n] = 0;
		cJSON_DeleteItemFromObject(m, key);
		if (!cJSON_AddStringToObject(m, key, eq ? eq + 1 : ""))
			return -ENOMEM;
	}
	return 0;
}

static int put_str(cJSON *o, const char *field, const char *v)
{
	if (!v)
		return 0;
	return cJSON_AddStringToObject(o, field, v) ? 0 : -ENOMEM;
}

static int put_size(cJSON *o, const char *call)
{
	long long req = 0, lim = 0;
	cJSON *cr;

	if (!o_size && !o_limit)
		return 0;
	if (o_size && csi_parse_size(o_size, &req) < 0)
		return fail_usage("--size is not a size (10Gi, 500M, bytes)", call);
	if (o_limit && csi_parse_size(o_limit, &lim) < 0)
		return fail_usage("--limit is not a size (10Gi, 500M, bytes)", call);
	if (!(cr = cJSON_AddObjectToObject(o, "capacity_range")))
		return -ENOMEM;
	if (req)
		cJSON_AddNumberToObject(cr, "required_bytes", (double)req);
	if (lim)
		cJSON_AddNumberToObject(cr, "limit_bytes", (double)lim);
	return 0;
}

static cJSON *capability_json(const char *spec, const char *call)
{
	cJSON *c = cJSON_CreateObject(), *am;

	if (!c)
		return NULL;
	if (strcmp(spec, "block") == 0) {
		cJSON_AddObjectToObject(c, "block");
	} else if (strcmp(spec, "mount") == 0 || str_has_prefix(spec, "mount:")) {
		cJSON *m = cJSON_AddObjectToObject(c, "mount");
		if (spec[5] == ':' && spec[6])
			cJSON_AddStringToObject(m, "fs_type", spec + 6);
		if (o_mount_flags && *o_mount_flags) {
			cJSON *fl = cJSON_AddArrayToObject(m, "mount_flags");
			for (char **p = o_mount_flags; *p; p++)
				cJSON_AddItemToArray(fl, cJSON_CreateString(*p));
		}
		if (o_fs_group)
			cJSON_AddStringToObject(m, "volume_mount_group", o_fs_group);
	} else {
		cJSON_Delete(c);
		fail_usage("--capability must be block, mount or mount:FSTYPE", call);
		return NULL;
	}
	am = cJSON_AddObjectToObject(c, "access_mode");
	cJSON_AddStringToObject(am, "mode", o_access_mode);
	return c;
}

/* field: "volume_capabilities" (repeated) or "volume_capability" (single) */
static int put_caps(cJSON *o, const char *field, bool repeated, const char *call)
{
	static char *def_caps[] = {(char *)"mount", NULL};
	char **caps = o_caps && *o_caps ? o_caps : def_caps;
	cJSON *arr = NULL;

	if (repeated && !(arr = cJSON_AddArrayToObject(o, field)))
		return -ENOMEM;
	for (char **p = caps; *p; p++) {
		cJSON *c = capability_json(*p, call);
		if (!c)
			return -EINVAL;
		if (!repeated) {
			cJSON_AddItemToObject(o, field, c);
			if (p[1])
				return fail_usage("this call takes one --capability", call);
			return 0;
		}
		cJSON_AddItemToArray(arr, c);
	}
	return 0;
}

/* The request fields the flags fill, by proto field name. */
enum field_kind { F_STR, F_MAP, F_SIZE, F_CAPS, F_CAP, F_READONLY, F_MAX_ENTRIES };

static const struct req_field {
	const char *name;
	enum field_kind kind;
	char **str, **alt;   /* F_STR: the flag, and the one used when it is not given */
	char ***map;	     /* F_MAP */
	const char *missing; /* the usage error when the call requires the field */
} req_fields[] = {
    {"name", F_STR, &o_name, NULL, NULL, "--name is required"},
    {"volume_id", F_STR, &o_volume, NULL, NULL, "--volume is required"},
    {"node_id", F_STR, &o_node, NULL, NULL, "--node is required"},
    {"snapshot_id", F_STR, &o_snapshot, NULL, NULL, "--snapshot is required"},
    {"source_volume_id", F_STR, &o_source_volume, &o_volume, NULL,
     "--source-volume (or --volume) is required"},
    {"staging_target_path", F_STR, &o_staging, NULL, NULL, "--staging-path is required"},
    {"target_path", F_STR, &o_target, NULL, NULL, "--target is required"},
    {"volume_path", F_STR, &o_volume_path, &o_target, NULL, "--volume-path is required"},
    {"starting_token", F_STR, &o_token},
    {"capacity_range", F_SIZE, &o_size, NULL, NULL, "--size is required"},
    {"parameters", F_MAP, NULL, NULL, &o_params},
    {"mutable_parameters", F_MAP, NULL, NULL, &o_mutable},
    {"secrets", F_MAP, NULL, NULL, &o_secrets},
    {"volume_context", F_MAP, NULL, NULL, &o_vctx},
    {"publish_context", F_MAP, NULL, NULL, &o_pctx},
    {"volume_capabilities", F_CAPS},
    {"volume_capability", F_CAP},
    {"readonly", F_READONLY},
    {"max_entries", F_MAX_ENTRIES},
};

static int put_field(cJSON *o, const struct req_field *f, char mark, const char *call)
{
	const char *v = f->str ? (*f->str ? *f->str : f->alt ? *f->alt : NULL) : NULL;

	if (mark == '!' && f->str && !v)
		return fail_usage(f->missing, call);
	switch (f->kind) {
	case F_STR:
		return put_str(o, f->name, v);
	case F_MAP:
		return put_map(o, f->name, *f->map);
	case F_SIZE:
		return put_size(o, call);
	case F_CAPS:
		return put_caps(o, f->name, true, call);
	case F_CAP:
		if (mark == '?' && !(o_caps && *o_caps))
			return 0;
		return put_caps(o, f->name, false, call);
	case F_READONLY:
		if (o_readonly)
			cJSON_AddBoolToObject(o, f->name, true);
		return 0;
	case F_MAX_ENTRIES:
		if (o_max_entries)
			cJSON_AddNumberToObject(o, f->name, (double)o_max_entries);
		return 0;
	}
	return -EINVAL;
}

/* Fills the fields of a comma-separated list, in its order: "volume_id!" fails when the flag
 * is missing, "volume_capability?" is sent only when --capability is given (else the default
 * mount capability is). */
static int put_fields(cJSON *o, const char *list, const char *call)
{
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",!?"), i;
		char mark = p[n] == '!' || p[n] == '?' ? p[n] : 0;
		int r;

		for (i = 0; i < ARRAY_SIZE(req_fields); i++)
			if (strlen(req_fields[i].name) == n &&
			    strncmp(req_fields[i].name, p, n) == 0)
				break;
		if (i == ARRAY_SIZE(req_fields))
			return -EINVAL;
		if ((r = put_field(o, &req_fields[i], mark, call)) < 0)
			return r;
		p += n + (mark != 0);
		p += *p == ',';
	}
	return 0;
}

/* What the fields cannot say: the content source and the topology of CreateVolume. */
static int x_create_volume(cJSON *o, const char *call)
{
	if (o_from_snapshot && o_clone_of)
		return fail_usage("--from-snapshot and --clone-of exclude each other", call);
	if (o_from_snapshot) {
		cJSON *s = cJSON_AddObjectToObject(
		    cJSON_AddObjectToObject(o, "volume_content_source"), "snapshot");
		cJSON_AddStringToObject(s, "snapshot_id", o_from_snapshot);
	}
	if (o_clone_of) {
		cJSON *s = cJSON_AddObjectToObject(
		    cJSON_AddObjectToObject(o, "volume_content_source"), "volume");
		cJSON_AddStringToObject(s, "volume_id", o_clone_of);
	}
	if (o_zone) {
		cJSON *ar = cJSON_AddObjectToObject(o, "accessibility_requirements");
		const char *kinds[] = {"requisite", "preferred"};
		for (int i = 0; i < 2; i++) {
			cJSON *t = cJSON_CreateObject();
			cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "segments"), o_topo_key,
						o_zone);
			cJSON_AddItemToArray(cJSON_AddArrayToObject(ar, kinds[i]), t);
		}
	}
	return 0;
}

/* ControllerModifyVolume takes --param as mutable parameters too. */
static int x_modify(cJSON *o, const char *call)
{
	return put_map(o, "mutable_parameters", o_mutable ? o_mutable : o_params);
}

static int x_get_capacity(cJSON *o, const char *call)
{
	if (o_zone)
		cJSON_AddStringToObject(
		    cJSON_AddObjectToObject(cJSON_AddObjectToObject(o, "accessible_topology"),
					    "segments"),
		    o_topo_key, o_zone);
	return 0;
}

#define D(x) &csi__v1__##x##__descriptor
#define CAPS_FLAGS "capability,access-mode,mount-flags,fs-group"

struct call_def {
	const char *name;
	const char *path;
	const ProtobufCMessageDescriptor *req, *rep;
	const char *fields;			  /* the request fields, see put_fields() */
	int (*extra)(cJSON *o, const char *call); /* after the fields, or NULL */
	const char *flags;			  /* the call's own flags */
};

static const struct call_def calls[] = {
    {"get-plugin-info", "/csi.v1.Identity/GetPluginInfo", D(get_plugin_info_request),
     D(get_plugin_info_response), "", NULL, ""},
    {"get-plugin-capabilities", "/csi.v1.Identity/GetPluginCapabilities",
     D(get_plugin_capabilities_request), D(get_plugin_capabilities_response), "", NULL, ""},
    {"probe", "/csi.v1.Identity/Probe", D(probe_request), D(probe_response), "", NULL, ""},
    {"create-volume", "/csi.v1.Controller/CreateVolume", D(create_volume_request),
     D(create_volume_response),
     "name!,capacity_range,volume_capabilities,parameters,secrets,mutable_parameters",
     x_create_volume,
     "name,size,limit,param,mutable-param,secret,zone,"
     "topology-key,from-snapshot,clone-of," CAPS_FLAGS},
    {"delete-volume", "/csi.v1.Controller/DeleteVolume", D(delete_volume_request),
     D(delete_volume_response), "volume_id!,secrets", NULL, "volume,secret"},
    {"controller-publish", "/csi.v1.Controller/ControllerPublishVolume",
     D(controller_publish_volume_request), D(controller_publish_volume_response),
     "volume_id!,node_id!,volume_capability,volume_context,secrets,readonly", NULL,
     "volume,node,readonly,volume-context,secret," CAPS_FLAGS},
    {"controller-unpublish", "/csi.v1.Controller/ControllerUnpublishVolume",
     D(controller_unpublish_volume_request), D(controller_unpublish_volume_response),
     "volume_id!,node_id,secrets", NULL, "volume,node,secret"},
    {"validate-volume-capabilities", "/csi.v1.Controller/ValidateVolumeCapabilities",
     D(validate_volume_capabilities_request), D(validate_volume_capabilities_response),
     "volume_id!,volume_capabilities,volume_context,parameters,mutable_parameters,secrets", NULL,
     "volume,volume-context,param,mutable-param,secret," CAPS_FLAGS},
    {"list-volumes", "/csi.v1.Controller/ListVolumes", D(list_volumes_request),
     D(list_volumes_response), "max_entries,starting_token", NULL, "max-entries,starting-token"},
    {"get-capacity", "/csi.v1.Controller/GetCapacity", D(get_capacity_request),
     D(get_capacity_response), "volume_capabilities,parameters", x_get_capacity,
     "param,zone,topology-key," CAPS_FLAGS},
    {"controller-get-capabilities", "/csi.v1.Controller/ControllerGetCapabilities",
     D(controller_get_capabilities_request), D(controller_get_capabilities_response), "", NULL, ""},
    {"create-snapshot", "/csi.v1.Controller/CreateSnapshot", D(create_snapshot_request),
     D(create_snapshot_response), "name!,source_volume_id!,parameters,secrets", NULL,
     "name,source-volume,volume,param,secret"},
    {"delete-snapshot", "/csi.v1.Controller/DeleteSnapshot", D(delete_snapshot_request),
     D(delete_snapshot_response), "snapshot_id!,secrets", NULL, "snapshot,secret"},
    {"list-snapshots", "/csi.v1.Controller/ListSnapshots", D(list_snapshots_request),
     D(list_snapshots_response), "max_entries,starting_token,snapshot_id,source_volume_id", NULL,
     "max-entries,starting-token,snapshot,source-volume,volume"},
    {"controller-expand", "/csi.v1.Controller/ControllerExpandVolume",
     D(controller_expand_volume_request), D(controller_expand_volume_response),
     "volume_id!,capacity_range!,secrets,volume_capability?", NULL,
     "volume,size,limit,secret," CAPS_FLAGS},
    {"controller-get-volume", "/csi.v1.Controller/ControllerGetVolume",
     D(controller_get_volume_request), D(controller_get_volume_response), "volume_id!", NULL,
     "volume"},
    {"controller-modify", "/csi.v1.Controller/ControllerModifyVolume",
     D(controller_modify_volume_request), D(controller_modify_volume_response),
     "volume_id!,secrets", x_modify, "volume,mutable-param,param,secret"},
    {"node-stage", "/csi.v1.Node/NodeStageVolume", D(node_stage_volume_request),
     D(node_stage_volume_response),
     "volume_id!,staging_target_path!,publish_context,volume_context,volume_capability,secrets",
     NULL, "volume,staging-path,publish-context,volume-context,secret," CAPS_FLAGS},
    {"node-unstage", "/csi.v1.Node/NodeUnstageVolume", D(node_unstage_volume_request),
     D(node_unstage_volume_response), "volume_id!,staging_target_path!", NULL,
     "volume,staging-path"},
    {"node-publish", "/csi.v1.Node/NodePublishVolume", D(node_publish_volume_request),
     D(node_publish_volume_response),
     "volume_id!,target_path!,staging_target_path,publish_context,volume_context,volume_capability,"
     "secrets,readonly",
     NULL, "volume,staging-path,target,readonly,publish-context,volume-context,secret," CAPS_FLAGS},
    {"node-unpublish", "/csi.v1.Node/NodeUnpublishVolume", D(node_unpublish_volume_request),
     D(node_unpublish_volume_response), "volume_id!,target_path!", NULL, "volume,target"},
    {"node-expand", "/csi.v1.Node/NodeExpandVolume", D(node_expand_volume_request),
     D(node_expand_volume_response),
     "volume_id!,volume_path,staging_target_path,capacity_range,secrets,volume_capability?", NULL,
     "volume,volume-path,target,staging-path,size,limit,secret," CAPS_FLAGS},
    {"node-get-volume-stats", "/csi.v1.Node/NodeGetVolumeStats", D(node_get_volume_stats_request),
     D(node_get_volume_stats_response), "volume_id!,volume_path!,staging_target_path", NULL,
     "volume,volume-path,target,staging-path"},
    {"node-get-capabilities", "/csi.v1.Node/NodeGetCapabilities", D(node_get_capabilities_request),
     D(node_get_capabilities_response), "", NULL, ""},
    {"node-get-info", "/csi.v1.Node/NodeGetInfo", D(node_get_info_request),
     D(node_get_info_response), "", NULL, ""},
};

static const struct call_def *find_call(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++)
		if (strcmp(calls[i].name, name) == 0)
			return &calls[i];
	return NULL;
}

static const struct call_def *find_path(const char *path)
{
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++)
		if (strcmp(calls[i].path, path) == 0)
			return &calls[i];
	return NULL;
}

/* ---- running ---- */

struct runner {
	struct rpc_client *cl;
	const char *path;
	const uint8_t *data;
	size_t len;
	long long remaining, done, errors;
	pthread_mutex_t lock;
	struct rpc_status last_err;
};

static void *bench_thread(void *arg)
{
	struct runner *r = arg;
	struct buf rep = BUF_INIT(16 << 20);

	for (;;) {
		struct rpc_status st = {0};
		pthread_mutex_lock(&r->lock);
		if (r->remaining == 0) {
			pthread_mutex_unlock(&r->lock);
			break;
		}
		r->remaining--;
		pthread_mutex_unlock(&r->lock);
		buf_reset(&rep);
		int e = rpc_client_call_raw(r->cl, r->path, r->data, r->len, o_timeout, &rep, &st);
		pthread_mutex_lock(&r->lock);
		r->done++;
		if (e < 0 || st.code != RPC_OK) {
			r->errors++;
			r->last_err = st;
			if (e < 0)
				snprintf(r->last_err.message, sizeof(r->last_err.message), "%s",
					 strerror(-e));
		}
		pthread_mutex_unlock(&r->lock);
	}
	buf_release(&rep);
	return NULL;
}

static int run_bench(struct rpc_client *cl, const char *path, const uint8_t *data, size_t len)
{
	struct runner r = {.cl = cl, .path = path, .data = data, .len = len, .remaining = o_count};
	pthread_t th[1024];
	long long n = o_parallel < o_count ? o_parallel : o_count;
	int64_t t0 = now_mono_ns();

	pthread_mutex_init(&r.lock, NULL);
	for (long long i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, bench_thread, &r) != 0) {
			n = i;
			break;
		}
	for (long long i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	double secs = (double)(now_mono_ns() - t0) / 1e9;
	printf("{\"method\": \"%s\", \"calls\": %lld, \"errors\": %lld, \"parallel\": %lld, "
	       "\"seconds\": %.3f, \"per_second\": %.1f}\n",
	       path, r.done, r.errors, n, secs, secs > 0 ? (double)r.done / secs : 0.0);
	if (r.errors)
		fprintf(stderr, "rpc error: code = %s desc = %s\n", rpc_code_name(r.last_err.code),
			r.last_err.message);
	pthread_mutex_destroy(&r.lock);
	return r.errors ? 1 : 0;
}

static int hex_decode(const char *s, struct buf *out)
{
	size_t n = strlen(s);
	if (n % 2)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 2) {
		char h[3] = {s[i], s[i + 1], 0};
		char *end;
		long v = strtol(h, &end, 16);
		if (*end)
			return -EINVAL;
		if (buf_putc(out, (char)v) < 0)
			return -ENOMEM;
	}
	return 0;
}

static bool flag_is_set(const struct flag *f)
{
	switch (f->type) {
	case FLAG_STRING: {
		const char *v = *(char **)f->dest;
		return v && (!f->def || strcmp(v, f->def) != 0);
	}
	case FLAG_STRLIST:
	case FLAG_MAP: {
		char **v = *(char ***)f->dest;
		return v && *v;
	}
	case FLAG_BOOL:
		return *(bool *)f->dest;
	case FLAG_INT:
		return *(long long *)f->dest != 0;
	default:
		return false;
	}
}

static bool in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l == n && strncmp(p, name, n) == 0)
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

static void print_calls(struct buf *b)
{
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
		buf_printf(b, "  %-31s", calls[i].name);
		if (*calls[i].flags) {
			const char *f = calls[i].flags;
			while (*f) {
				const char *c = strchr(f, ',');
				size_t l = c ? (size_t)(c - f) : strlen(f);
				buf_printf(b, " --%.*s", (int)l, f);
				f = c ? c + 1 : f + l;
			}
		}
		buf_putc(b, '\n');
	}
}

int csi_client_main(int argc, char **argv)
{
	struct flag table[ARRAY_SIZE(common_flags) + ARRAY_SIZE(call_flags) + 1];
	const struct call_def *def = NULL;
	const char *call_name = NULL, *path = NULL;
	const ProtobufCMessageDescriptor *req_d = NULL, *rep_d = NULL;
	struct rpc_client *cl = NULL;
	struct buf raw = BUF_INIT(16 << 20), usage = BUF_INIT(0), calls_text = BUF_INIT(0);
	cJSON *reqj = NULL;
	ProtobufCMessage *req = NULL, *rep = NULL;
	struct rpc_status st = {0};
	char err[512];
	int n, r, ret = 1;

	memcpy(table, common_flags, sizeof(common_flags));
	memcpy(table + ARRAY_SIZE(common_flags), call_flags, sizeof(call_flags));
	memset(&table[ARRAY_SIZE(table) - 1], 0, sizeof(table[0]));
	print_calls(&calls_text);
	buf_printf(&usage, client_usage, calls_text.data);

	n = flags_parse("csi-client", usage.data, table, argc, argv);
	if (n < 0) {
		ret = flags_exit_code(n);
		goto out;
	}
	if (n < 1) {
		fprintf(stderr,
			"aws-k8s csi-client: which call? (see 'aws-k8s csi-client --help')\n");
		ret = 2;
		goto out;
	}
	call_name = argv[0];
	if (strcmp(call_name, "call") == 0) {
		if (n != 2) {
			fprintf(stderr, "aws-k8s csi-client call: give the method path, e.g. "
					"/csi.v1.Node/NodeGetInfo\n");
			ret = 2;
			goto out;
		}
		path = argv[1];
		def = find_path(path);
		if (!o_data && !o_raw_hex) {
			fprintf(stderr,
				"aws-k8s csi-client call: give --data JSON or --raw-hex HEX\n");
			ret = 2;
			goto out;
		}
		if (!def && !o_raw_hex) {
			fprintf(stderr,
				"aws-k8s csi-client call: unknown method '%s': use --raw-hex\n",
				path);
			ret = 2;
			goto out;
		}
	} else {
		if (!(def = find_call(call_name))) {
			fprintf(stderr,
				"aws-k8s csi-client: unknown call '%s' (see 'aws-k8s csi-client "
				"--help')\n",
				call_name);
			ret = 2;
			goto out;
		}
		if (n != 1) {
			fprintf(stderr, "aws-k8s csi-client %s: unexpected argument '%s'\n",
				call_name, argv[1]);
			ret = 2;
			goto out;
		}
		for (size_t i = 0; i < ARRAY_SIZE(call_flags); i++)
			if (flag_is_set(&call_flags[i]) &&
			    !in_list(def->flags, call_flags[i].name)) {
				fprintf(stderr,
					"aws-k8s csi-client %s: flag '--%s' does not apply to this "
					"call\n",
					call_name, call_flags[i].name);
				ret = 2;
				goto out;
			}
		path = def->path;
	}
	if (def) {
		req_d = def->req;
		rep_d = def->rep;
	}

	if (o_raw_hex) {
		if (hex_decode(o_raw_hex, &raw) < 0) {
			fprintf(stderr, "aws-k8s csi-client: --raw-hex is not hex\n");
			ret = 2;
			goto out;
		}
	} else {
		if (o_data) {
			if (json_parse(o_data, strlen(o_data), &reqj, NULL) < 0) {
				fprintf(stderr, "aws-k8s csi-client: --data is not JSON\n");
				ret = 2;
				goto out;
			}
		} else {
			if (!(reqj = cJSON_CreateObject()))
				goto out;
			if ((r = put_fields(reqj, def->fields, call_name)) < 0 ||
			    (def->extra && (r = def->extra(reqj, call_name)) < 0)) {
				ret = r == -EINVAL ? 2 : 1;
				goto out;
			}
		}
		if (pbjson_to_msg(reqj, req_d, &req, err, sizeof(err)) < 0) {
			fprintf(stderr, "aws-k8s csi-client: bad request: %s\n", err);
			ret = 2;
			goto out;
		}
		size_t sz = protobuf_c_message_get_packed_size(req);
		if ((r = buf_reserve(&raw, sz + 1)) < 0)
			goto out;
		raw.len = protobuf_c_message_pack(req, (uint8_t *)raw.data);
	}

	if ((r = rpc_client_new(o_endpoint, &cl)) < 0) {
		fprintf(stderr, "aws-k8s csi-client: invalid --endpoint '%s'\n", o_endpoint);
		ret = 2;
		goto out;
	}
	if (o_count > 1) {
		ret = run_bench(cl, path, (const uint8_t *)raw.data, raw.len);
		goto out;
	}
	struct buf repb = BUF_INIT(16 << 20);
	r = rpc_client_call_raw(cl, path, raw.data ? raw.data : "", raw.len, o_timeout, &repb, &st);
	if (r < 0) {
		fprintf(stderr, "aws-k8s csi-client: %s: %s\n", path, strerror(-r));
		buf_release(&repb);
		goto out;
	}
	if (st.code != RPC_OK) {
		fprintf(stderr, "rpc error: code = %s desc = %s\n", rpc_code_name(st.code),
			st.message);
		buf_release(&repb);
		goto out;
	}
	if (!rep_d) {
		printf("{\"reply_bytes\": %zu}\n", repb.len);
		buf_release(&repb);
		ret = 0;
		goto out;
	}
	rep = protobuf_c_message_unpack(rep_d, NULL, repb.len,
					(const uint8_t *)(repb.data ? repb.data : ""));
	buf_release(&repb);
	if (!rep) {
		fprintf(stderr, "aws-k8s csi-client: %s: the reply is not a valid %s\n", path,
			rep_d->name);
		goto out;
	}
	char *text = pbjson_print(rep, o_defaults ? PBJSON_DEFAULTS : 0, true);
	if (!text)
		goto out;
	printf("%s\n", text);
	free(text);
	ret = 0;
out:
	if (rep)
		protobuf_c_message_free_unpacked(rep, NULL);
	if (req)
		protobuf_c_message_free_unpacked(req, NULL);
	cJSON_Delete(reqj);
	rpc_client_free(cl);
	buf_release(&raw);
	buf_release(&usage);
	buf_release(&calls_text);
	flags_free(table);
	return ret;
}
