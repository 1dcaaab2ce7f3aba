#!/usr/bin/env python3
"""Builds the aws-k8s container image as an OCI image layout archive, without a container engine.

    tools/oci-image.py --binary FILE --out FILE.tar [--version V] [--revision R] [--source URL]
                       [--link NAME]... [--tool NAME]... [--epoch SECONDS] [--dir DIR]

Two layers, the first one changing least:
  1. file system tools: each --tool (mkfs.ext4, xfs_growfs...) copied from this machine with its
     shared-library closure (ldd) and the dynamic loader, the usr-merged top folders (/bin, /sbin,
     /lib, /lib64 -> usr/...) and the tools' configuration (/etc/mke2fs.conf)
  2. aws-k8s: the static binary at /usr/bin/aws-k8s, a symbolic link per --link beside it, the
     CA bundle, /etc/passwd and /etc/group with the non-root user 65532 (nonroot), /tmp

The config runs /usr/bin/aws-k8s as 65532:65532 and carries the OCI labels version, revision,
source and created. The archive is reproducible: every time stamp is --epoch (default
SOURCE_DATE_EPOCH, else 0), entries are sorted, owners numeric (0:0; the user's home is
65532's), gzip without name or time, JSON with sorted keys: two builds of the same input give
the same bytes. Standard library only; needs ldd for the tools.
"""
import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"

USER = 65532
SEARCH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
PATH_ENV = "PATH=" + ":".join(SEARCH)
MERGED = ("bin", "sbin", "lib", "lib64")
# configuration files the tools read when present (mke2fs falls back to built-in defaults
# otherwise, which may differ from the host's)
TOOL_CONFIG = {"mke2fs": ["/etc/mke2fs.conf"]}
ELF_MACHINES = {62: "amd64", 183: "arm64"}


class ImageError(Exception):
    pass


