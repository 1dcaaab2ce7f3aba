#!/usr/bin/env bash
# libmicrohttpd is linked without its HTTPS (GnuTLS has no static archive): HTTPS is served by
# common/http/tls_relay.c on OpenSSL. No code may use MHD's TLS options, flags or connection
# details, or the static build breaks. Prints each use as file:line; fails when there is one.
set -uo pipefail
cd "$(dirname "$0")/../.."
pat='MHD_USE_TLS|MHD_USE_SSL|MHD_OPTION_HTTPS_|MHD_OPTION_GNUTLS_|MHD_CONNECTION_INFO_(GNUTLS_|CIPHER_ALGO|PROTOCOL|CLIENT_CERT)|MHD_FEATURE_(TLS|SSL|HTTPS)'
hits=$(grep -rnE "$pat" common modules main.c --include='*.[ch]')
if [ -n "$hits" ]; then
	printf '%s\n' "$hits" | sed 's/$/  <- MHD has no TLS here: use http_server_opts.tls/'
	echo "MHD TLS uses: $(printf '%s\n' "$hits" | wc -l)"
	exit 1
fi
echo "MHD TLS uses: 0"
