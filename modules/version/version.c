/* aws-k8s version: the version, the git commit and the versions of the linked libraries. */
#include "modules/version/version.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <grpc/grpc.h>
#include <libxml/parser.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <yaml.h>

#include "awsk8s_version.h"
#include "common/base/flags.h"

static const char version_usage[] =
	"Prints the version of aws-k8s, the git commit it was built from, and the versions of\n"
	"the libraries it is linked with.";

static const struct flag version_flags[] = { { NULL } };

int version_main(int argc, char **argv)
{
	int n = flags_parse("version", version_usage, version_flags, argc, argv);
	if (n < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s version: unexpected argument '%s'\n", argv[0]);
		return 2;
	}
	printf("aws-k8s %s (commit %s)\n", AWSK8S_VERSION, AWSK8S_COMMIT);
	printf("libcurl %s\n", curl_version_info(CURLVERSION_NOW)->version);
	printf("OpenSSL %s\n", OpenSSL_version(OPENSSL_VERSION_STRING));
	printf("cJSON %s\n", cJSON_Version());
	printf("libyaml %s\n", yaml_get_version_string());
	printf("libmicrohttpd %s\n", MHD_get_version());
	printf("libxml2 %s\n", xmlParserVersion);
	printf("gRPC core %s\n", grpc_version_string());
	printf("protobuf-c %s\n", protobuf_c_version());
	return 0;
}
