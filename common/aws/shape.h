/* What a successful reply must look like before anything reads it, and how big it may be.
 *
 * A 2xx reply is used only when it is the reply to the action that was called:
 *   Query: the root element is <ActionResponse> (matched by local name), and each container
 *          the callers depend on is present under the result element, even when empty
 *          (<reservationSet/>): an HTML page, another root or a reply without its result set
 *          is never read as "zero items".
 *   JSON:  the body is a JSON object whose listed members have their documented types; an
 *          empty body stands for {} only for actions that have no output.
 * A 2xx body that is an AWS error document (<Response><Errors>, <ErrorResponse>, a JSON
 * {"__type": ...} and nothing else) is handled as that error.
 *
 * The table holds the actions the components call. An action not in it is checked for its
 * root (Query) or for being an object (JSON) only, and gets the default cap of its kind:
 * Describe*, List* and Get* 16 MiB, anything else 2 MiB. Caps are sized from the largest
 * legitimate page (DescribeInstances with 1,000 instances is about 10 MiB). */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/endpoints.h"

#define AWS_SHAPE_MAX_NEED 4

struct aws_reply_shape {
	enum aws_service service;
	const char *action;
	/* Query: paths of elements that must be present under the result element
	 * ("reservationSet", "LoadBalancers"). JSON: "Name:type" for a member that must be
	 * present, "Name?:type" for one that may be absent; type is one of object, array,
	 * string, number, bool. */
	const char *need[AWS_SHAPE_MAX_NEED];
	size_t max_reply; /* bytes; 0: the default of the action's kind */
	bool empty_ok;	  /* JSON: an empty 200 body is the empty output {} */
};

/* The row for an action, or NULL when the table has none. */
const struct aws_reply_shape *aws_reply_shape(enum aws_service s, const char *action);
/* The largest reply body accepted for an action. */
size_t aws_reply_max(enum aws_service s, const char *action);

/* Query: checks a parsed reply. root is the document's root, result the <ActionResult>
 * element or root. 0 when usable; 1 when the document is an AWS error document; -EBADMSG with
 * a one-line reason in why otherwise. */
int aws_reply_check_xml(enum aws_service s, const char *action, const xmlNode *root,
			const xmlNode *result, char *why, size_t n);
/* JSON: the same for a parsed body (NULL for an empty one). */
int aws_reply_check_json(enum aws_service s, const char *action, const cJSON *body, char *why,
			 size_t n);
