#!/usr/bin/env python3
"""Generates sigv4_vectors.json: requests signed by botocore's SigV4Auth at a fixed time.

    python3 tests/data/aws/gen_sigv4_vectors.py > tests/data/aws/sigv4_vectors.json

The unit test (tests/unit/test_aws_sigv4.c) signs the same requests with common/aws/sigv4.c and
compares the canonical request, the string to sign and the Authorization header byte for byte.
The output is deterministic (fixed clock, sorted keys), so re-running it gives the same file.

Query protocol bodies are made by botocore itself (its query serializer and its request
preparation, which form-encodes with urlencode: a space as '+'), and each such vector also keeps
the parameters in "form" ([[name, value], ...], Action and Version first): test_aws_query.c
encodes them with common/aws/query.c and must get the body byte for byte. Query strings in URLs
are built with quote() (a space as %20), as SigV4 wants them.
"""
import datetime
import json
import sys
from unittest import mock
from urllib.parse import quote, urlsplit

import botocore
from botocore.auth import SigV4Auth, _host_from_url
from botocore import session as bsession
from botocore.awsrequest import AWSRequest, create_request_object, prepare_request_dict
from botocore.credentials import Credentials
from botocore.serialize import create_serializer

AK = "AKIDEXAMPLE"
SK = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = ("IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+token/with+slash=="
         "AQoDYXdzEJr" * 3)


def q(s):
    return quote(s, safe="-_.~")


def url_query(pairs):
    return "&".join(f"{q(k)}={q(v)}" for k, v in pairs)


def form(pairs):
    """(pairs, body): the body botocore's request preparation makes of these Query parameters."""
    pairs = [list(p) for p in pairs]
    body = AWSRequest(method="POST", url="https://example.com/", data=dict(pairs)).body
    return pairs, body.decode("ascii")


def call_form(service, operation, params):
    """(pairs, body): what a botocore client sends for the call, from its query serializer."""
    model = bsession.get_session().get_service_model(service)
    d = create_serializer(model.metadata["protocol"]).serialize_to_request(
        params, model.operation_model(operation))
    pairs = [[k, v] for k, v in d["body"].items()]
    prepare_request_dict(d, endpoint_url="https://example.com")
    return pairs, create_request_object(d).body.decode("ascii")


FORM_CT = "application/x-www-form-urlencoded; charset=utf-8"

V = []


def vec(name, method, url, service, region="us-east-1", headers=(), body="", token=None,
        ts="20150830T123600Z"):
    params = None
    if isinstance(body, tuple):
        params, body = body
    V.append(dict(name=name, method=method, url=url, service=service, region=region,
                  headers=[list(h) for h in headers], body=body, form=params, token=token,
                  ts=ts))


ec2 = "https://ec2.us-east-1.amazonaws.com"
vec("ec2_get_root", "GET", ec2 + "/", "ec2")
vec("ec2_post_describe", "POST", ec2 + "/", "ec2", headers=[("Content-Type", FORM_CT)],
    body=form([("Action", "DescribeInstances"), ("Version", "2016-11-15")]))
vec("ec2_post_token", "POST", ec2 + "/", "ec2", headers=[("Content-Type", FORM_CT)],
    body=form([("Action", "DescribeVolumes"), ("Version", "2016-11-15"), ("VolumeId.1", "vol-1")]),
    token=TOKEN)
vec("ec2_post_filter_space", "POST", ec2 + "/", "ec2", headers=[("Content-Type", FORM_CT)],
    body=call_form("ec2", "DescribeInstances", {"Filters": [
        {"Name": "tag:Name", "Values": ["a b", "x+y/z~*", "z\u00fcrich \u20ac", " "]},
        {"Name": "tag:odd key/+", "Values": ["a b&c=d/e+f%20~*"]}]}))
vec("ec2_get_filters", "GET", ec2 + "/?" + url_query([
    ("Action", "DescribeInstances"), ("Version", "2016-11-15"), ("Filter.1.Name", "tag:Name"),
    ("Filter.1.Value.1", "a b/c*"), ("Filter.2.Name", "instance-state-name"),
    ("Filter.2.Value.1", "running")]), "ec2")
