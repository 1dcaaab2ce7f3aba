"""Certificates made with the openssl CLI (EC P-256 keys: fast to generate)."""
import os
import subprocess


def _openssl(*args):
    r = subprocess.run(["openssl", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (args[0], r.stderr.decode(errors="replace").strip()))


def _subject(cn, orgs=()):
    def esc(s):
        return s.replace("\\", "\\\\").replace("/", "\\/").replace("=", "\\=")
    return "".join("/O=" + esc(o) for o in orgs) + "/CN=" + esc(cn)


def make_ca(directory, name, cn):
    """Writes NAME.crt and NAME.key; returns (crt, key) paths."""
    crt, key = os.path.join(directory, name + ".crt"), os.path.join(directory, name + ".key")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", crt, "-days", "3650", "-subj", _subject(cn),
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")
    return crt, key


def make_cert(directory, name, ca, cn, orgs=(), sans=None, server=False):
    """Writes NAME.crt and NAME.key signed by ca=(crt, key); returns the paths."""
    crt, key = os.path.join(directory, name + ".crt"), os.path.join(directory, name + ".key")
    csr, ext = os.path.join(directory, name + ".csr"), os.path.join(directory, name + ".ext")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", csr, "-subj", _subject(cn, orgs))
    lines = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
             "extendedKeyUsage=" + ("serverAuth" if server else "clientAuth")]
    if sans:
        lines.append("subjectAltName=" + ",".join(sans))
    with open(ext, "w") as f:
        f.write("\n".join(lines) + "\n")
    _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-set_serial",
             str(int.from_bytes(os.urandom(8), "big")), "-days", "3650", "-extfile", ext, "-out", crt)
    os.unlink(csr)
    os.unlink(ext)
    return crt, key
