/* Helpers shared by the network files of the AWSCluster controller (capa_net.c,
 * capa_net_nat.c, capa_net_delete.c, capa_sg.c). */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>

#include "common/aws/query.h"
#include "modules/capa/capa_cluster.h"

/* CAPA's tags for a network resource of the scope's cluster. */
int capa_net_tags(struct capa_scope *s, struct capa_tags *t, const char *role, const char *name);
/* A mutating call (with TagSpecification.1 of tag_type when not NULL), refused (-ECANCELED)
 * once this replica may not act. */
int capa_net_create(struct capa_scope *s, const char *action, struct aws_query *q,
		    const char *tag_type, struct capa_tags *t, struct aws_reply *rep);
/* Adds the filter tag-key=<the cluster's owned key>. */
int capa_net_filter_owned(struct capa_scope *s, struct aws_query *q);
/* Whether an EC2 item's tagSet holds <owned key>=owned. */
bool capa_net_owned(struct capa_scope *s, const xmlNode *item);
/* Sets a string at path under where (spec.network or one of its subnets), noting the change. */
int capa_net_set(struct capa_scope *s, cJSON *where, const char *path, const char *v);

/* NAT gateways with their EIPs, and route tables (capa_net_nat.c). */
int capa_nat_reconcile(struct capa_scope *s);
int capa_rt_reconcile(struct capa_scope *s);
