/* `aws-k8s cpm approve`: one master at a time (Deckhouse's update_approval hook as a controller).
 * The annotations are the node side's contract (the cpm run on each master asks with
 * waiting-for-approval, waits for approved, converges, then becomes Ready). */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>

#define CPM_ANN_PREFIX "control-plane-manager.deckhouse.io/"
/* Deckhouse's older hooks and controller spelled it so; read on input, answered in kind. */
#define CPM_ANN_PREFIX_OLD "control-plane-manger.deckhouse.io/"
#define CPM_ANN_WAITING "waiting-for-approval"
#define CPM_ANN_APPROVED "approved"

/* What the approver reads of a master Node. The prefixes point to static strings: the
 * spelling the annotation was found with (NULL: absent; the new spelling when both). */
struct cpm_node_view {
	const char *name;
	const char *rv;
	const char *approved;	/* prefix of the approved annotation */
	const char *waiting;	/* prefix of the waiting-for-approval annotation */
	bool ready;		/* condition Ready=True */
	bool schedulable;	/* not spec.unschedulable */
};

void cpm_node_view(const cJSON *node, struct cpm_node_view *ret);
/* condition Ready=True in status.conditions (a Node's or a Pod's) */
bool cpm_obj_ready(const cJSON *obj);

int cpm_approve_main(int argc, char **argv);
