/* Queue mode internals shared by nth_sqs.c and nth_sqs_node.c. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct aws_client;
struct ec2_instance;
struct kube_client;

/* DescribeInstances of one instance into *ret. -ENOENT only on EC2's explicit answer
 * (InvalidInstanceID.NotFound, or a reply without it); other failures are logged and returned
 * (-EREMOTEIO for a "not found" of another kind). */
int nth_sqs_describe(struct aws_client *aws, const char *instance_id, struct ec2_instance *ret);
/* The Node of an instance, into out: by spec.providerID (use_provider_id, over the complete
 * list), else by the label kubernetes.io/hostname in (private_dns, its first label), else a
 * GET of the Node named private_dns. -ENOENT on an explicit not-found; the API's errors. */
int nth_sqs_find_node(struct kube_client *kc, bool use_provider_id, const char *private_dns,
		      const char *provider_id, char *out, size_t n);
/* A launching instance's Node (label alpha.eksctl.io/instance-id, or spec.providerID): its
 * name into out when it is Ready; -EAGAIN when it exists and is not Ready; -ENOENT when none. */
int nth_sqs_node_ready(struct kube_client *kc, const char *instance_id, const char *provider_id,
		       char *out, size_t n);
/* Upstream's gauges nth_tagged_instances and nth_tagged_nodes (nth_sqs_gauges.c): a thread that
 * counts them at once and then every 30 s until n->cancel; NULL when it could not start (logged).
 * Stop joins it (after n->cancel) and frees it; NULL is a no-op. */
struct nth;
struct gauges;
struct gauges *nth_sqs_gauges_start(struct nth *n, struct aws_client *aws);
void nth_sqs_gauges_stop(struct gauges *g);
