/* libFuzzer harness: a JSON protocol reply body (SQS, EventBridge), a JSON error with the
 * x-amzn-query-error header, and the metadata identity document. Run with
 * tests/fuzz/run_aws.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/error.h"
#include "common/aws/imds.h"
#include "common/base/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	const char *hdr = NULL;
	char hbuf[128], msg[1024];
	struct aws_error e;
	struct aws_imds_identity id;
	cJSON *root = NULL;
	size_t off = 0;

	/* the first line, when short, doubles as the x-amzn-query-error header */
	for (size_t i = 0; i < size && i < sizeof(hbuf) - 1; i++) {
		if (data[i] == '\n') {
			memcpy(hbuf, s, i);
			hbuf[i] = 0;
			hdr = hbuf;
			break;
		}
	}
	aws_error_parse(&e, 400, "application/x-amz-json-1.0", s, size, hdr);
	for (const char *p = e.message; *p; p++)
		if ((unsigned char)*p < 0x20)
			__builtin_trap();
	for (const char *p = e.code; *p; p++)
		if ((unsigned char)*p < 0x20)
			__builtin_trap();
	aws_error_str(&e, msg, sizeof(msg));
	(void)aws_error_errno(&e);

	if (json_parse(s, size, &root, &off) == 0) {
		/* the fields the client and the SQS / EventBridge users read */
		(void)json_str(root, "NextToken");
		(void)json_str(root, "Messages.0.Body");
		(void)json_str(root, "Messages.0.ReceiptHandle");
		(void)json_str(root, "Attributes.QueueArn");
		char *p = cJSON_PrintUnformatted(root);
		free(p);
		cJSON_Delete(root);
	} else if (off > size) {
		__builtin_trap();
	}
	if (aws_imds_identity_parse(s, size, &id) == 0 &&
	    (!id.instance_id[0] || !id.region[0] || !id.account_id[0]))
		__builtin_trap();
	return 0;
}
