/* The CSI Identity service, shared by csi-controller and csi-node (see identity.h). */
#include <errno.h>
#include <string.h>

#include "common/base/log.h"
#include "common/csi/csi.pb-c.h"
#include "common/csi/identity.h"
#include "awsk8s_version.h"

static int add_service_cap(struct rpc_call *call, ProtobufCMessage *rep, int type)
{
	Csi__V1__PluginCapability *cap =
	    rpc_call_new(call, &csi__v1__plugin_capability__descriptor);
	Csi__V1__PluginCapability__Service *svc =
	    rpc_call_new(call, &csi__v1__plugin_capability__service__descriptor);

	if (!cap || !svc)
		return -ENOMEM;
	svc->type = type;
	cap->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
	cap->service = svc;
	return rpc_call_array_add(call, rep, "capabilities", cap);
}

static int get_plugin_info(struct rpc_call *call, const ProtobufCMessage *in,
			   ProtobufCMessage **out)
{
	const struct csi_identity *id = rpc_call_userdata(call);
	Csi__V1__GetPluginInfoResponse *rep =
	    rpc_call_new(call, &csi__v1__get_plugin_info_response__descriptor);

	if (!rep)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	rep->name = rpc_call_strdup(call, id->name ? id->name : CSI_DRIVER_NAME_DEFAULT);
	rep->vendor_version = rpc_call_strdup(call, id->version ? id->version : "v" AWSK8S_VERSION);
	if (!rep->name || !rep->vendor_version)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	*out = &rep->base;
	return RPC_OK;
}

/* As upstream: CONTROLLER_SERVICE (csi-controller only: csi-node serves no Controller RPC,
 * where upstream reports it in every mode) and VOLUME_ACCESSIBILITY_CONSTRAINTS. No
 * VolumeExpansion entry: upstream reports none and no sidecar reads it (the resizer goes by
 * the Controller and Node EXPAND_VOLUME capabilities). */
static int get_plugin_capabilities(struct rpc_call *call, const ProtobufCMessage *in,
				   ProtobufCMessage **out)
{
	const struct csi_identity *id = rpc_call_userdata(call);
	Csi__V1__GetPluginCapabilitiesResponse *rep =
	    rpc_call_new(call, &csi__v1__get_plugin_capabilities_response__descriptor);

	if (!rep ||
	    (id->controller &&
	     add_service_cap(call, &rep->base,
			     CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE) < 0) ||
	    add_service_cap(
		call, &rep->base,
		CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS) < 0)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	*out = &rep->base;
	return RPC_OK;
}

static int probe(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const struct csi_identity *id = rpc_call_userdata(call);
	Csi__V1__ProbeResponse *rep = rpc_call_new(call, &csi__v1__probe_response__descriptor);
	Csi__V1__BoolValue *ready = rpc_call_new(call, &csi__v1__bool_value__descriptor);
	char why[256] = "";

	if (!rep || !ready)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	if (id->probe) {
		int r = id->probe(id->probe_ud, why, sizeof(why));
		if (r < 0)
			return rpc_call_error(call, RPC_FAILED_PRECONDITION, "not ready: %s",
					      *why ? why : strerror(-r));
	}
	ready->value = 1;
	rep->ready = ready;
	*out = &rep->base;
	return RPC_OK;
}

const struct rpc_method csi_identity_methods[] = {
    {"/csi.v1.Identity/GetPluginInfo", &csi__v1__get_plugin_info_request__descriptor,
     &csi__v1__get_plugin_info_response__descriptor, get_plugin_info, true},
    {"/csi.v1.Identity/GetPluginCapabilities",
     &csi__v1__get_plugin_capabilities_request__descriptor,
     &csi__v1__get_plugin_capabilities_response__descriptor, get_plugin_capabilities, true},
    {"/csi.v1.Identity/Probe", &csi__v1__probe_request__descriptor,
     &csi__v1__probe_response__descriptor, probe, true},
    {NULL},
};
