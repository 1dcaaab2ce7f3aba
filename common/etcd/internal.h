/* What the files of common/etcd share among themselves. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/etcd/etcd.h"

struct http_client;

int etcd_call(struct etcd_client *c, const char *endpoint, const char *path, const char *body,
	      bool idempotent, cJSON **ret_json, struct etcd_error *err);
int etcd_code_errno(int code, const char *msg);
int etcd_json_u64(const cJSON *obj, const char *key, uint64_t *ret);
struct http_client *etcd_client_http(struct etcd_client *c);
int64_t etcd_client_timeout(const struct etcd_client *c);
void etcd_count_call(struct etcd_client *c);
/* The index of the endpoint that answered last. */
size_t etcd_client_preferred(struct etcd_client *c);
/* Whether r says the endpoint could not be reached (so another may be tried). */
bool etcd_reachability_error(int r);
