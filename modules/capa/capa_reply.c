/* The ID in a create reply: a reply without one is a malformed reply, never an empty ID
 * written into spec.network or used by the next step. */
#include <errno.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "modules/capa/capa_cluster.h"

int capa_reply_id(struct capa_scope *s, const xmlNode *result, const char *path,
		  const char *what, char *out, size_t n)
{
	const char *id = aws_xml_text(result, path);
	const char *field = strrchr(path, '/');

	if (!id || !*id || strlen(id) >= n) {
		str_printf(s->err, sizeof(s->err), "%s reply without a %s", what,
			   field ? field + 1 : path);
		out[0] = '\0';
		return -EBADMSG;
	}
	capa_strcpy(out, n, id);
	return 0;
}
