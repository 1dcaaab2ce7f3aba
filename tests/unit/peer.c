/* Test helpers for cancellation (see peer.h). */
#include "tests/unit/peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/timeutil.h"

/* Reads one request: its head, and its body by Content-Length. */
static void read_request(int fd)
{
	char buf[65536];
	size_t n = 0, want = 0;

	while (n < sizeof(buf) - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 2000) <= 0)
			return;
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			return;
		n += (size_t)k;
		buf[n] = 0;
		char *end = strstr(buf, "\r\n\r\n");
		if (!end)
			continue;
		if (!want) {
			const char *cl = strcasestr(buf, "\r\ncontent-length:");
			want = (size_t)(end + 4 - buf) + (cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
		}
		if (n >= want)
			return;
	}
}

static void *peer_main(void *arg)
{
	struct peer *p = arg;

	for (;;) {
		struct pollfd fds[2] = {{.fd = p->lfd, .events = POLLIN},
					{.fd = cancel_fd(p->stop), .events = POLLIN}};
		if (poll(fds, 2, -1) < 0 || fds[1].revents)
			break;
		int fd = accept(p->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		read_request(fd);
		atomic_fetch_add(&p->requests, 1);
		const char *reply = atomic_load(&p->reply);
		if (!reply && p->n_held < PEER_MAX_CONNS) {
			p->held[p->n_held++] = fd;
			continue;
		}
		if (reply && write(fd, reply, strlen(reply)) < 0) {
			/* the client went away: nothing to do */
		}
		close(fd);
	}
	return NULL;
}

struct peer *peer_start(const char *reply)
{
	struct peer *p = calloc(1, sizeof(*p));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	if (!p)
		return NULL;
	p->reply = reply;
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(p->lfd, 16) < 0 || getsockname(p->lfd, (struct sockaddr *)&sa, &len) < 0 ||
	    cancel_new(NULL, &p->stop) < 0 || pthread_create(&p->th, NULL, peer_main, p) != 0) {
		if (p->lfd >= 0)
			close(p->lfd);
		cancel_free(p->stop);
		free(p);
		return NULL;
	}
	p->port = ntohs(sa.sin_port);
	return p;
}

void peer_stop(struct peer *p)
{
	if (!p)
		return;
	cancel_cancel(p->stop);
	pthread_join(p->th, NULL);
	for (int i = 0; i < p->n_held; i++)
		close(p->held[i]);
	close(p->lfd);
	cancel_free(p->stop);
	free(p);
}

static void *cancel_later_main(void *arg)
{
	struct later *l = arg;
	if (l->p)
		while (atomic_load(&l->p->requests) == 0)
			sleep_ns(NSEC_PER_MSEC);
	else
		sleep_ns(l->ms * NSEC_PER_MSEC);
	cancel_cancel(l->c);
	return NULL;
}

void cancel_later(struct later *l, struct cancel *c, int ms)
{
	*l = (struct later){.c = c, .ms = ms};
	pthread_create(&l->th, NULL, cancel_later_main, l);
}

void cancel_on_request(struct later *l, struct cancel *c, struct peer *p)
{
	*l = (struct later){.c = c, .p = p};
	pthread_create(&l->th, NULL, cancel_later_main, l);
}

void later_join(struct later *l)
{
	pthread_join(l->th, NULL);
}

int64_t elapsed_ms(int64_t t0)
{
	return (now_mono_ns() - t0) / NSEC_PER_MSEC;
}

