/* libFuzzer harness over the CSI request decoding path of the gRPC server: the first byte
 * picks a method, the rest is its request as it would arrive on the wire. Every input goes
 * through what the server does before a handler runs (rpc_decode: wire walk for strings,
 * protobuf-c unpack), then what the handlers and the logs do with a decoded request: the
 * redacted JSON dump, JSON back to a message, the CreateVolume parameter parser, the zone
 * choice, the capability checks, and the paging-token decoder on the starting token.
 * Build and run with tests/fuzz/run_csi.sh SECONDS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/csi/csi.pb-c.h"
#include "common/csi/grpc.h"
#include "common/csi/volume.h"
#include "common/grpc/pbjson.h"
#include "common/grpc/server.h"
#include "modules/csi-controller/csi_controller_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define D(x) &csi__v1__##x##__descriptor
static const ProtobufCMessageDescriptor *const reqs[] = {
    D(get_plugin_info_request),
    D(get_plugin_capabilities_request),
    D(probe_request),
    D(create_volume_request),
    D(delete_volume_request),
    D(controller_publish_volume_request),
    D(controller_unpublish_volume_request),
    D(validate_volume_capabilities_request),
    D(list_volumes_request),
    D(get_capacity_request),
    D(controller_get_capabilities_request),
    D(create_snapshot_request),
    D(delete_snapshot_request),
    D(list_snapshots_request),
    D(controller_expand_volume_request),
    D(controller_get_volume_request),
    D(controller_modify_volume_request),
    D(node_stage_volume_request),
    D(node_unstage_volume_request),
    D(node_publish_volume_request),
    D(node_unpublish_volume_request),
    D(node_get_volume_stats_request),
    D(node_expand_volume_request),
    D(node_get_capabilities_request),
    D(node_get_info_request),
};

/* The plain topology of a request (at most 32 terms of 16 segments each). */
struct topo {
	struct csi_kv kv[32][16];
	struct csi_ctrl_topology t[32];
	struct csi_ctrl_topology_req req;
};

static void terms_of(struct topo *tp, size_t *used, Csi__V1__Topology *const *pb, size_t n,
		     const struct csi_ctrl_topology **ret, size_t *ret_n)
{
	*ret = &tp->t[*used];
	*ret_n = 0;
	for (size_t i = 0; i < n && *used < 32; i++, (*used)++, (*ret_n)++) {
		struct csi_ctrl_topology *t = &tp->t[*used];
		t->segments = tp->kv[*used];
		t->n_segments = pb[i]->n_segments < 16 ? pb[i]->n_segments : 16;
		for (size_t k = 0; k < t->n_segments; k++) {
			tp->kv[*used][k].key = pb[i]->segments[k]->key;
			tp->kv[*used][k].value = pb[i]->segments[k]->value;
		}
	}
}

static void exercise_create(const Csi__V1__CreateVolumeRequest *req)
{
	struct csi_kv kv[64];
	size_t n = req->n_parameters < 64 ? req->n_parameters : 64, used = 0;
	struct csi_vol_params p;
	struct csi_error e;
	static struct topo tp;
	char err[256];
	const char *zid;

	for (size_t i = 0; i < n; i++) {
		kv[i].key = req->parameters[i]->key;
		kv[i].value = req->parameters[i]->value;
	}
	if (csi_vol_params_parse(kv, n, NULL, &p, err, sizeof(err)) == 0) {
		const struct csi_vol_type *t = csi_vol_type_find(p.type);
		long long gib = 0, iops = 0;
		if (t && req->capacity_range &&
		    csi_size_resolve(t, true, req->capacity_range->required_bytes,
				     req->capacity_range->limit_bytes, 0, &gib, &e) == CSI_OK &&
		    csi_iops_resolve(t, &p, gib, &iops, err, sizeof(err)) == 0)
			csi_throughput_check(t, p.throughput, iops, err, sizeof(err));
		csi_vol_params_release(&p);
	}
	if (req->accessibility_requirements) {
		const Csi__V1__TopologyRequirement *r = req->accessibility_requirements;
		terms_of(&tp, &used, r->requisite, r->n_requisite, &tp.req.requisite,
			 &tp.req.n_requisite);
		terms_of(&tp, &used, r->preferred, r->n_preferred, &tp.req.preferred,
			 &tp.req.n_preferred);
		csi_pick_zone(&tp.req, &zid);
		csi_zone_allowed(&tp.req, "us-east-1a");
	}
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		struct csi_cap cap;
		csi_cap_of_pb(req->volume_capabilities[i], &cap);
		csi_cap_supported(&cap, true);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ProtobufCMessage *m = NULL, *back = NULL;
	char err[256];

	if (size < 1)
		return 0;
	const ProtobufCMessageDescriptor *d = reqs[data[0] % (sizeof(reqs) / sizeof(reqs[0]))];
	if (rpc_decode(d, data + 1, size - 1, 4 << 20, &m) < 0)
		return 0;
	char *redacted = pbjson_print(m, PBJSON_REDACT, false);
	free(redacted);
	cJSON *j = pbjson_from_msg(m, 0);
	if (j && pbjson_to_msg(j, d, &back, err, sizeof(err)) == 0) {
		/* what went out as JSON comes back as the same message (unknown fields aside) */
		char *a = pbjson_print(m, 0, false), *b = pbjson_print(back, 0, false);
		if (!a || !b || strcmp(a, b) != 0)
			abort();
		free(a);
		free(b);
		protobuf_c_message_free_unpacked(back, NULL);
	}
	cJSON_Delete(j);
	rpc_msg_str(m, "volume_id");
	rpc_msg_map_get(m, "publish_context", "devicePath");
	if (d == &csi__v1__create_volume_request__descriptor)
		exercise_create((const void *)m);
	const char *tok = rpc_msg_str(m, "starting_token");
	if (tok) {
		char *aws = NULL;
		size_t skip;
		if (csi_token_decode(tok, &aws, &skip) == 0)
			free(aws);
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
