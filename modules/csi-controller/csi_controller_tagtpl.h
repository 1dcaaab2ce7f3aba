/* Tag templates: the value of a tagSpecification_N parameter ("key={{ .PVCName | toUpper }}")
 * is a Go text/template evaluated over the PV's or the VolumeSnapshot's names, as upstream's
 * pkg/util/template does. csi_controller_tagtpl.c says which part of text/template is
 * supported; anything else is an error, as a template Go cannot run is upstream. */
#pragma once
#include <stddef.h>

#define CSI_TAGTPL_MAX_IN 4096	/* bytes of template */
#define CSI_TAGTPL_MAX_OUT 4096 /* bytes of expansion, and of any string on the way */

/* The data a template sees: a struct of string fields, as upstream's PVProps. */
struct csi_tagtpl_props {
	const char *type;	   /* Go's name of the type, for messages: "*template.PVProps" */
	const char *const *names;  /* field names without the dot: "PVCName" */
	const char *const *values; /* NULL reads as "" */
	size_t n;
};

/* Upstream's two: PVCName, PVCNamespace, PVName (in that order, values from the
 * external-provisioner's csi.storage.k8s.io/pvc/name, pvc/namespace, pv/name), and
 * VolumeSnapshotName, VolumeSnapshotNamespace, VolumeSnapshotContentName. */
extern const char *const csi_tagtpl_pv_fields[3];
extern const char *const csi_tagtpl_snapshot_fields[3];
#define CSI_TAGTPL_PV_TYPE "*template.PVProps"
#define CSI_TAGTPL_SNAPSHOT_TYPE "*template.VolumeSnapshotProps"

/* Expands in into *ret (malloc'd). -EINVAL with err filled ("function \"foo\" not defined")
 * when in is not a template upstream would run, or its run fails; -ENOMEM. */
int csi_tagtpl_eval(const char *in, const struct csi_tagtpl_props *props, char **ret, char *err,
		    size_t errlen);

/* csi_tagtpl_eval for the value of parameter key ("tagSpecification_1"); a failure's message
 * names the parameter and its value and lists what a template may use:
 * "tagSpecification_1: cannot expand \"...\": function \"foo\" not defined (known: ...)". */
int csi_tagtpl_expand(const char *key, const char *value, const struct csi_tagtpl_props *props,
		      char **ret, char *err, size_t errlen);

/* The variables, functions and actions a template may use, for error messages:
 * "variables .PVCName .PVCNamespace .PVName; functions contains field ...". */
void csi_tagtpl_known(const struct csi_tagtpl_props *props, char *buf, size_t len);
