/* The CSI services' error type (see error.h). */
#include "common/csi/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

enum csi_code csi_error_set(struct csi_error *e, enum csi_code code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return code;
}

enum csi_code csi_error_ok(struct csi_error *e)
{
	e->code = CSI_OK;
	e->message[0] = '\0';
	return CSI_OK;
}

enum csi_code csi_code_from_errno(int r, enum csi_code not_found, enum csi_code fallback)
{
	switch (r) {
	case -ENOENT:
		return not_found;
	case -EAGAIN:
	case -ETIMEDOUT:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ECONNABORTED:
	case -EPIPE:
		return CSI_UNAVAILABLE;
	default:
		return fallback;
	}
}

const char *csi_code_name(enum csi_code code)
{
	static const char *const names[] = {
	    [CSI_OK] = "OK",
	    [CSI_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
	    [CSI_NOT_FOUND] = "NOT_FOUND",
	    [CSI_ALREADY_EXISTS] = "ALREADY_EXISTS",
	    [CSI_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
	    [CSI_OUT_OF_RANGE] = "OUT_OF_RANGE",
	    [CSI_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
	    [CSI_ABORTED] = "ABORTED",
	    [CSI_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
	    [CSI_UNAVAILABLE] = "UNAVAILABLE",
	    [CSI_INTERNAL] = "INTERNAL",
	    [CSI_UNIMPLEMENTED] = "UNIMPLEMENTED",
	    [CSI_CANCELLED] = "CANCELLED",
	};

	if ((unsigned)code < sizeof(names) / sizeof(names[0]) && names[code])
		return names[code];
	return "UNKNOWN";
}
