/* The error type of the CSI services (csi-controller and csi-node): a code from the CSI
 * specification's list and a one-line message, independent of gRPC. A service function
 * returns the code it put in the error (CSI_OK, 0, with an empty message, on success); the
 * gRPC adapter (common/csi/grpc.h) turns it into a gRPC status. -errno values never travel in
 * it: a layer below maps them (csi_error_from_errno()) when it decides what the caller is told.
 *
 *   enum csi_code delete_volume(struct ctrl *c, const char *id, struct csi_error *err)
 *   {
 *           if (!*id)
 *                   return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume id is missing");
 *           ...
 *           return csi_error_ok(err);
 *   }
 */
#pragma once

/* The codes the CSI specification gives meanings to (its numbers are not gRPC's: the adapter
 * maps them). */
enum csi_code {
	CSI_OK = 0,
	CSI_INVALID_ARGUMENT,	 /* a field is missing or malformed */
	CSI_NOT_FOUND,		 /* the volume, snapshot or node does not exist */
	CSI_ALREADY_EXISTS,	 /* exists, incompatibly with the request */
	CSI_FAILED_PRECONDITION, /* the state of the volume or the node forbids it now */
	CSI_OUT_OF_RANGE,	 /* a size the volume type or the limit cannot give */
	CSI_RESOURCE_EXHAUSTED,	 /* a limit is reached (attachments, quota, memory) */
	CSI_ABORTED,		 /* an operation for the same object is in progress; retry */
	CSI_DEADLINE_EXCEEDED,	 /* still in progress when the call's time ran out */
	CSI_UNAVAILABLE,	 /* a dependency (AWS) could not be reached; retry */
	CSI_INTERNAL,		 /* anything else */
	CSI_UNIMPLEMENTED,
	CSI_CANCELLED,
};

#define CSI_ERROR_MESSAGE_MAX 1024

struct csi_error {
	enum csi_code code;
	char message[CSI_ERROR_MESSAGE_MAX]; /* "" for CSI_OK; cut to fit */
};

/* Sets code and the message; returns code. */
enum csi_code csi_error_set(struct csi_error *e, enum csi_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Clears e to CSI_OK; returns CSI_OK. */
enum csi_code csi_error_ok(struct csi_error *e);
/* The code for a -errno of a failed dependency: -ENOENT gives not_found, throttling and
 * transport errors (-EAGAIN, -ETIMEDOUT, -ECONNREFUSED...) CSI_UNAVAILABLE, the rest fallback. */
enum csi_code csi_code_from_errno(int r, enum csi_code not_found, enum csi_code fallback);
/* "INVALID_ARGUMENT", ... ("UNKNOWN" for anything else). */
const char *csi_code_name(enum csi_code code);
