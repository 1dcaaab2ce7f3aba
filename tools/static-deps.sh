#!/usr/bin/env bash
# The libraries of `make static` that Debian 12 ships no usable static archive of, built from
# Debian's own source packages at pinned versions into a cache under build/deps/:
#   build/deps/<package>-<version>/   the unpacked source package (Debian's patches applied)
#   build/deps/prefix/                the install prefix (lib/*.a, include/, lib/pkgconfig/)
#   build/deps/prefix/stamps/         one file per package built; a package whose stamp is there
#                                     at its pinned version is skipped
# The others (gRPC and its closure, protobuf-c, OpenSSL, zlib, c-ares, libyaml) come from
# Debian's -dev packages' own .a files (mk/static.mk).
#
#   tools/static-deps.sh            fetch and build what is missing (as any user)
#   tools/static-deps.sh deb-src    as root: add the deb-src entry `apt-get source` needs
#                                   (run `apt-get update` after it)
#   tools/static-deps.sh versions   print the pinned source packages
#
# Needs: dpkg-dev (apt-get source unpacks with dpkg-source), build-essential, pkg-config,
# autoconf, automake, libtool, autopoint, bison (autoreconf), libssl-dev, libc-ares-dev,
# zlib1g-dev (.ci/packages.txt).
set -euo pipefail

# The pinned source packages: the versions Debian 12 has. A version that the archive no longer
# serves (a newer security update replaced it) fails the fetch with the current one named.
PINS=(
	"curl 7.88.1-10+deb12u15"
	"cjson 1.7.15-1+deb12u4"
	"util-linux 2.38.1-5+deb12u3"
	"libmicrohttpd 0.9.75-6"
	"libxml2 2.9.14+dfsg-1.3~deb12u6"
)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${STATIC_DEPS_DIR:-$ROOT/build/deps}
PREFIX=$DEPS/prefix
JOBS=${JOBS:-$(nproc)}
export CFLAGS="-O2 -ffunction-sections -fdata-sections"
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig

say() { echo "static-deps: $*" >&2; }
die() {
	say "$*"
	exit 1
}

deb_src() {
	[ "$(id -u)" = 0 ] || die "deb-src: run as root"
	local f=/etc/apt/sources.list.d/debian-src.sources
	if grep -qsE '^(deb-src[[:space:]]|Types:.*deb-src)' /etc/apt/sources.list \
		/etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; then
		say "a deb-src entry is configured already"
		return 0
	fi
	cat >"$f" <<-'EOF'
		# deb-src for `apt-get source` (tools/static-deps.sh of aws-k8s)
		Types: deb-src
		URIs: http://deb.debian.org/debian
		Suites: bookworm bookworm-updates
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

		Types: deb-src
		URIs: http://deb.debian.org/debian-security
		Suites: bookworm-security
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	say "wrote $f; now run apt-get update"
}

# fetch PACKAGE VERSION DIR: the unpacked source tree of PACKAGE=VERSION in DIR/src.
fetch() {
	local pkg=$1 ver=$2 dir=$3 have
	rm -rf "$dir"
	mkdir -p "$dir/dl"
	if ! (cd "$dir/dl" && apt-get source -qq "$pkg=$ver" >../fetch.log 2>&1); then
		cat "$dir/fetch.log" >&2
		have=$(apt-cache showsrc "$pkg" 2>/dev/null | sed -n 's/^Version: //p' | sort -uV |
			tr '\n' ' ')
		[ -n "$have" ] || die "$pkg: no source package known to apt: is a deb-src entry" \
			"configured (tools/static-deps.sh deb-src, then apt-get update)?"
		die "$pkg=$ver: not fetched; the archive has: $have(update PINS in $0)"
	fi
	mv "$(find "$dir/dl" -mindepth 1 -maxdepth 1 -type d | head -n 1)" "$dir/src"
	rm -rf "$dir/dl"
}

# regen: the build system made again from its sources, as Debian's build does (dh_autoreconf):
# Debian's patches change configure.ac and Makefile.am files.
regen() {
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
}

# One function per package: build in the current directory (the source tree), install into
# $PREFIX. Only the library, its headers and its pkg-config file are built and installed.

build_cjson() {
	# shellcheck disable=SC2086 # CFLAGS is a list of flags
	cc $CFLAGS -std=c89 -c -o cJSON.o cJSON.c
	ar rcs libcjson.a cJSON.o
	install -d "$PREFIX/include/cjson" "$PREFIX/lib/pkgconfig"
	install -m 0644 cJSON.h "$PREFIX/include/cjson/"
	install -m 0644 libcjson.a "$PREFIX/lib/"
	cat >"$PREFIX/lib/pkgconfig/libcjson.pc" <<-EOF
		libdir=$PREFIX/lib
		includedir=$PREFIX/include

		Name: libcjson
		Version: ${1%%-*}
		Description: cJSON (static, tools/static-deps.sh)
		Libs: -L\${libdir} -lcjson
		Libs.private: -lm
		Cflags: -I\${includedir} -I\${includedir}/cjson
	EOF
}

