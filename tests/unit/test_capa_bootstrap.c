/* capa bootstrap data: gzip, chunks, secret names, the boothook user data. */
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "modules/capa/capa_bootstrap.h"
#include "tests/unit/harness.h"

#define UID "0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"

TEST(capa_gzip_roundtrip_deterministic)
{
	_cleanup_buf_ struct buf a = BUF_INIT(0), b = BUF_INIT(0), back = BUF_INIT(0);
	const char *data = "#cloud-config\nruncmd:\n  - kubeadm join\n";
	ASSERT_OK(capa_gzip(data, strlen(data), &a));
	ASSERT_OK(capa_gzip(data, strlen(data), &b));
	/* gzip magic, deflate, no mtime: the same input gives the same bytes */
	ASSERT_EQ((unsigned char)a.data[0], 0x1f);
	ASSERT_EQ((unsigned char)a.data[1], 0x8b);
	ASSERT_EQ(a.data[4] | a.data[5] | a.data[6] | a.data[7], 0);
	ASSERT_EQ(a.len, b.len);
	ASSERT_TRUE(memcmp(a.data, b.data, a.len) == 0);
	ASSERT_OK(capa_gunzip(a.data, a.len, 1 << 20, &back));
	ASSERT_STREQ(back.data, data);
	/* a cap on the output, and garbage */
	buf_reset(&back);
	ASSERT_ERR(capa_gunzip(a.data, a.len, 4, &back), E2BIG);
	ASSERT_ERR(capa_gunzip("not gzip at all", 15, 100, &back), EBADMSG);
	ASSERT_ERR(capa_gunzip(a.data, a.len - 3, 1 << 20, &back), EBADMSG);
	ASSERT_ERR(capa_gzip(data, CAPA_BOOTSTRAP_MAX + 1, &b), E2BIG);
}

TEST(capa_secret_names_and_chunks)
{
	char p[CAPA_SECRET_NAME_MAX], n[CAPA_SECRET_NAME_MAX];
	ASSERT_OK(capa_secret_prefix(UID, p, sizeof(p)));
	ASSERT_STREQ(p, "aws.cluster.x-k8s.io/" UID);
	ASSERT_OK(capa_secret_prefix_check(p));
	ASSERT_OK(capa_secret_name(p, 2, n, sizeof(n)));
	ASSERT_STREQ(n, "aws.cluster.x-k8s.io/" UID "-2");
	ASSERT_ERR(capa_secret_prefix("not-a-uid", p, sizeof(p)), EINVAL);
	ASSERT_ERR(capa_secret_prefix("0F8E2A4C-1B3D-4E5F-8A9B-0C1D2E3F4A5B", p, sizeof(p)), EINVAL);
	ASSERT_ERR(capa_secret_prefix_check("a\"; rm -rf /"), EINVAL);
	ASSERT_ERR(capa_secret_prefix_check("$(id)"), EINVAL);
	ASSERT_ERR(capa_secret_prefix_check(""), EINVAL);
	ASSERT_EQ(capa_secret_chunks(0), 1u);
	ASSERT_EQ(capa_secret_chunks(1), 1u);
	ASSERT_EQ(capa_secret_chunks(7000), 1u);
	ASSERT_EQ(capa_secret_chunks(7001), 2u);
	ASSERT_EQ(capa_secret_chunks(21000), 3u);
}

TEST(capa_boothook_shape)
{
	_cleanup_buf_ struct buf u = BUF_INIT(0);
	char boundary[61], want[400];
	const char *prefix = "aws.cluster.x-k8s.io/" UID;
	ASSERT_OK(capa_boothook_userdata(prefix, 3, "us-east-1", NULL, &u));
	ASSERT_OK(capa_mime_boundary(prefix, boundary));
	ASSERT_EQ(strlen(boundary), 60u);
	snprintf(want, sizeof(want),
		 "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"%s\"\n\n\n--%s\r\n"
		 "Content-Type: text/cloud-boothook\r\n\r\n#cloud-boothook\n#!/bin/bash\n",
		 boundary, boundary);
	ASSERT_TRUE(str_has_prefix(u.data, want));
	ASSERT_CONTAINS(u.data, "REGION=\"us-east-1\"\n");
	ASSERT_CONTAINS(u.data, "ENDPOINT=\"\"\n");
	ASSERT_CONTAINS(u.data, "SECRET_PREFIX=\"aws.cluster.x-k8s.io/" UID "\"\n");
	ASSERT_CONTAINS(u.data, "CHUNKS=\"3\"\n");
	ASSERT_CONTAINS(u.data, "MAX_RETRIES=10\n");
	ASSERT_CONTAINS(u.data, "RETRY_DELAY=10");
	ASSERT_CONTAINS(u.data, "FILE=\"/etc/secret-userdata.txt\"");
	ASSERT_CONTAINS(u.data, "get-secret-value --output text --query SecretBinary");
	ASSERT_CONTAINS(u.data, "delete-secret --force-delete-without-recovery");
	ASSERT_CONTAINS(u.data, "gunzip \"${FILE}.gz\"");
	ASSERT_CONTAINS(u.data, "systemctl restart cloud-init");
	snprintf(want, sizeof(want),
		 "\r\n--%s\r\nContent-Type: text/x-include-url\r\n\r\nfile:///etc/secret-userdata.txt\n"
		 "\r\n--%s--\r\n",
		 boundary, boundary);
	ASSERT_TRUE(str_has_suffix(u.data, want));

	/* the same input, the same bytes (a retried RunInstances carries the same user data) */
	_cleanup_buf_ struct buf v = BUF_INIT(0);
	ASSERT_OK(capa_boothook_userdata(prefix, 3, "us-east-1", NULL, &v));
	ASSERT_STREQ(u.data, v.data);

	buf_reset(&v);
	ASSERT_OK(capa_boothook_userdata(prefix, 1, "eu-west-1", "http://127.0.0.1:5000", &v));
	ASSERT_CONTAINS(v.data, "ENDPOINT=\"--endpoint-url http://127.0.0.1:5000\"\n");
	ASSERT_CONTAINS(v.data, "REGION=\"eu-west-1\"");
}

TEST(capa_boothook_refuses_unsafe_values)
{
	_cleanup_buf_ struct buf u = BUF_INIT(0);
	const char *prefix = "aws.cluster.x-k8s.io/" UID;
	ASSERT_ERR(capa_boothook_userdata(prefix, 0, "us-east-1", NULL, &u), EINVAL);
	ASSERT_ERR(capa_boothook_userdata(prefix, CAPA_SECRET_MAX_CHUNKS + 1, "us-east-1", NULL, &u),
		   EINVAL);
	ASSERT_ERR(capa_boothook_userdata(prefix, 1, "us-east-1\"; reboot", NULL, &u), EINVAL);
	ASSERT_ERR(capa_boothook_userdata(prefix, 1, "us-east-1", "http://x/$(id)", &u), EINVAL);
	ASSERT_ERR(capa_boothook_userdata(prefix, 1, "us-east-1", "http://a b", &u), EINVAL);
	ASSERT_ERR(capa_boothook_userdata(prefix, 1, "us-east-1", "file:///etc", &u), EINVAL);
	ASSERT_ERR(capa_boothook_userdata("x`id`", 1, "us-east-1", NULL, &u), EINVAL);
	ASSERT_EQ(u.len, 0u);
}
