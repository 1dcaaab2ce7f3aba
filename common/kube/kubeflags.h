/* The flags every Kubernetes-facing subcommand shares, as table fragments (like LOG_FLAGS), so
 * that every module has identical names, defaults and help:
 *
 *   static const struct flag ccm_flags[] = {
 *           KUBE_FLAGS,                                   // or KUBE_FLAGS_QPS("5", "10")
 *           LEADER_ELECT_FLAGS("cloud-controller-manager"),
 *           LOG_FLAGS,
 *           { NULL },
 *   };
 *   ...
 *   r = kube_client_from_flags("ccm", &kc, err, sizeof(err));
 *
 * --kube-api-content-type is accepted for compatibility; requests always use JSON. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/flags.h"

struct kube_client;

extern char *kube_flag_kubeconfig;
extern char *kube_flag_master;
extern double kube_flag_qps;
extern long long kube_flag_burst;
extern char *kube_flag_content_type;

extern bool kube_flag_leader_elect;
extern int64_t kube_flag_le_lease_duration;
extern int64_t kube_flag_le_renew_deadline;
extern int64_t kube_flag_le_retry_period;
extern char *kube_flag_le_resource_lock;
extern char *kube_flag_le_resource_name;
extern char *kube_flag_le_resource_namespace;

/* clang-format off */
#define KUBE_FLAGS_QPS(qps, burst)                                                                 \
	{ "kubeconfig", FLAG_STRING, &kube_flag_kubeconfig, NULL, NULL,                            \
	  "Path to a kubeconfig. Only required if out-of-cluster." },                              \
	{ "master", FLAG_STRING, &kube_flag_master, NULL, NULL,                                    \
	  "The address of the Kubernetes API server (overrides any value in kubeconfig)." },       \
	{ "kube-api-qps", FLAG_FLOAT, &kube_flag_qps, qps, NULL,                                   \
	  "QPS to use while talking with kubernetes apiserver." },                                 \
	{ "kube-api-burst", FLAG_INT, &kube_flag_burst, burst, NULL,                               \
	  "Burst to use while talking with kubernetes apiserver.", 0, 1000000 },                   \
	{ "kube-api-content-type", FLAG_STRING, &kube_flag_content_type,                           \
	  "application/vnd.kubernetes.protobuf", NULL,                                             \
	  "Content type of requests sent to apiserver (accepted; JSON is always used)." }
/* kube-controller-manager's and the cloud-controller-manager's defaults */
#define KUBE_FLAGS KUBE_FLAGS_QPS("20", "30")

#define LEADER_ELECT_FLAGS(name)                                                                   \
	{ "leader-elect", FLAG_BOOL, &kube_flag_leader_elect, "true", NULL,                        \
	  "Start a leader election client and gain leadership before executing the main loop. "    \
	  "Enable this when running replicated components for high availability." },              \
	{ "leader-elect-lease-duration", FLAG_DURATION, &kube_flag_le_lease_duration, "15s", NULL, \
	  "The duration that non-leader candidates will wait after observing a leadership "        \
	  "renewal until attempting to acquire leadership of a led but unrenewed leader slot." },  \
	{ "leader-elect-renew-deadline", FLAG_DURATION, &kube_flag_le_renew_deadline, "10s", NULL, \
	  "The interval between attempts by the acting master to renew a leadership slot before "  \
	  "it stops leading. This must be less than the lease duration." },                        \
	{ "leader-elect-retry-period", FLAG_DURATION, &kube_flag_le_retry_period, "2s", NULL,      \
	  "The duration the clients should wait between attempting acquisition and renewal of a "  \
	  "leadership." },                                                                         \
	{ "leader-elect-resource-lock", FLAG_STRING, &kube_flag_le_resource_lock, "leases", NULL,  \
	  "The type of resource object that is used for locking during leader election. "          \
	  "Supported options are 'leases'." },                                                     \
	{ "leader-elect-resource-name", FLAG_STRING, &kube_flag_le_resource_name, name, NULL,      \
	  "The name of resource object that is used for locking during leader election." },        \
	{ "leader-elect-resource-namespace", FLAG_STRING, &kube_flag_le_resource_namespace,        \
	  "kube-system", NULL,                                                                     \
	  "The namespace of resource object that is used for locking during leader election." }
/* clang-format on */

/* Loads the configuration that --kubeconfig/--master (or the environment) name and makes a
 * client with --kube-api-qps/--kube-api-burst and the user agent "aws-k8s-<component>/...".
 * On failure a sentence for the user is in err. */
int kube_client_from_flags(const char *component, struct kube_client **ret, char *err,
			   size_t errlen);
/* Checks the leader-election flags as client-go does: lease duration > renew deadline >
 * 1.2 x retry period > 0, and the lock type "leases". */
int kube_le_flags_check(char *err, size_t errlen);