def elf_info(path):
    """(architecture, interpreter or None) of an ELF executable."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise ImageError("%s: not a little-endian 64-bit ELF file" % path)
        machine = int.from_bytes(head[18:20], "little")
        phoff = int.from_bytes(head[32:40], "little")
        phentsize = int.from_bytes(head[54:56], "little")
        phnum = int.from_bytes(head[56:58], "little")
        interp = None
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            ph = f.read(phentsize)
            if int.from_bytes(ph[0:4], "little") == 3:  # PT_INTERP
                off = int.from_bytes(ph[8:16], "little")
                size = int.from_bytes(ph[32:40], "little")
                f.seek(off)
                interp = f.read(size).rstrip(b"\0").decode()
    if machine not in ELF_MACHINES:
        raise ImageError("%s: unknown ELF machine %d" % (path, machine))
    return ELF_MACHINES[machine], interp


def image_path(host_path):
    """Where a file of this machine goes in the image: its folder resolved, under /usr."""
    d = os.path.realpath(os.path.dirname(host_path))
    parts = d.strip("/").split("/")
    if parts[0] in MERGED:
        d = "/usr" + d
    return os.path.join(d, os.path.basename(host_path))


class Layer:
    """The entries of one layer tar: path (no leading /) -> TarInfo and data."""

    def __init__(self, epoch):
        self.epoch = epoch
        self.entries = {}

    def _info(self, path, kind, mode, uid=0, gid=0):
        ti = tarfile.TarInfo(path.strip("/"))
        ti.type, ti.mode, ti.mtime = kind, mode, self.epoch
        ti.uid, ti.gid, ti.uname, ti.gname = uid, gid, "", ""
        return ti

    def _parents(self, path):
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p not in self.entries:
                self.entries[p] = (self._info(p, tarfile.DIRTYPE, 0o755), None)

    def _put(self, ti, data):
        old = self.entries.get(ti.name)
        if old and (old[0].type != ti.type or old[1] != data or old[0].linkname != ti.linkname):
            raise ImageError("/%s is added twice with different contents" % ti.name)
        self.entries[ti.name] = (ti, data)

    def dir(self, path, mode=0o755, uid=0, gid=0):
        self._parents(path)
        self._put(self._info(path, tarfile.DIRTYPE, mode, uid, gid), None)

    def file(self, path, data, mode=0o644):
        self._parents(path)
        ti = self._info(path, tarfile.REGTYPE, mode)
        ti.size = len(data)
        self._put(ti, data)

    def symlink(self, path, target):
        self._parents(path)
        ti = self._info(path, tarfile.SYMTYPE, 0o777)
        ti.linkname = target
        self._put(ti, None)

    def host_file(self, host_path, depth=0):
        """Copies a file of this machine, and every symbolic link on the way to it, to the
        same place in the image (under /usr for the merged folders)."""
        if depth > 40:
            raise ImageError("%s: too many levels of symbolic links" % host_path)
        dest = image_path(host_path)
        if os.path.islink(host_path):
            target = os.readlink(host_path)
            self.symlink(dest, target)
            nxt = target if target.startswith("/") else os.path.join(os.path.dirname(host_path),
                                                                       target)
            self.host_file(os.path.normpath(nxt), depth + 1)
            return
        with open(host_path, "rb") as f:
            data = f.read()
        self.file(dest, data, os.stat(host_path).st_mode & 0o7777)

    def tar(self):
        """The uncompressed tar: entries sorted by path (a folder before what it holds)."""
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
            for name in sorted(self.entries):
                ti, data = self.entries[name]
                t.addfile(ti, io.BytesIO(data) if data is not None else None)
        return out.getvalue()


def find_tool(name):
    for d in SEARCH:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK) and not os.path.isdir(p):
            return p
    raise ImageError("tool %r is not installed in %s" % (name, ":".join(SEARCH)))


LDD_RE = re.compile(r"^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)$")


def closure(path):
    """The shared libraries and the loader a dynamic executable needs, as ldd lists them."""
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    if "not a dynamic executable" in r.stderr + r.stdout or "statically linked" in r.stdout:
        return []
    if r.returncode != 0:
        raise ImageError("ldd %s: %s" % (path, r.stderr.strip()))
    libs = []
    for line in r.stdout.splitlines():
        if "not found" in line:
            raise ImageError("ldd %s: %s" % (path, line.strip()))
        m = LDD_RE.match(line)
        if m:
            libs.append(m.group(1))
    return libs


def packages_of(paths):
    """['e2fsprogs 1.47.0-2', ...]: the Debian packages the files of this machine come from
    (one dpkg -S and one dpkg-query for all; empty where dpkg is missing or knows none)."""
    cands = set()
    for p in paths:
        for c in (p, os.path.realpath(p)):
            cands.update((c, re.sub(r"^/usr/", "/", c)))
    try:
        r = subprocess.run(["dpkg", "-S"] + sorted(cands), capture_output=True, text=True)
        pkgs = sorted({line.split(":")[0] for line in r.stdout.splitlines()
                       if re.match(r"^[a-z0-9][a-z0-9+.-]*(:[a-z0-9]+)?: /", line)})
        if not pkgs:
            return []
        r = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Version}\\n"] + pkgs,
                           capture_output=True, text=True)
    except OSError:
        return []
    return sorted(set(r.stdout.splitlines()))


def tools_layer(epoch, tools, arch):
    layer = Layer(epoch)
    for d in MERGED:
        layer.symlink(d, "usr/" + d)
    files = []
    for name in tools:
        path = find_tool(name)
        t_arch, _ = elf_info(os.path.realpath(path))
        if t_arch != arch:
            raise ImageError("%s is %s, the binary is %s" % (path, t_arch, arch))
        files.append(path)
        files += closure(path)
        files += [c for c in TOOL_CONFIG.get(os.path.basename(os.path.realpath(path)), [])
                  if os.path.exists(c)]
    for f in files:
        layer.host_file(f)
    return layer, packages_of(files)


def binary_layer(epoch, binary, links, ca_bundle):
    layer = Layer(epoch)
    with open(binary, "rb") as f:
        layer.file("/usr/bin/aws-k8s", f.read(), 0o755)
    for n in links:
        layer.symlink("/usr/bin/" + n, "aws-k8s")
    with open(ca_bundle, "rb") as f:
        layer.file("/etc/ssl/certs/ca-certificates.crt", f.read())
    # where OpenSSL (OPENSSLDIR /usr/lib/ssl on Debian) looks by default
    layer.symlink("/usr/lib/ssl/cert.pem", "/etc/ssl/certs/ca-certificates.crt")
    layer.symlink("/usr/lib/ssl/certs", "/etc/ssl/certs")
    layer.file("/etc/passwd", ("root:x:0:0:root:/root:/sbin/nologin\n"
                               "nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n"
                               % (USER, USER)).encode())
    layer.file("/etc/group", ("root:x:0:\nnonroot:x:%d:\n" % USER).encode())
    layer.dir("/home/nonroot", 0o700, USER, USER)
    layer.dir("/root", 0o700)
    layer.dir("/tmp", 0o1777)
    return layer


def source_url(url):
    """The repository's address for the label, without credentials: an https URL for the
    scp-like form (git@github.com:o/r.git), user and password dropped, no trailing .git."""
    m = re.match(r"^[\w.-]+@([\w.-]+):(?!//)(.+)$", url)
    if m:
        url = "https://%s/%s" % (m.group(1), m.group(2))
    url = re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url)
    return re.sub(r"\.git/?$", "", url)


def canonical_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def descriptor(media_type, data, **extra):
    d = {"mediaType": media_type, "digest": sha256(data), "size": len(data)}
    d.update(extra)
    return d


def build(args):
    arch, interp = elf_info(args.binary)
    if interp:
        raise ImageError("%s is dynamically linked (interpreter %s): the image needs the static "
                         "binary (make static)" % (args.binary, interp))
    created = datetime.datetime.fromtimestamp(args.epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    tools, pkgs = tools_layer(args.epoch, args.tool, arch)
    layers = [
        (tools, "file system tools: %s; from %s" % (" ".join(args.tool) or "none",
                                                    ", ".join(pkgs) or "nothing")),
        (binary_layer(args.epoch, args.binary, args.link, args.ca_bundle),
         "aws-k8s %s: /usr/bin/aws-k8s, links %s, CA bundle, passwd and group"
         % (args.version, " ".join(args.link) or "none")),
    ]
    blobs = {}
    diff_ids, layer_descs, history, raw_sizes = [], [], [], []
    for layer, what in layers:
        raw = layer.tar()
        gz = gzip.compress(raw, compresslevel=9, mtime=0)
        raw_sizes.append(len(raw))
        diff_ids.append(sha256(raw))
        layer_descs.append(descriptor(MT_LAYER, gz))
        blobs[sha256(gz)] = gz
        history.append({"created": created, "created_by": "tools/oci-image.py", "comment": what})
    labels = {"org.opencontainers.image.title": "aws-k8s",
              "org.opencontainers.image.version": args.version,
              "org.opencontainers.image.created": created}
    if args.revision:
        labels["org.opencontainers.image.revision"] = args.revision
    if args.source:
        labels["org.opencontainers.image.source"] = source_url(args.source)
    config = {
        "created": created,
        "architecture": arch,
        "os": "linux",
        "config": {"User": "%d:%d" % (USER, USER), "Entrypoint": ["/usr/bin/aws-k8s"],
                   "Env": [PATH_ENV], "WorkingDir": "/", "Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": history,
    }
    cfg = canonical_json(config)
    blobs[sha256(cfg)] = cfg
    manifest = canonical_json({"schemaVersion": 2, "mediaType": MT_MANIFEST,
                               "config": descriptor(MT_CONFIG, cfg), "layers": layer_descs})
    blobs[sha256(manifest)] = manifest
    index = canonical_json({
        "schemaVersion": 2, "mediaType": MT_INDEX,
        "manifests": [descriptor(MT_MANIFEST, manifest,
                                 platform={"architecture": arch, "os": "linux"},
                                 annotations={"org.opencontainers.image.ref.name": args.version})],
    })
    files = {"oci-layout": canonical_json({"imageLayoutVersion": "1.0.0"}), "index.json": index}
    for digest, data in blobs.items():
        files["blobs/sha256/" + digest.split(":")[1]] = data
    return files, layer_descs, raw_sizes


def write_archive(files, out, epoch):
    outer = Layer(epoch)
    for name, data in files.items():
        outer.file(name, data)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(outer.tar())
    os.replace(tmp, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True, help="the static aws-k8s")
    ap.add_argument("--out", required=True, help="the OCI image layout archive to write")
    ap.add_argument("--dir", help="also write the layout, unpacked, to this folder")
    ap.add_argument("--version", default="0.0.0")
    ap.add_argument("--revision", default="", help="the git commit")
    ap.add_argument("--source", default="", help="the repository's address")
    ap.add_argument("--link", action="append", default=[], help="a name linked to aws-k8s")
    ap.add_argument("--tool", action="append", default=[], help="a program of this machine "
                    "copied with its libraries (found in %s)" % ":".join(SEARCH))
    ap.add_argument("--ca-bundle", default="/etc/ssl/certs/ca-certificates.crt")
    ap.add_argument("--epoch", type=int, default=os.environ.get("SOURCE_DATE_EPOCH") or "0",
                    help="every time stamp (default SOURCE_DATE_EPOCH, else 0)")
    args = ap.parse_args()
    try:
        files, descs, raw_sizes = build(args)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        write_archive(files, args.out, args.epoch)
        if args.dir:
            for name, data in files.items():
                p = os.path.join(args.dir, name)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "wb") as f:
                    f.write(data)
    except (ImageError, OSError) as e:
        print("oci-image: %s" % e, file=sys.stderr)
        return 1
    index = json.loads(files["index.json"])
    print("oci-image: %s: %s, manifest %s" % (args.out, args.version,
                                               index["manifests"][0]["digest"]))
    for i, (d, raw) in enumerate(zip(descs, raw_sizes)):
        print("  layer %d: %s, %d bytes compressed, %d uncompressed" % (i + 1, d["digest"],
                                                                        d["size"], raw))
    print("  total: %d bytes compressed, %d uncompressed" % (sum(d["size"] for d in descs),
                                                              sum(raw_sizes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
