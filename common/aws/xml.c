/* XML replies (see xml.h). */
#include "common/aws/xml.h"

#include <errno.h>
#include <libxml/parser.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"

static pthread_once_t xml_once = PTHREAD_ONCE_INIT;

static void xml_init(void)
{
	xmlInitParser();
}

/* Drops comments and processing instructions, merges adjacent text, checks the depth.
 * Iterative, so a hostile document cannot exhaust the stack. */
static int xml_normalize(xmlNode *root, char *err, size_t errlen)
{
	xmlNode *n = root;
	int depth = 0;

	while (n) {
		if (n->type == XML_ELEMENT_NODE) {
			xmlNode *c = n->children;
			while (c) {
				xmlNode *next = c->next;
				if (c->type == XML_COMMENT_NODE || c->type == XML_PI_NODE) {
					xmlUnlinkNode(c);
					xmlFreeNode(c);
				} else if (c->type == XML_ENTITY_REF_NODE) {
					if (err)
						str_copy(err, errlen, "entity reference in XML");
					return -EBADMSG;
				}
				c = next;
			}
			for (c = n->children; c;) {
				if (c->type == XML_TEXT_NODE && c->next &&
				    c->next->type == XML_TEXT_NODE) {
					xmlTextMerge(c, c->next); /* frees the second */
					continue;
				}
				c = c->next;
			}
			/* descend into the first element child */
			for (c = n->children; c; c = c->next)
				if (c->type == XML_ELEMENT_NODE)
					break;
			if (c) {
				if (++depth > AWS_XML_MAX_DEPTH) {
					if (err)
						str_printf(err, errlen, "XML nested deeper than %d",
							   AWS_XML_MAX_DEPTH);
					return -EBADMSG;
				}
				n = c;
				continue;
			}
		}
		/* next element sibling, or climb */
		for (;;) {
			xmlNode *s;
			if (n == root)
				return 0;
			for (s = n->next; s && s->type != XML_ELEMENT_NODE; s = s->next)
				;
			if (s) {
				n = s;
				break;
			}
			n = n->parent;
			depth--;
			if (!n || n == root)
				return 0;
		}
	}
	return 0;
}

int aws_xml_parse(const char *data, size_t len, xmlDoc **ret, char *err, size_t errlen)
{
	xmlParserCtxt *ctxt;
	xmlDoc *doc;
	xmlNode *root;
	int r;

	if (err && errlen)
		err[0] = 0;
	if (len > AWS_XML_MAX_SIZE || len > INT32_MAX)
		return -EMSGSIZE;
	if (!data || len == 0) {
		if (err)
			str_copy(err, errlen, "empty reply where XML was expected");
		return -EBADMSG;
	}
	pthread_once(&xml_once, xml_init);
	ctxt = xmlNewParserCtxt();
	if (!ctxt)
		return -ENOMEM;
	doc = xmlCtxtReadMemory(ctxt, data, (int)len, NULL, NULL,
				XML_PARSE_NONET | XML_PARSE_NOCDATA | XML_PARSE_NOBLANKS |
				    XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc || !ctxt->wellFormed) {
		const xmlError *e = xmlCtxtGetLastError(ctxt);
		if (err) {
			char msg[200] = "not well-formed";
			if (e && e->message) {
				str_copy(msg, sizeof(msg), e->message);
				str_strip(msg);
			}
			str_printf(err, errlen, "malformed XML at line %d: %s", e ? e->line : 0,
				   msg);
		}
		xmlFreeDoc(doc);
		xmlFreeParserCtxt(ctxt);
		return -EBADMSG;
	}
	xmlFreeParserCtxt(ctxt);
	if (doc->intSubset || doc->extSubset) {
		if (err)
			str_copy(err, errlen, "XML with a document type declaration refused");
		xmlFreeDoc(doc);
		return -EBADMSG;
	}
	root = xmlDocGetRootElement(doc);
	if (!root) {
		if (err)
			str_copy(err, errlen, "XML without a root element");
		xmlFreeDoc(doc);
		return -EBADMSG;
	}
	if ((r = xml_normalize(root, err, errlen)) < 0) {
		xmlFreeDoc(doc);
		return r;
	}
	*ret = doc;
	return 0;
}

const char *aws_xml_name(const xmlNode *n)
{
	return n && n->name ? (const char *)n->name : "";
}

xmlNode *aws_xml_first(const xmlNode *n)
{
	if (!n)
		return NULL;
	for (xmlNode *c = n->children; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE)
			return c;
	return NULL;
}

xmlNode *aws_xml_next(const xmlNode *n)
{
	if (!n)
		return NULL;
	for (xmlNode *c = n->next; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE)
			return c;
	return NULL;
}

xmlNode *aws_xml_child(const xmlNode *n, const char *name)
{
	for (xmlNode *c = aws_xml_first(n); c; c = aws_xml_next(c))
		if (strcmp((const char *)c->name, name) == 0)
			return c;
	return NULL;
}