vec("query_reserved_chars", "GET", ec2 + "/?" + url_query([
    ("Action", "DescribeTags"), ("k!*'();:@&=+$,/?#[]", "v!*'();:@&=+$,/?#[] %~")]), "ec2")
vec("query_empty_values", "GET", ec2 + "/?a=&b&c=&Action=DescribeRegions", "ec2")
vec("query_repeated_keys", "GET", ec2 + "/?b=2&a=3&b=1&a=1&a=2", "ec2")
vec("query_case_order", "GET", ec2 + "/?b=1&B=2&a=3&A=4&_=5&~=6&-=7&.=8&0=9", "ec2")
vec("query_unicode", "GET", ec2 + "/?" + url_query([("name", "zürich €"), ("Ω", "ω")]), "ec2")
vec("path_double_slash", "GET", ec2 + "//foo//bar//", "ec2")
vec("path_dots", "GET", ec2 + "/a/./b/../c/.././d", "ec2")
vec("path_dotdot_above_root", "GET", ec2 + "/../../x", "ec2")
vec("path_unicode_raw", "GET", ec2 + "/ünïcödé/€", "ec2")
vec("path_already_encoded", "GET", ec2 + "/a%20b/%E2%82%AC/c%2Fd", "ec2")
vec("path_reserved", "GET", ec2 + "/a:b@c!$'()*+,;=/", "ec2")
vec("path_tilde_space", "GET", ec2 + "/~user/x y", "ec2")
vec("elbv2_post", "POST", "https://elasticloadbalancing.eu-central-1.amazonaws.com/",
    "elasticloadbalancing", region="eu-central-1", headers=[("Content-Type", FORM_CT)],
    body=form([("Action", "CreateListener"), ("Version", "2015-12-01"),
               ("LoadBalancerArn", "arn:aws:elasticloadbalancing:eu-central-1:123456789012:"
                                   "loadbalancer/net/a/b"),
               ("DefaultActions.member.1.Type", "forward"), ("Port", "80"), ("Protocol", "TCP")]))
vec("elb_classic_post", "POST", "https://elasticloadbalancing.us-west-2.amazonaws.com/",
    "elasticloadbalancing", region="us-west-2", headers=[("Content-Type", FORM_CT)],
    body=form([("Action", "CreateLoadBalancer"), ("Version", "2012-06-01"),
               ("LoadBalancerName", "a"), ("Listeners.member.1.Protocol", "TCP"),
               ("Listeners.member.1.LoadBalancerPort", "80"),
               ("Listeners.member.1.InstancePort", "30080")]), token=TOKEN)
vec("autoscaling_post", "POST", "https://autoscaling.us-east-2.amazonaws.com/", "autoscaling",
    region="us-east-2", headers=[("Content-Type", FORM_CT)],
    body=form([("Action", "DescribeAutoScalingInstances"), ("Version", "2011-01-01"),
               ("InstanceIds.member.1", "i-0123456789abcdef0")]))
vec("sts_get_caller_identity", "POST", "https://sts.amazonaws.com/", "sts",
    headers=[("Content-Type", FORM_CT)],
    body=form([("Action", "GetCallerIdentity"), ("Version", "2011-06-15")]))
vec("sts_assume_role_token", "POST", "https://sts.us-west-1.amazonaws.com/", "sts",
    region="us-west-1", headers=[("Content-Type", FORM_CT)],
    body=form([("Action", "AssumeRole"), ("Version", "2011-06-15"),
               ("RoleArn", "arn:aws:iam::123456789012:role/ccm"),
               ("RoleSessionName", "aws-k8s"), ("DurationSeconds", "900")]), token=TOKEN)
vec("sqs_json", "POST", "https://sqs.us-east-1.amazonaws.com/", "sqs",
    headers=[("Content-Type", "application/x-amz-json-1.0"),
             ("X-Amz-Target", "AmazonSQS.ReceiveMessage")],
    body=json.dumps({"QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
                     "MaxNumberOfMessages": 10, "WaitTimeSeconds": 20}, sort_keys=True))
