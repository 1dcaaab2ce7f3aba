/* AWS tag keys as the tagging APIs accept them, and the Kubernetes cluster tag
 * kubernetes.io/cluster/<cluster ID> that the ccm and the EBS CSI driver put on (and look for
 * on) instances, volumes and snapshots.
 *
 * A tag key has 1 to 128 Unicode characters: letters, digits, spaces and + - = . _ : / @
 * (AWS's ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$). ASCII is checked exactly; any character beyond
 * ASCII is accepted when it is valid UTF-8 (telling a letter from a symbol would take the
 * Unicode tables) and counts as one character, as AWS counts. */
#pragma once
#include <stddef.h>

#define AWS_CLUSTER_TAG_PREFIX "kubernetes.io/cluster/"
#define AWS_TAG_KEY_MAX 128 /* characters */

/* 0, or -EINVAL with a reason in err: empty, too long, a character AWS does not allow, or
 * invalid UTF-8. The reason quotes at most the first 40 bytes of the key. */
int aws_tag_key_check(const char *key, char *err, size_t errlen);

/* Checks that kubernetes.io/cluster/<id> is a valid tag key (so id has at most 106
 * characters); 0, or -EINVAL with a reason in err that names the cluster ID (its first 40
 * bytes) but not the flag or file, which the caller adds. */
int aws_cluster_id_check(const char *id, char *err, size_t errlen);
