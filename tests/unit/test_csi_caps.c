/* The capabilities each mode reports, as exact ordered lists, over a real socket: what the
 * sidecars and kubelet decide by. Compared with upstream aws-ebs-csi-driver v1.64
 * (/work/shared/reference/csi.md):
 *   Identity    CONTROLLER_SERVICE, VOLUME_ACCESSIBILITY_CONSTRAINTS: the same, except that
 *               csi-node leaves out CONTROLLER_SERVICE (it serves no Controller RPC; upstream
 *               reports it in every mode).
 *   Controller  upstream's seven, plus LIST_VOLUMES, LIST_VOLUMES_PUBLISHED_NODES and GET_VOLUME,
 *               which ours implements (ListVolumes, ControllerGetVolume) and upstream does not.
 *   Node        upstream's three, plus VOLUME_CONDITION (NodeGetVolumeStats reports corrupted
 *               mounts, gone devices and file systems turned read-only). */
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/buf.h"
#include "common/base/timeutil.h"
#include "common/csi/csi.pb-c.h"
#include "common/csi/identity.h"
#include "common/grpc/client.h"
#include "common/grpc/pbjson.h"
#include "common/grpc/server.h"
#include "modules/csi-controller/csi_controller_grpc.h"
#include "modules/csi-node/csi_node.h"
#include "tests/unit/harness.h"

struct caps_server {
	struct rpc_server *srv;
	struct rpc_client *cl;
};

/* A server with the Identity service (in controller mode or not) and one more table. */
static int caps_start(struct caps_server *s, const char *name, struct csi_identity *id,
		      const struct rpc_method *methods)
{
	char ep[512];
	int r;

	(void)str_printf(ep, sizeof(ep), "unix://%s/%s.sock", test_tmpdir(), name);
	if ((r = rpc_server_new(&(struct rpc_server_opts){ .endpoint = ep }, &s->srv)) < 0 ||
	    (r = rpc_server_register(s->srv, csi_identity_methods, id)) < 0 ||
	    (r = rpc_server_register(s->srv, methods, NULL)) < 0 ||
	    (r = rpc_server_start(s->srv)) < 0)
		return r;
	return rpc_client_new(ep, &s->cl);
}

static void caps_stop(struct caps_server *s)
{
	rpc_client_free(s->cl);
	rpc_server_free(s->srv);
}

/* The reply of an empty request as JSON (malloc'd), or NULL. */
static char *caps_of(struct caps_server *s, const char *path, const ProtobufCMessageDescriptor *in,
		     const ProtobufCMessageDescriptor *out)
{
	ProtobufCMessage *req = calloc(1, in->sizeof_message), *rep = NULL;
	struct rpc_status st = { 0 };
	char *json = NULL;

	if (!req)
		return NULL;
	protobuf_c_message_init(in, req);
	if (rpc_client_call(s->cl, path, req, out, 10 * NSEC_PER_SEC, &rep, &st) == 0 &&
	    st.code == RPC_OK && rep)
		json = pbjson_print(rep, 0, false);
	else
		fprintf(stderr, "    %s: code %d: %s\n", path, st.code, st.message);
	if (rep)
		protobuf_c_message_free_unpacked(rep, NULL);
	free(req);
	return json;
}

#define PLUGIN_CAPS(s)                                                                             \
	caps_of(s, "/csi.v1.Identity/GetPluginCapabilities",                                       \
		&csi__v1__get_plugin_capabilities_request__descriptor,                             \
		&csi__v1__get_plugin_capabilities_response__descriptor)
#define SVC(t) "{\"service\":{\"type\":\"" t "\"}}"
#define RPC(t) "{\"rpc\":{\"type\":\"" t "\"}}"

TEST(csi_caps_controller_mode)
{
	struct csi_identity id = { .controller = true };
	struct caps_server s = { 0 };

	ASSERT_OK(caps_start(&s, "ctrl", &id, csi_ctrl_methods));
	_cleanup_free_ char *plugin = PLUGIN_CAPS(&s);
	ASSERT_STREQ(plugin, "{\"capabilities\":[" SVC("CONTROLLER_SERVICE") ","
			     SVC("VOLUME_ACCESSIBILITY_CONSTRAINTS") "]}");
	_cleanup_free_ char *ctrl =
	    caps_of(&s, "/csi.v1.Controller/ControllerGetCapabilities",
		    &csi__v1__controller_get_capabilities_request__descriptor,
		    &csi__v1__controller_get_capabilities_response__descriptor);
	static const char want[] = "{\"capabilities\":["
				   RPC("CREATE_DELETE_VOLUME") ","
				   RPC("PUBLISH_UNPUBLISH_VOLUME") ","
				   RPC("LIST_VOLUMES") ","
				   RPC("LIST_VOLUMES_PUBLISHED_NODES") ","
				   RPC("GET_VOLUME") ","
				   RPC("CREATE_DELETE_SNAPSHOT") ","
				   RPC("LIST_SNAPSHOTS") ","
				   RPC("CLONE_VOLUME") ","
				   RPC("EXPAND_VOLUME") ","
				   RPC("MODIFY_VOLUME") "]}";
	ASSERT_STREQ(ctrl, want);
	caps_stop(&s);
}

TEST(csi_caps_node_mode)
{
	struct csi_identity id = { .controller = false };
	struct caps_server s = { 0 };

	ASSERT_OK(caps_start(&s, "node", &id, csi_node_methods));
	_cleanup_free_ char *plugin = PLUGIN_CAPS(&s);
	ASSERT_STREQ(plugin, "{\"capabilities\":[" SVC("VOLUME_ACCESSIBILITY_CONSTRAINTS") "]}");
	_cleanup_free_ char *node = caps_of(&s, "/csi.v1.Node/NodeGetCapabilities",
					    &csi__v1__node_get_capabilities_request__descriptor,
					    &csi__v1__node_get_capabilities_response__descriptor);
	ASSERT_STREQ(node, "{\"capabilities\":[" RPC("STAGE_UNSTAGE_VOLUME") ","
			   RPC("EXPAND_VOLUME") "," RPC("GET_VOLUME_STATS") ","
			   RPC("VOLUME_CONDITION") "]}");
	caps_stop(&s);
}
