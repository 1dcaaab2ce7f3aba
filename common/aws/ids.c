/* Format checks of AWS identifiers and metadata values (see ids.h). Hand-written scanners over
 * a bounded string: each step consumes one part of the form and the whole string must be used. */
#include "common/aws/ids.h"

#include <stdio.h>
#include <string.h>

static bool is_lower(char c)
{
	return c >= 'a' && c <= 'z';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f');
}

/* strlen, or max + 1 when s is longer than max (does not read past that). */
static size_t bounded_len(const char *s, size_t max)
{
	return s ? strnlen(s, max + 1) : 0;
}

/* Consumes characters of a class: the number consumed, between min and max, else -1. */
static int span(const char **p, bool (*cls)(char), int min, int max)
{
	int n = 0;

	while (n < max && cls((*p)[n]))
		n++;
	if (n < min || ((*p)[n] && cls((*p)[n])))
		return -1;
	*p += n;
	return n;
}

static bool lit(const char **p, const char *s)
{
	size_t l = strlen(s);

	if (strncmp(*p, s, l) != 0)
		return false;
	*p += l;
	return true;
}

bool aws_ec2_id_valid(const char *id, const char *prefix)
{
	size_t n = bounded_len(id, AWS_EC2_ID_MAX), pl = prefix ? strlen(prefix) : 0;
	const char *p = id;

	if (!id || !pl || n > AWS_EC2_ID_MAX || !lit(&p, prefix))
		return false;
	if (n - pl != 8 && n - pl != 17)
		return false;
	return span(&p, is_hex, 8, 17) >= 0 && !*p;
}

bool aws_instance_id_valid(const char *id)
{
	return aws_ec2_id_valid(id, "i-");
}

bool aws_volume_id_valid(const char *id)
{
	return aws_ec2_id_valid(id, "vol-");
}

bool aws_snapshot_id_valid(const char *id)
{
	return aws_ec2_id_valid(id, "snap-");
}

/* letters, (-letters)+, -digits: consumes a region at *p. */
static bool scan_region(const char **p)
{
	const char *q = *p;
	int words = 0;

	if (span(&q, is_lower, 2, 8) < 0)
		return false;
	while (q[0] == '-' && is_lower(q[1])) {
		q++;
		if (span(&q, is_lower, 1, 12) < 0)
			return false;
		words++;
	}
	if (!words || !lit(&q, "-") || span(&q, is_digit, 1, 2) < 0)
		return false;
	*p = q;
	return true;
}

bool aws_region_valid(const char *region)
{
	const char *p = region;

	if (bounded_len(region, AWS_REGION_MAX) > AWS_REGION_MAX)
		return false;
	return p && scan_region(&p) && !*p;
}

/* What follows the region in a zone name: "a"; "-wl1-bos-wlz-1" (Wavelength Zone);
 * "-lax-1a" (Local Zone). */
static bool scan_zone_suffix(const char *p)
{
	const char *q = p;

	if (is_lower(p[0]) && !p[1])
		return true;
	if (lit(&q, "-wl") && span(&q, is_digit, 1, 2) >= 0 && lit(&q, "-") &&
	    span(&q, is_lower, 2, 8) >= 0 && lit(&q, "-wlz-") && span(&q, is_digit, 1, 2) >= 0 &&
	    !*q)
		return true;
	return lit(&p, "-") && span(&p, is_lower, 2, 8) >= 0 && lit(&p, "-") &&
	       span(&p, is_digit, 1, 2) >= 0 && is_lower(p[0]) && !p[1];
}

bool aws_zone_valid(const char *zone)
{
	const char *p = zone;

	if (bounded_len(zone, AWS_ZONE_MAX) > AWS_ZONE_MAX)
		return false;
	return p && scan_region(&p) && scan_zone_suffix(p);
}

bool aws_zone_in_region(const char *zone, const char *region)
{
	const char *p = zone;

	if (!aws_zone_valid(zone) || !aws_region_valid(region) || !scan_region(&p))
		return false;
	return (size_t)(p - zone) == strlen(region) && strncmp(zone, region, strlen(region)) == 0;
}