xmlNode *aws_xml_get(const xmlNode *n, const char *path)
{
	char seg[128];

	if (!n)
		return NULL;
	while (path && *path) {
		size_t l = strcspn(path, "/");
		if (l == 0 || l >= sizeof(seg))
			return NULL;
		memcpy(seg, path, l);
		seg[l] = 0;
		n = aws_xml_child(n, seg);
		if (!n)
			return NULL;
		path += l;
		if (*path == '/')
			path++;
	}
	return (xmlNode *)n;
}

xmlNode *aws_xml_list(const xmlNode *n, const char *path)
{
	return aws_xml_first(aws_xml_get(n, path));
}

size_t aws_xml_count(const xmlNode *n, const char *path)
{
	size_t k = 0;

	for (xmlNode *c = aws_xml_list(n, path); c; c = aws_xml_next(c))
		k++;
	return k;
}

const char *aws_xml_text(const xmlNode *n, const char *path)
{
	const char *text = "";

	n = aws_xml_get(n, path);
	if (!n || n->type != XML_ELEMENT_NODE)
		return NULL;
	for (xmlNode *c = n->children; c; c = c->next) {
		if (c->type == XML_ELEMENT_NODE)
			return NULL;
		if (c->type == XML_TEXT_NODE && c->content)
			text = (const char *)c->content;
	}
	return text;
}

int aws_xml_int(const xmlNode *n, const char *path, long long *ret)
{
	const char *t = aws_xml_text(n, path);

	if (!t)
		return -ENOENT;
	return str_to_ll(t, INT64_MIN, INT64_MAX, ret) < 0 ? -EINVAL : 0;
}

int aws_xml_bool(const xmlNode *n, const char *path, bool *ret)
{
	const char *t = aws_xml_text(n, path);

	if (!t)
		return -ENOENT;
	return str_to_bool(t, ret) < 0 ? -EINVAL : 0;
}

static bool is_list(const xmlNode *n)
{
	const char *first = NULL;
	size_t k = 0;

	for (xmlNode *c = aws_xml_first(n); c; c = aws_xml_next(c), k++) {
		const char *name = (const char *)c->name;
		if (strcmp(name, "item") != 0 && strcmp(name, "member") != 0)
			return false;
		if (!first)
			first = name;
		else if (strcmp(first, name) != 0)
			return false;
	}
	return k > 0;
}

#define XML_JSON_REPEAT_MARK 0x41575358 /* valueint of the arrays made for repeated names */
#define XML_JSON_MAX_FIELDS 20000	/* children of one non-list element */

static cJSON *to_json(const xmlNode *n, int depth)
{
	cJSON *out;
	size_t k = 0;

	if (depth > AWS_XML_MAX_DEPTH + 1)
		return NULL;
	if (!aws_xml_first(n)) {
		const char *t = aws_xml_text(n, NULL);
		return cJSON_CreateString(t ? t : "");
	}
	if (is_list(n)) {
		out = cJSON_CreateArray();
		for (xmlNode *c = aws_xml_first(n); out && c; c = aws_xml_next(c)) {
			cJSON *v = to_json(c, depth + 1);
			if (!v) {
				cJSON_Delete(out);
				return NULL;
			}
			cJSON_AddItemToArray(out, v);
		}
		return out;
	}
	out = cJSON_CreateObject();
	for (xmlNode *c = aws_xml_first(n); out && c; c = aws_xml_next(c)) {
		const char *name = (const char *)c->name;
		cJSON *v, *prev;

		if (++k > XML_JSON_MAX_FIELDS || !(v = to_json(c, depth + 1))) {
			cJSON_Delete(out);
			return NULL;
		}
		prev = cJSON_GetObjectItemCaseSensitive(out, name);
		if (!prev) {
			cJSON_AddItemToObject(out, name, v);
		} else if (cJSON_IsArray(prev) && prev->valueint == XML_JSON_REPEAT_MARK) {
			cJSON_AddItemToArray(prev, v);
		} else {
			/* a repeated name: an array of the first value and this one */
			cJSON *arr = cJSON_CreateArray();
			cJSON *first;
			if (!arr) {
				cJSON_Delete(v);
				cJSON_Delete(out);
				return NULL;
			}
			first = cJSON_DetachItemFromObjectCaseSensitive(out, name);
			cJSON_AddItemToArray(arr, first);
			cJSON_AddItemToArray(arr, v);
			arr->valueint = XML_JSON_REPEAT_MARK;
			cJSON_AddItemToObject(out, name, arr);
		}
	}
	return out;
}

static void clear_marks(cJSON *v)
{
	for (cJSON *c = v ? v->child : NULL; c; c = c->next) {
		if (cJSON_IsArray(c))
			c->valueint = 0;
		clear_marks(c);
	}
}

cJSON *aws_xml_to_json(const xmlNode *n)
{
	cJSON *v;

	if (!n)
		return NULL;
	v = to_json(n, 0);
	clear_marks(v);
	return v;
}
