/* What server.c, tls.c and tls_relay.c share (and rbac-proxy's event loops: tls_src, tls_peer).
 *
 * HTTPS is served in front of libmicrohttpd, which parses HTTP only (it is built without TLS):
 * the relay's threads accept the TCP connections, do the TLS handshake with OpenSSL, then hand
 * MHD one end of a socketpair (MHD_add_connection, with the client's address) and move bytes
 * between the SSL and the other end. A verified client certificate's identity goes with the
 * MHD connection (its socket context), set when MHD starts the connection. */
#pragma once
#include <microhttpd.h>
#include <openssl/ssl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/http/tls.h"
#include "common/x509/x509.h"

/* tls.c: the serving context, rebuilt when its files change. */
struct tls_src;
/* Copies cfg and builds the context: 0, or -errno with the reason in err. */
int tls_src_new(const struct http_tls *cfg, struct tls_src **ret, char *err, size_t errlen);
void tls_src_free(struct tls_src *s);
/* A server SSL over the socket fd from the current context (the files are checked first when
 * a check is due), or NULL. */
SSL *tls_src_ssl(struct tls_src *s, int fd);
int64_t tls_src_handshake_timeout(const struct tls_src *s);

/* The identity of a verified client certificate, counted: held by the relay's connection and
 * by the MHD connection. */
struct tls_peer {
	atomic_int refs;
	struct x509_names names;
	struct http_client_cert cert;
};
/* After the handshake: 0 with *ret NULL when the client sent no certificate, 0 with a peer, or
 * -EACCES (the certificate does not verify, or has no CN) / -ENOMEM with why in err. */
int tls_peer_from_ssl(SSL *ssl, struct tls_peer **ret, char *err, size_t errlen);
struct tls_peer *tls_peer_ref(struct tls_peer *p);
void tls_peer_unref(struct tls_peer *p);

/* tls_relay.c: the accept, handshake and relay threads of one server. */
struct tls_relay;
struct tls_relay_opts {
	struct tls_src *src;
	int listen_fd;		  /* bound and listening; owned by the caller */
	unsigned threads;	  /* relay threads (at least 1) */
	unsigned max_connections; /* TLS connections at once, handshaking or not */
	int64_t idle_timeout_ns;  /* a client that takes no bytes for this long is dropped */
};
int tls_relay_new(const struct tls_relay_opts *o, struct tls_relay **ret);
/* For MHD_OPTION_NOTIFY_CONNECTION (cls: the relay): attaches the identity to the connection. */
void tls_relay_notify(void *cls, struct MHD_Connection *c, void **socket_context,
		      enum MHD_ConnectionNotificationCode code);
/* Starts the threads, which hand connections to d (started with MHD_USE_NO_LISTEN_SOCKET). */
int tls_relay_start(struct tls_relay *r, struct MHD_Daemon *d);
/* Stops the threads and closes every TLS connection (MHD then sees its ends close). */
void tls_relay_stop(struct tls_relay *r);
/* After MHD_stop_daemon. NULL is fine. */
void tls_relay_free(struct tls_relay *r);
/* The client certificate of an MHD connection of a relay, or NULL. */
const struct http_client_cert *tls_relay_client_cert(struct MHD_Connection *c);
/* "ip:port" of an IPv4 or IPv6 socket address (the address bare), in buf; "" for another
 * family. Returns buf. (server.c formats its requests' remote address with it too.) */
const char *http_format_addr(const struct sockaddr *sa, char *buf, size_t n);