bool aws_zone_id_valid(const char *zone_id)
{
	const char *p = zone_id, *q;

	if (!p || bounded_len(zone_id, AWS_ZONE_ID_MAX) > AWS_ZONE_ID_MAX)
		return false;
	/* the region code: use1, usw2, apne1, usgw1 */
	if (span(&p, is_lower, 2, 8) < 0 || span(&p, is_digit, 1, 2) < 0)
		return false;
	q = p;
	if (lit(&q, "-az"))
		return span(&q, is_digit, 1, 2) >= 0 && !*q;
	q = p;
	if (lit(&q, "-wl") && span(&q, is_digit, 1, 2) >= 0 && lit(&q, "-") &&
	    span(&q, is_lower, 2, 8) >= 0 && lit(&q, "-wlz") && span(&q, is_digit, 1, 2) >= 0 &&
	    !*q)
		return true;
	/* Local Zone: -lax1-az1 */
	return lit(&p, "-") && span(&p, is_lower, 2, 8) >= 0 && span(&p, is_digit, 1, 2) >= 0 &&
	       lit(&p, "-az") && span(&p, is_digit, 1, 2) >= 0 && !*p;
}

/* Lower-case letters, digits and single inner dashes: "m7i-flex", "metal-32xl", "6tb1". */
static bool word_valid(const char *s, size_t n)
{
	if (!n || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '-' && s[i + 1] == '-')
			return false;
		if (!is_lower(s[i]) && !is_digit(s[i]) && s[i] != '-')
			return false;
	}
	return true;
}

bool aws_instance_type_valid(const char *type)
{
	size_t n = bounded_len(type, AWS_INSTANCE_TYPE_MAX);
	const char *dot;

	if (!n || n > AWS_INSTANCE_TYPE_MAX || !is_lower(type[0]) || !(dot = strchr(type, '.')))
		return false;
	return word_valid(type, (size_t)(dot - type)) &&
	       word_valid(dot + 1, n - (size_t)(dot - type) - 1);
}

bool aws_outpost_arn_valid(const char *arn)
{
	const char *p = arn;

	if (!p || bounded_len(arn, AWS_OUTPOST_ARN_MAX) > AWS_OUTPOST_ARN_MAX)
		return false;
	/* the partition: aws, aws-cn, aws-us-gov, aws-iso-b */
	if (!lit(&p, "arn:aws"))
		return false;
	while (lit(&p, "-"))
		if (span(&p, is_lower, 1, 8) < 0)
			return false;
	if (!lit(&p, ":outposts:") || !scan_region(&p) || !lit(&p, ":") ||
	    span(&p, is_digit, 12, 12) < 0 || !lit(&p, ":outpost/"))
		return false;
	return aws_ec2_id_valid(p, "op-");
}

/* How one byte is shown: itself, or an escape (piece holds at least 5 bytes). */
static size_t escape_byte(unsigned char c, char *piece)
{
	static const char from[] = "\\\"\n\r\t", to[] = "\\\"nrt";
	const char *e = c ? strchr(from, c) : NULL;

	if (e)
		return (size_t)snprintf(piece, 5, "\\%c", to[e - from]);
	if (c >= 0x20 && c < 0x7f)
		return (size_t)snprintf(piece, 5, "%c", c);
	return (size_t)snprintf(piece, 5, "\\x%02x", c);
}

const char *aws_value_escape(const char *value, char *buf, size_t n)
{
	char suffix[40] = "", piece[5];
	size_t total = 0, len = 0, slen;
	const unsigned char *s;

	if (!n)
		return buf;
	if (!value)
		value = "";
	for (s = (const unsigned char *)value; *s; s++)
		total += escape_byte(*s, piece);
	if (total >= n)
		snprintf(suffix, sizeof(suffix), "...(%zu bytes)", strlen(value));
	slen = strlen(suffix);
	if (slen >= n)
		slen = 0;
	for (s = (const unsigned char *)value; *s; s++) {
		size_t pl = escape_byte(*s, piece);
		if (len + pl + slen >= n)
			break;
		memcpy(buf + len, piece, pl);
		len += pl;
	}
	memcpy(buf + len, suffix, slen);
	buf[len + slen] = '\0';
	return buf;
}
