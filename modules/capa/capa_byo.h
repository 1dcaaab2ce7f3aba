/* Bring-your-own VPC (capa_net_byo.c) and Deckhouse's layouts as presets (capa_preset.c): the
 * calls the AWSCluster's network steps (capa_net.c, capa_net_delete.c), its failure domains
 * (capa_cluster.c) and the machine's subnet pick (capa_machine.c) make into them. */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>

#include "modules/capa/capa_cluster.h"

/* The gate of the cloud-provider tag on the subnets of an unmanaged VPC (on by default). */
#define CAPA_GATE_TAG_UNMANAGED "TagUnmanagedNetworkResources"

/* The VPC step found vpc (an EC2 vpcSet item) without the cluster's owned tag: when id (the
 * spec's vpc.id) names it, it is unmanaged: s->unmanaged is set and its CIDR recorded in the
 * spec (nothing of it is changed). Otherwise (found by its Name tag) -EPERM, as CAPA. */
int capa_byo_vpc(struct capa_scope *s, const xmlNode *vpc, const char *id);
/* The subnets step of an unmanaged VPC: every subnet of spec.network.subnets must exist in the
 * VPC (by id, else by cidrBlock): -ENOENT naming the first that does not; their zone, CIDR, id
 * and whether they are public are recorded; they get kubernetes.io/cluster/<c>=shared when
 * they have no tag of the cluster (gate TagUnmanagedNetworkResources). */
int capa_byo_subnets(struct capa_scope *s);
/* The steps CAPA skips for an unmanaged VPC (internet gateway, NAT gateways, route tables). */
int capa_byo_skip(struct capa_scope *s);
/* For the delete: 1 when spec.network.vpc.id names an existing VPC the cluster does not own
 * (the network is the user's: nothing of it is deleted), 0 when not, < 0 with s->err. */
int capa_byo_unmanaged(struct capa_scope *s);

/* ---- presets (capa_preset.c) ---- */

/* The annotation on the AWSCluster that names a Deckhouse layout. */
#define CAPA_LAYOUT_ANNOTATION "aws-k8s.deckhouse.io/layout"

enum capa_layout {
	CAPA_LAYOUT_NONE = 0,
	CAPA_LAYOUT_WITHOUT_NAT,
	CAPA_LAYOUT_WITH_NAT,
};

/* The layout an AWSCluster asks for: CAPA_LAYOUT_NONE without the annotation, -EINVAL for a
 * value that is not a layout. */
int capa_layout_of(const cJSON *awscluster);
/* The subnets of a layout for a VPC CIDR over `zones` zones, as Deckhouse's Terraform cuts
 * them: the CIDR split into blocks of ceil(log2(2*zones)) more bits, block i the public
 * subnet of zone i, block zones+i its private one. -EINVAL for a bad or too small CIDR. */
int capa_layout_subnets(const char *vpc_cidr, int zones, char pub[][20], char priv[][20]);
/* Checks the layout annotation of s (before the network steps) and, for WithNAT, sets
 * spec.bastion.enabled when the spec does not say. The subnets are filled by
 * capa_preset_subnets, only for a managed VPC whose spec lists none: what the spec says wins.
 * An unknown layout: -EINVAL with s->err. */
int capa_preset_apply(struct capa_scope *s);
/* The default subnets of a managed VPC when the AWSCluster names a layout: net.subnets is
 * replaced by the layout's over the n zones (WithoutNAT: the public ones only). 1 when it did,
 * 0 without a layout, < 0 with s->err. */
int capa_preset_subnets(struct capa_scope *s, cJSON *net, char zones[][64], int n);
/* Whether machines of this AWSCluster go into public subnets without asking (WithoutNAT has
 * no private subnet: its machines get public IPs). */
bool capa_preset_public_machines(const cJSON *awscluster);
