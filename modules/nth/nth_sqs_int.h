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
