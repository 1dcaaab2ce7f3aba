/* aws-k8s aws: calls any AWS API action through the shared client (common/aws/), for people
 * debugging a cluster and for smoke tests. */
#pragma once
#include <stdbool.h>
#include <stdio.h>

#include "common/aws/client.h"

int aws_main(int argc, char **argv);

/* Pieces in aws_tools.c: the imds, batch, creds and endpoint verbs. Each returns an exit
 * code (0, 1 runtime failure, 2 usage). */
int aws_cmd_imds(struct aws_client *c, int argc, char **argv);
int aws_cmd_batch(struct aws_client *c, int argc, char **argv, long long window_ms,
		  long long max_ids);
int aws_cmd_creds(struct aws_client *c);
int aws_cmd_endpoint(struct aws_client *c, int argc, char **argv);
/* In aws_call.c: SERVICE ACTION with Key=Value (Query) or Key=Value, Key:=JSON or one JSON
 * object (JSON services), printed as JSON (compact: on one line; paginate: every page, in an
 * array); and the AWS API metrics (cloudprovider_aws_*, aws_k8s_aws_*) printed to f. */
int aws_cmd_call(struct aws_client *c, const struct aws_service_info *si, const char *action,
		 int argc, char **argv, bool compact, bool paginate);
void aws_print_metrics(FILE *f);
