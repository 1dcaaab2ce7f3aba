#!/usr/bin/env bash
# tests: product
# csi-controller and malformed identifiers: a 100 KB garbage snapshot id, ids with a newline
# and a shell command, HTML, upper case, in every call that takes an id. Each is answered
# before any AWS call (counted by the fault proxy in front of moto): INVALID_ARGUMENT, or OK /
# an empty list where the CSI spec asks that for an object that does not exist (DeleteVolume,
# DeleteSnapshot, ControllerUnpublishVolume, ListSnapshots). Never Internal; the message and
# the log carry the value escaped and cut.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

for t in jq curl; do command -v $t >/dev/null || { skip "malformed ids" "$t is needed"; t_summary; }; done
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }

moto_start || { fail "moto starts"; t_summary; }
faultproxy_start "$MOTO_URL" || { fail "fault proxy starts"; t_summary; }
export AWS_ENDPOINT_URL=$FAULTPROXY_URL
csi_ctrl_start || { fail "csi-controller starts"; t_summary; }
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')

calls() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq -r .total; }
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
peer expect "the proxy counts from zero" 0 "$(calls)"

big="snap-$(head -c $((100 * 1024 - 5)) /dev/zero | tr '\0' 'f')"
nl=$'i-123\n;rm'
html='<html><body><h1>404 - Not Found</h1></body></html>'
[ ${#big} = 102400 ] && ok "a 100 KB snapshot id" || fail "a 100 KB snapshot id" "${#big}"

# ---- INVALID_ARGUMENT ----
for id in "$big" "$nl" "$html" snap-0123456789ABCDEF0; do
	short=${id:0:24}
	short=${short//$'\n'/\\n}
	expect "CreateVolume from snapshot '$short': InvalidArgument" InvalidArgument \
		"$(cc_code create-volume --name pvc-bad --from-snapshot "$id" --zone us-east-1a)"
	expect "CreateVolume clone of '$short': InvalidArgument" InvalidArgument \
		"$(cc_code create-volume --name pvc-bad --clone-of "$id" --zone us-east-1a)"
	expect "CreateSnapshot of volume '$short': InvalidArgument" InvalidArgument \
		"$(cc_code create-snapshot --name snap-bad --source-volume "$id")"
	expect "ValidateVolumeCapabilities '$short': InvalidArgument" InvalidArgument \
		"$(cc_code validate-volume-capabilities --volume "$id")"
	expect "ControllerGetVolume '$short': InvalidArgument" InvalidArgument \
		"$(cc_code controller-get-volume --volume "$id")"
	expect "ControllerPublishVolume volume '$short': InvalidArgument" InvalidArgument \
		"$(cc_code controller-publish --volume "$id" --node "$iid")"
	expect "ControllerPublishVolume node '$short': InvalidArgument" InvalidArgument \
		"$(cc_code controller-publish --volume vol-0123456789abcdef0 --node "$id")"
	expect "ControllerExpandVolume '$short': InvalidArgument" InvalidArgument \
		"$(cc_code controller-expand --volume "$id" --size 20Gi)"
	expect "ControllerModifyVolume '$short': InvalidArgument" InvalidArgument \
		"$(cc_code controller-modify --volume "$id" --mutable-param iops=4000)"
done
expect "CreateVolume in an HTML zone: InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name pvc-bad --zone "$html")"
expect "CreateVolume in zone 'us-east-1a\\n;rm': InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name pvc-bad --zone $'us-east-1a\n;rm')"

# ---- what the spec answers for a missing object ----
for id in "$big" "$nl" "$html"; do
	short=${id:0:24}
	short=${short//$'\n'/\\n}
	expect "DeleteSnapshot '$short': OK (no such snapshot can exist)" OK "$(cc_code delete-snapshot --snapshot "$id")"
	expect "DeleteVolume '$short': OK" OK "$(cc_code delete-volume --volume "$id")"
	expect "ControllerUnpublishVolume volume '$short': OK" OK \
		"$(cc_code controller-unpublish --volume "$id" --node "$iid")"
	expect "ControllerUnpublishVolume node '$short': OK" OK \
		"$(cc_code controller-unpublish --volume vol-0123456789abcdef0 --node "$id")"
	expect "ListSnapshots of snapshot '$short': empty" 0 \
		"$(jget "$(cc list-snapshots --snapshot "$id")" '.entries | length')"
	expect "ListSnapshots of volume '$short': empty" 0 \
		"$(jget "$(cc list-snapshots --source-volume "$id")" '.entries | length')"
done

expect "no AWS call for any of them" 0 "$(calls)"

# ---- the message: escaped and cut ----
msg=$(cc create-volume --name pvc-bad --from-snapshot "$big" --zone us-east-1a 2>&1 >/dev/null)
[ ${#msg} -lt 400 ] && ok "the error for a 100 KB id is short (${#msg} bytes)" || fail "the error for a 100 KB id is short" "${#msg} bytes"
grep -q 'source snapshot id "snap-fff.*\.\.\.(102400 bytes)" is malformed' <<<"$msg" &&
	ok "the error names the field and the length" || fail "the error names the field and the length" "$msg"
msg=$(cc controller-publish --volume vol-0123456789abcdef0 --node "$nl" 2>&1 >/dev/null)
grep -qF 'node id (an EC2 instance id) "i-123\n;rm" is malformed' <<<"$msg" &&
	[ "$(wc -l <<<"$msg")" = 1 ] && ok "a newline in an id is escaped in the message" ||
	fail "a newline in an id is escaped in the message" "$msg"
! grep -q '^;rm' "$T_TMP/csi-ctrl.log" && ok "the log has no raw newline from an id" ||
	fail "the log has no raw newline from an id"
expect "the controller still serves" true "$(jget "$(cc probe)" .ready)"

# ---- well-formed ids still reach EC2 ----
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
expect "ControllerGetVolume of a well-formed unknown id: NotFound" NotFound \
	"$(cc_code controller-get-volume --volume vol-0123456789abcdef0)"
expect "DeleteSnapshot of a well-formed unknown id: OK" OK \
	"$(cc_code delete-snapshot --snapshot snap-0123456789abcdef0)"
n=$(calls)
[ "$n" -ge 2 ] && ok "well-formed ids are looked up in EC2 ($n calls)" || fail "well-formed ids are looked up in EC2" "$n calls"
t_summary
