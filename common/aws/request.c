/* One AWS call as values (see request.h). */
#include "common/aws/request.h"

#include <string.h>

void aws_reply_release(struct aws_reply *r)
{
	if (!r)
		return;
	xmlFreeDoc(r->doc);
	cJSON_Delete(r->json);
	memset(r, 0, sizeof(*r));
}
