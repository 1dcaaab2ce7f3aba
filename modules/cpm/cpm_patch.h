/* kubeadm's patches (--patches DIR / patches.directory) applied to the static-pod manifests,
 * and a YAML writer for the result.
 *
 * A patch file is named TARGET[SUFFIX][+PATCHTYPE].{yaml,json}: TARGET one of etcd,
 * kube-apiserver, kube-controller-manager, kube-scheduler (kubeletconfiguration and
 * corednsdeployment are kubeadm's too and ignored here), SUFFIX anything without '.' or '+'
 * (it orders the files), PATCHTYPE strategic (the default), merge (RFC 7386) or json (RFC
 * 6902). Files are applied in the order of their names; a YAML file may hold several
 * documents ("---"), applied in turn. Deckhouse installs its Secret's <comp>.yaml.tpl as
 * <comp>.yaml and writes <comp>999checksum.yaml.
 *
 * The strategic merge knows the Pod's merge keys (containers, initContainers and volumes by
 * name, volumeMounts by mountPath, env by name, ports by containerPort, ...), null deleting a
 * field, and the directives $patch: delete (a list item) and $patch: replace (a map); other
 * lists are replaced, as for a Pod's command and args.
 *
 *   cJSON *pod;  kube_yaml_parse(text, len, KUBE_YAML_TYPED, &pod, err, n);
 *   r = cpm_patches_apply(dir, "kube-apiserver", pod, applied, sizeof(applied), err, n);
 *   struct buf b = BUF_INIT(1 << 20);  cpm_yaml_write(&b, pod);
 */
#pragma once
#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/base/buf.h"

#define CPM_PATCH_FILE_MAX ((size_t)1 << 20)
#define CPM_PATCH_FILES_MAX 64

enum cpm_patch_type { CPM_PATCH_STRATEGIC, CPM_PATCH_MERGE, CPM_PATCH_JSON };

/* Applies one patch document to obj (replaced in place; *obj may change for a JSON patch of
 * the root). -EINVAL with err for a patch that does not apply (a JSON patch's test failing, a
 * path missing). */
int cpm_patch_apply(cJSON **obj, enum cpm_patch_type type, const cJSON *patch, char *err,
		    size_t errlen);
/* Parses a patch file name: 1 and the type when it is for target, 0 when it is not (another
 * target or not a patch file name). */
int cpm_patch_name(const char *name, const char *target, enum cpm_patch_type *ret_type);
/* Applies every patch file of dir for target (missing dir: nothing); the names applied go to
 * applied (comma-separated). Returns how many files were applied, or -errno with err. */
int cpm_patches_apply(const char *dir, const char *target, cJSON **obj, char *applied,
		      size_t applied_len, char *err, size_t errlen);
/* obj as block-style YAML, as kubectl and kubeadm write it (keys in their order). */
int cpm_yaml_write(struct buf *b, const cJSON *obj);
