/* libFuzzer harness: a Query protocol reply body. Whatever the bytes, parsing either fails
 * cleanly or gives a tree that the helpers walk and the generic XML-to-JSON conversion turns
 * into JSON; the error extraction always fills a bounded, printable message. Never a crash,
 * a leak or undefined behaviour. Run with tests/fuzz/run_aws.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/error.h"
#include "common/aws/xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const xmlNode *n, int depth)
{
	long long v;
	bool b;

	if (!n || depth > AWS_XML_MAX_DEPTH + 2)
		return;
	(void)aws_xml_text(n, NULL);
	(void)aws_xml_int(n, NULL, &v);
	(void)aws_xml_bool(n, NULL, &b);
	(void)aws_xml_count(n, NULL);
	for (const xmlNode *c = aws_xml_first(n); c; c = aws_xml_next(c))
		walk(c, depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct aws_error e;
	char err[256], msg[1024];
	xmlDoc *doc = NULL;

	if (aws_xml_parse(s, size, &doc, err, sizeof(err)) == 0) {
		xmlNode *root = xmlDocGetRootElement(doc);
		cJSON *j;
		if (!root)
			__builtin_trap();
		walk(root, 0);
		/* the paths the controllers use */
		for (xmlNode *r = aws_xml_list(root, "reservationSet"); r; r = aws_xml_next(r))
			for (xmlNode *i = aws_xml_list(r, "instancesSet"); i; i = aws_xml_next(i))
				(void)aws_xml_text(i, "instanceState/name");
		(void)aws_xml_text(root, "Errors/Error/Code");
		(void)aws_xml_get(root, "a/b/c/d/e");
		j = aws_xml_to_json(root);
		if (j) {
			char *p = cJSON_PrintUnformatted(j);
			free(p);
			cJSON_Delete(j);
		}
		xmlFreeDoc(doc);
	} else if (!err[0]) {
		__builtin_trap(); /* a failure always says why */
	}
	aws_error_parse(&e, 400, "text/xml", s, size, NULL);
	if (strlen(e.code) >= sizeof(e.code) || strlen(e.message) >= sizeof(e.message))
		__builtin_trap();
	for (const char *p = e.message; *p; p++)
		if ((unsigned char)*p < 0x20)
			__builtin_trap(); /* one log line */
	(void)aws_error_errno(&e);
	(void)aws_error_retryable(&e);
	aws_error_str(&e, msg, sizeof(msg));
	return 0;
}
