/* The waits of Deckhouse's converge, against the API server: the node side of the
 * one-master-at-a-time approval, and a mirror pod carrying the new checksum and Ready.
 *
 *   r = cpm_approval_wait(kc, "master-0", 42, 10 * NSEC_PER_SEC, ct, err, sizeof(err));
 *   r = cpm_mirror_pod_wait(kc, "kube-apiserver-master-0", sum, 42, NSEC_PER_SEC, ct,
 *                           err, sizeof(err));
 *
 * Both return 0, -ETIMEDOUT after the last try (err says what was seen last), -ECANCELED when
 * ct is cancelled, or the API's error (-ENOENT for a missing Node). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define CPM_WAITING_ANNOTATION "control-plane-manager.deckhouse.io/waiting-for-approval"
#define CPM_APPROVED_ANNOTATION "control-plane-manager.deckhouse.io/approved"

struct kube_client;
struct cancel;

/* Annotates the Node waiting-for-approval="" (unless it is approved already), then polls it
 * up to tries times, interval_ns apart, for the approved annotation. */
int cpm_approval_wait(struct kube_client *kc, const char *node, int tries, int64_t interval_ns,
		      struct cancel *ct, char *err, size_t errlen);
/* Deckhouse's waitImageHolderContainers: polls kube-system/pod (this cpm's own, MY_POD_NAME) up
 * to tries times, interval_ns apart, until every container but control-plane-manager is ready
 * (the image-holder containers that pre-pull the control-plane images). */
int cpm_image_holders_wait(struct kube_client *kc, const char *pod, int tries, int64_t interval_ns,
			   struct cancel *ct, char *err, size_t errlen);
/* Polls kube-system/pod up to tries times, interval_ns apart, until its annotation
 * control-plane-manager.deckhouse.io/checksum is checksum and its condition Ready is True. */
int cpm_mirror_pod_wait(struct kube_client *kc, const char *pod, const char *checksum, int tries,
			int64_t interval_ns, struct cancel *ct, char *err, size_t errlen);
