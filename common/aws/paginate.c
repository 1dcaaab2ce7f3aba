/* Pagination over NextToken / Marker (see client.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/xml.h"
#include "common/base/json.h"

#define DEFAULT_MAX_PAGES 10000

static int copy_query(const struct aws_query *src, struct aws_query *dst)
{
	int r;

	aws_query_init(dst);
	for (size_t i = 0; src && i < src->n; i++) {
		if ((r = aws_query_add(dst, src->keys[i], src->values[i])) < 0) {
			aws_query_release(dst);
			return r;
		}
	}
	if (src)
		dst->n_filters = src->n_filters;
	return 0;
}

/* Remembers the last two tokens to detect a server that sends the same one again. */
struct token_state {
	char *last;
};

static int next_token(struct token_state *ts, const char *tok, bool *done)
{
	char *copy;

	*done = !tok || !*tok;
	if (*done)
		return 0;
	if (ts->last && strcmp(ts->last, tok) == 0)
		return -ELOOP;
	copy = strdup(tok);
	if (!copy)
		return -ENOMEM;
	free(ts->last);
	ts->last = copy;
	return 0;
}

/* The page loop of both protocols: q for the Query protocol (XML replies), else j (JSON). */
static int paginate(struct aws_client *c, enum aws_service s, const char *action,
		    struct aws_query *q, cJSON *j, const struct aws_paginate *p,
		    struct aws_error *err)
{
	struct token_state ts = {0};
	unsigned max = p->max_pages ? p->max_pages : DEFAULT_MAX_PAGES;
	int r = 0;

	for (unsigned page = 0;; page++) {
		struct aws_reply rep = {0};
		bool done;

		if (page >= max) {
			aws_error_set(err, 0, "", "%s: more than %u pages", action, max);
			r = -E2BIG;
			break;
		}
		r = q ? aws_call_query(c, s, action, q, &rep, err)
		      : aws_call_json(c, s, action, j, &rep, err);
		if (r < 0)
			break;
		r = p->on_page(p->ud, &rep);
		if (r == 0)
			r = next_token(&ts,
				       q ? aws_xml_text(rep.result, p->reply_field)
					 : json_str(rep.json, p->reply_field),
				       &done);
		else
			done = true;
		if (r == -ELOOP)
			aws_error_set(err, rep.status, "", "%s: the server repeated a page token",
				      action);
		aws_reply_release(&rep);
		if (r < 0 || done)
			break;
		r = q ? aws_query_set(q, p->token_param, ts.last)
		      : json_set_str(j, p->token_param, ts.last);
		if (r < 0)
			break;
	}
	free(ts.last);
	return r < 0 ? r : 0;
}

int aws_paginate_query(struct aws_client *c, enum aws_service s, const char *action,
		       const struct aws_query *q, const struct aws_paginate *p,
		       struct aws_error *err)
{
	struct aws_query cur;
	int r;

	if (!p || !p->token_param || !p->reply_field || !p->on_page)
		return -EINVAL;
	if ((r = copy_query(q, &cur)) < 0)
		return r;
	r = paginate(c, s, action, &cur, NULL, p, err);
	aws_query_release(&cur);
	return r;
}

int aws_paginate_json(struct aws_client *c, enum aws_service s, const char *action,
		      const cJSON *input, const struct aws_paginate *p, struct aws_error *err)
{
	cJSON *cur;
	int r;

	if (!p || !p->token_param || !p->reply_field || !p->on_page)
		return -EINVAL;
	cur = input ? cJSON_Duplicate(input, true) : cJSON_CreateObject();
	if (!cur)
		return -ENOMEM;
	r = paginate(c, s, action, NULL, cur, p, err);
	cJSON_Delete(cur);
	return r;
}
