# shellcheck shell=bash
# A volume attached in moto, made to appear on this machine as a block device: a sparse file
# of the volume's size behind a loop device, and the by-id link the node resolves for that
# volume (modules/csi-node/csi_node_device.c: <device dir>/nvme-Amazon_Elastic_Block_Store_
# vol<id without the dash>; the node also reads the volume's serial back from that link, since a
# loop device has no NVMe serial in sysfs). The node must be started with --device-dir
# "$EBS_FIXTURE_BYID" (csi-node, or ebs-csi-driver node|all), which replaces /dev/disk/by-id.
#
# Source it after tests/lib/testlib.sh (it uses $T_TMP and t_cleanup_add), as root:
#   . "$(dirname "$0")/../lib/ebs_fixture.sh"
#   ebs_fixture_init                      # $EBS_FIXTURE_BYID, the clean-up at exit
#   ebs_fixture_attach vol-0123abcd 1G    # prints the loop device; the link is made
#   ebs_fixture_grow vol-0123abcd 2G      # the file grows and the loop device sees it
#   ebs_fixture_detach vol-0123abcd       # link removed, loop detached, file removed
# Sizes are truncate(1)'s (1G = 1 GiB, as EBS sizes). Every loop device still attached is
# detached at exit, after the mounts under $T_TMP are undone (run the script in a private mount
# namespace, unshare -m, so a failure leaves nothing mounted on the machine).

# The state is kept in files ($EBS_FIXTURE_FILES/<id>.img, <id>.loop holding the loop device),
# not in shell variables, so that the functions also work from a $(...) subshell.
EBS_FIXTURE_BYID=
EBS_FIXTURE_FILES=

# ebs_fixture_usable: 0 when this machine can host the fixture (root, losetup, a free loop
# device); else prints why and returns 1.
ebs_fixture_usable() {
	[ "$(id -u)" = 0 ] || { echo "needs root"; return 1; }
	command -v losetup >/dev/null || { echo "losetup is not installed"; return 1; }
	losetup -f >/dev/null 2>&1 || { echo "no free loop device"; return 1; }
}

# ebs_fixture_init [DIR]: the by-id directory (default $T_TMP/by-id) and the clean-up at exit.
ebs_fixture_init() {
	EBS_FIXTURE_BYID=${1:-$T_TMP/by-id}
	EBS_FIXTURE_FILES=$T_TMP/ebs-fixture
	mkdir -p "$EBS_FIXTURE_BYID" "$EBS_FIXTURE_FILES" || return 1
	t_cleanup_add ebs_fixture_cleanup
}

# ebs_fixture_link VOLUME_ID: the path of the link the node resolves for the volume.
ebs_fixture_link() { printf '%s/nvme-Amazon_Elastic_Block_Store_vol%s\n' "$EBS_FIXTURE_BYID" "${1#vol-}"; }

# ebs_fixture_attach VOLUME_ID SIZE: a sparse file of SIZE, a loop device on it, the link;
# prints the loop device. Attaching a volume already attached prints its device again.
ebs_fixture_attach() {
	local id=$1 size=$2 f l
	[ -n "$EBS_FIXTURE_BYID" ] || { echo "ebs_fixture_init first" >&2; return 1; }
	[[ $id == vol-* ]] || { echo "not a volume id: $id" >&2; return 1; }
	if ebs_fixture_dev "$id"; then return 0; fi
	f=$EBS_FIXTURE_FILES/$id.img
	truncate -s "$size" "$f" || return 1
	l=$(losetup -f --show "$f") || { rm -f "$f"; return 1; }
	echo "$l" >"$EBS_FIXTURE_FILES/$id.loop"
	ln -sfn "$l" "$(ebs_fixture_link "$id")" || return 1
	echo "$l"
}

# ebs_fixture_dev VOLUME_ID: the loop device of an attached volume.
ebs_fixture_dev() { [ -n "$EBS_FIXTURE_FILES" ] && [ -s "$EBS_FIXTURE_FILES/$1.loop" ] && cat "$EBS_FIXTURE_FILES/$1.loop"; }

# ebs_fixture_grow VOLUME_ID SIZE: the volume grew (as after ModifyVolume): the file grows and
# the loop device takes the new size (losetup -c), as the NVMe device of a modified volume.
ebs_fixture_grow() {
	local l
	l=$(ebs_fixture_dev "$1") || { echo "$1 is not attached" >&2; return 1; }
	truncate -s "$2" "$EBS_FIXTURE_FILES/$1.img" && losetup -c "$l"
}

# ebs_fixture_detach VOLUME_ID: the device goes away (as after DetachVolume): link removed,
# loop device detached, file removed. Fails while the device is still in use (mounted).
ebs_fixture_detach() {
	local id=$1 l
	l=$(ebs_fixture_dev "$id") || return 0
	rm -f "$(ebs_fixture_link "$id")"
	losetup -d "$l" || return 1
	rm -f "$EBS_FIXTURE_FILES/$id.img" "$EBS_FIXTURE_FILES/$id.loop"
}

# ebs_fixture_cleanup: at exit: lazy-unmount what is mounted under $T_TMP (deepest first),
# then detach every loop device still attached.
ebs_fixture_cleanup() {
	local f id
	grep -o " ${T_TMP}[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null
	for f in "$EBS_FIXTURE_FILES"/*.loop; do
		[ -e "$f" ] || continue
		id=$(basename "$f" .loop)
		rm -f "$(ebs_fixture_link "$id")"
		losetup -d "$(cat "$f")" 2>/dev/null
		rm -f "$f"
	done
}
