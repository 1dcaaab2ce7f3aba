/* XML replies of the Query protocol services, parsed with libxml2.
 *
 * Elements are matched by local name only, never by namespace (moto's namespaces differ from
 * AWS's). The parser refuses DTDs, entities and network access, caps the size and the depth,
 * merges CDATA into text, and drops white-space-only text between elements, so that a leaf's
 * text is one node:
 *
 *   xmlDoc *doc;
 *   if ((r = aws_xml_parse(body, len, &doc, errbuf, sizeof(errbuf))) < 0) ...
 *   xmlNode *res = xmlDocGetRootElement(doc);
 *   for (xmlNode *rs = aws_xml_list(res, "reservationSet"); rs; rs = aws_xml_next(rs))
 *           for (xmlNode *i = aws_xml_list(rs, "instancesSet"); i; i = aws_xml_next(i))
 *                   printf("%s\n", aws_xml_text(i, "instanceId"));
 *   xmlFreeDoc(doc);
 */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>

#define AWS_XML_MAX_SIZE ((size_t)256 << 20)
#define AWS_XML_MAX_DEPTH 64

/* Parses len bytes. -EBADMSG with a one-line reason in err (when not NULL) for malformed,
 * truncated or empty XML, a DTD, or nesting deeper than AWS_XML_MAX_DEPTH; -EMSGSIZE over
 * AWS_XML_MAX_SIZE; -ENOMEM. */
int aws_xml_parse(const char *data, size_t len, xmlDoc **ret, char *err, size_t errlen);

/* The first element child of n with this local name, or NULL (n may be NULL). */
xmlNode *aws_xml_child(const xmlNode *n, const char *name);
/* Follows a '/'-separated path of local names ("Errors/Error/Code"); NULL or "" is n. */
xmlNode *aws_xml_get(const xmlNode *n, const char *path);
/* The first element child of an element (any name), and the next element sibling (any name). */
xmlNode *aws_xml_first(const xmlNode *n);
xmlNode *aws_xml_next(const xmlNode *n);
/* The first member of the list element at path ("instancesSet" -> its first <item>, or
 * "LoadBalancerDescriptions" -> its first <member>); iterate with aws_xml_next(). */
xmlNode *aws_xml_list(const xmlNode *n, const char *path);
/* The number of element children of the element at path (0 when absent). */
size_t aws_xml_count(const xmlNode *n, const char *path);

/* The text of the element at path: "" for an empty element, NULL when the element is absent
 * or holds elements. Points into the document. */
const char *aws_xml_text(const xmlNode *n, const char *path);
/* Typed getters: -ENOENT when absent, -EINVAL when not a number / boolean. */
int aws_xml_int(const xmlNode *n, const char *path, long long *ret);
int aws_xml_bool(const xmlNode *n, const char *path, bool *ret);
/* The local name of an element ("" for NULL). */
const char *aws_xml_name(const xmlNode *n);

/* Converts an element to JSON without a schema: a leaf becomes a string, an element whose
 * children are all <item> or all <member> becomes an array, other elements become objects
 * (a name repeated among siblings becomes an array). NULL on allocation failure. */
cJSON *aws_xml_to_json(const xmlNode *n);