vec("events_json_token", "POST", "https://events.ap-southeast-2.amazonaws.com/", "events",
    region="ap-southeast-2",
    headers=[("Content-Type", "application/x-amz-json-1.1"), ("X-Amz-Target", "AWSEvents.PutEvents")],
    body=json.dumps({"Entries": [{"Source": "aws-k8s.test", "DetailType": "t",
                                  "Detail": "{\"ü\": \"€\"}"}]}, ensure_ascii=False),
    token=TOKEN)
vec("ebs_get_path_query", "GET", "https://ebs.us-east-1.amazonaws.com/snapshots/snap-0123/blocks?"
    "maxResults=100&pageToken=a%2Bb%3D%3D", "ebs")
vec("empty_body_post", "POST", ec2 + "/", "ec2", headers=[("Content-Type", FORM_CT)], body="")
vec("header_spaces_and_repeats", "POST", ec2 + "/", "ec2",
    headers=[("Content-Type", FORM_CT), ("X-Amz-Meta-A", "  one   two  three "),
             ("x-amz-meta-a", "four\tfive"), ("X-Amz-Meta-B", ""),
             ("User-Agent", "aws-k8s/1.0 (not signed)"), ("Expect", "100-continue")],
    body="Action=DescribeRegions")
vec("host_with_port", "POST", "http://127.0.0.1:5055/", "ec2", headers=[("Content-Type", FORM_CT)],
    body="Action=DescribeRegions&Version=2016-11-15")
vec("host_default_port_stripped", "GET", "https://ec2.us-east-1.amazonaws.com:443/", "ec2")
vec("cn_partition", "POST", "https://ec2.cn-north-1.amazonaws.com.cn/", "ec2", region="cn-north-1",
    headers=[("Content-Type", FORM_CT)], body="Action=DescribeInstances&Version=2016-11-15",
    ts="20240229T235959Z")
vec("us_gov_partition", "POST", "https://ec2.us-gov-west-1.amazonaws.com/", "ec2",
    region="us-gov-west-1", headers=[("Content-Type", FORM_CT)],
    body="Action=DescribeInstances&Version=2016-11-15", token=TOKEN, ts="20991231T000000Z")
vec("large_body", "POST", ec2 + "/", "ec2", headers=[("Content-Type", FORM_CT)],
    body=form([("Action", "DescribeInstances")] +
              [(f"InstanceId.{i}", f"i-{i:017x}") for i in range(1, 501)])[1])  # no "form": 500 pairs


class Recorder(SigV4Auth):
    """Keeps the canonical request and string to sign computed inside add_auth()."""

    def canonical_request(self, request):
        self.cr = super().canonical_request(request)
        return self.cr

    def string_to_sign(self, request, canonical_request):
        self.sts = super().string_to_sign(request, canonical_request)
        return self.sts


def sign(v):
    creds = Credentials(AK, SK, v["token"])
    req = AWSRequest(method=v["method"], url=v["url"], data=v["body"].encode("utf-8"))
    for n, val in v["headers"]:
        req.headers.add_header(n, val)
    auth = Recorder(creds, v["service"], v["region"])
    now = datetime.datetime.strptime(v["ts"], "%Y%m%dT%H%M%SZ")
    with mock.patch("botocore.auth.get_current_datetime", return_value=now):
        auth.add_auth(req)
    cr, sts = auth.cr, auth.sts
    parts = urlsplit(v["url"])
    return dict(
        name=v["name"], method=v["method"], url=v["url"], host=_host_from_url(v["url"]),
        path=parts.path, query=parts.query, headers=v["headers"], body=v["body"], form=v["form"],
        service=v["service"], region=v["region"], access_key=AK, secret_key=SK,
        token=v["token"], timestamp=v["ts"], canonical_request=cr, string_to_sign=sts,
        authorization=req.headers["Authorization"], amz_date=req.headers["X-Amz-Date"])


out = {"generator": "botocore " + botocore.__version__ + " SigV4Auth",
       "vectors": [sign(v) for v in V]}
json.dump(out, sys.stdout, indent=1, sort_keys=True, ensure_ascii=False)
sys.stdout.write("\n")