# libcurl: HTTP/1.1 and HTTPS on OpenSSL, zlib, Unix sockets (the kubelet-style endpoints), the
# c-ares resolver (no glibc getaddrinfo, so no NSS module at run time), proxies. No HTTP/2 (the
# client asks for HTTP/1.1), no other protocol, no IDN, PSL, SSH, LDAP, GSSAPI, zstd, brotli;
# no .netrc (it would look the home folder up with getpwuid).
build_curl() {
	# the last two patches of the series make the GnuTLS and NSS flavours; Debian's OpenSSL
	# build takes them off again
	patch -s -R -p1 <debian/patches/99_nss.patch
	patch -s -R -p1 <debian/patches/90_gnutls.patch
	regen
	./configure -q --prefix="$PREFIX" --disable-shared --enable-static --disable-dependency-tracking \
		--with-openssl --with-zlib --enable-ares --disable-threaded-resolver \
		--with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
		--without-nghttp2 --without-ngtcp2 --without-nghttp3 --without-quiche --without-msh3 \
		--without-hyper --without-brotli --without-zstd --without-libidn2 --without-libpsl \
		--without-librtmp --without-libssh2 --without-libssh --without-wolfssh \
		--without-libgsasl --without-gssapi --disable-ldap --disable-ldaps \
		--disable-ftp --disable-file --disable-rtsp --disable-dict --disable-telnet \
		--disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp \
		--disable-gopher --disable-mqtt --disable-manual --disable-libcurl-option \
		--disable-ntlm --disable-ntlm-wb --disable-tls-srp --disable-doh --disable-mime \
		--disable-netrc --disable-alt-svc --disable-hsts --disable-websockets \
		--disable-cookies --disable-dnsshuffle --disable-progress-meter \
		--without-zsh-functions-dir --without-fish-functions-dir
	make -s -j"$JOBS" -C lib
	make -s -C lib install
	make -s -C include install
	make -s install-pkgconfigDATA
}

# libmount and libblkid (libmount needs it) of util-linux, static, with nothing else: no
# program, no SELinux, no udev, no systemd, no NLS.
build_util_linux() {
	./autogen.sh >/dev/null # autoreconf with the gtk-doc and gettext parts it may leave out
	./configure -q --prefix="$PREFIX" --disable-shared --enable-static \
		--disable-dependency-tracking --disable-all-programs --enable-libblkid --enable-libmount \
		--disable-libuuid --disable-libsmartcols --disable-libfdisk --disable-nls \
		--disable-asciidoc --disable-poman --disable-bash-completion --disable-pylibmount \
		--without-python --without-selinux --without-smack --without-audit --without-udev \
		--without-systemd --without-cryptsetup --without-ncursesw --without-ncurses \
		--without-tinfo --without-readline --without-cap-ng --without-libz --without-libmagic \
		--without-user --without-btrfs --without-econf --without-utempter
	make -s -j"$JOBS" libblkid.la libmount.la
	make -s install-usrlib_execLTLIBRARIES install-nodist_blkidincHEADERS \
		install-nodist_mountincHEADERS install-pkgconfigDATA
}

# libmicrohttpd without HTTPS (no GnuTLS): TLS serving is the project's own, on OpenSSL.
build_libmicrohttpd() {
	regen
	./configure -q --prefix="$PREFIX" --disable-shared --enable-static \
		--disable-dependency-tracking --disable-https --without-gnutls --disable-curl \
		--disable-doc --disable-examples --disable-nls
	make -s -j"$JOBS" -C src/microhttpd
	make -s -C src/microhttpd install
	make -s -C src/include install
	make -s install-pkgconfigDATA
}

# libxml2: the parser and the tree with threads, nothing else (--with-minimum): no ICU, iconv
# (UTF-8, UTF-16 and Latin-1 are built in; AWS replies are UTF-8), zlib, lzma, HTTP, FTP,
# catalogs, modules (dlopen), XPath, schemas, HTML, output.
build_libxml2() {
	regen
	./configure -q --prefix="$PREFIX" --disable-shared --enable-static \
		--disable-dependency-tracking --with-minimum --with-threads --with-tree \
		--without-python --without-icu --without-iconv --without-zlib --without-lzma
	make -s -j"$JOBS" libxml2.la
	make -s install-libLTLIBRARIES install-pkgconfigDATA
	make -s -C include install
}

build() {
	local pkg=$1 ver=$2 dir="$DEPS/$1-$2" stamp="$PREFIX/stamps/$1-$2" start
	if [ -e "$stamp" ]; then
		say "$pkg $ver: built already ($stamp)"
		return 0
	fi
	start=$SECONDS
	say "$pkg $ver: fetching"
	fetch "$pkg" "$ver" "$dir"
	say "$pkg $ver: building"
	# in the background so that set -e holds inside (it does not in a condition)
	(cd "$dir/src" && "build_${pkg//-/_}" "$ver") >"$dir/build.log" 2>&1 &
	if ! wait $!; then
		tail -n 30 "$dir/build.log" >&2
		die "$pkg $ver: build failed; log: $dir/build.log"
	fi
	mkdir -p "$PREFIX/stamps"
	echo "$pkg $ver" >"$stamp"
	say "$pkg $ver: done in $((SECONDS - start)) s"
}

case ${1:-build} in
deb-src) deb_src ;;
versions) printf '%s\n' "${PINS[@]}" ;;
build)
	for c in dpkg-source autoreconf autopoint bison pkg-config; do
		command -v $c >/dev/null || die "$c missing: see the packages at the top of $0"
	done
	for p in "${PINS[@]}"; do
		# shellcheck disable=SC2086
		build $p
	done
	say "all built in $SECONDS s ($PREFIX)"
	;;
*) die "usage: $0 [build|deb-src|versions]" ;;
esac
