// SPDX-License-Identifier: BSD-2-Clause
/*
 * Kernel UDP request/response on one socket each side, the baseline of
 * scripts/bench_latency.py:
 *   udp_pingpong server ADDR PORT COUNT [busy]        echo COUNT datagrams back
 *   udp_pingpong client ADDR PORT COUNT SIZE [busy]   send, wait for the echo,
 *                                                     print each RTT in ns
 * Each side waits in recv(2) (interrupt-driven); with `busy` it polls the
 * socket with MSG_DONTWAIT instead of sleeping (one core at 100 % each),
 * the baseline of the transport's busy-polling row.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, peer;
	socklen_t plen = sizeof(peer);
	static char buf[65536];
	long count, i, size;
	const struct timeval give_up = { .tv_sec = 5 };
	unsigned long long deadline;
	int s, busy, flags;

	if (argc < 5 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: udp_pingpong server ADDR PORT COUNT [busy]\n"
				"       udp_pingpong client ADDR PORT COUNT SIZE [busy]\n");
		return 2;
	}
	a.sin_port = htons((unsigned short)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) {
		fprintf(stderr, "udp_pingpong: %s is not an IPv4 address\n", argv[2]);
		return 2;
	}
	count = atol(argv[4]);
	busy = !strcmp(argv[argc - 1], "busy") && argc > (strcmp(argv[1], "server") ? 6 : 5);
	flags = busy ? MSG_DONTWAIT : 0;
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0) {
		perror("udp_pingpong: socket");
		return 1;
	}
	/* a datagram lost: fail after 5 s either way, not wait or spin for ever */
	if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &give_up, sizeof(give_up))) {
		perror("udp_pingpong: SO_RCVTIMEO");
		return 1;
	}
	if (!strcmp(argv[1], "server")) {
		if (bind(s, (struct sockaddr *)&a, sizeof(a))) {
			perror("udp_pingpong: bind");
			return 1;
		}
		for (i = 0; i < count; i++) {
			ssize_t n;

			deadline = now_ns() + 5000000000ull;
			do
				n = recvfrom(s, buf, sizeof(buf), flags, (struct sockaddr *)&peer, &plen);
			while (n < 0 && errno == EAGAIN && busy && now_ns() < deadline);

			if (n < 0 || sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&peer, plen) < 0) {
				perror("udp_pingpong: server");
				return 1;
			}
		}
		return 0;
	}
	size = argc > 5 ? atol(argv[5]) : 1024;
	if (size < 1 || size > (long)sizeof(buf)) {
		fprintf(stderr, "udp_pingpong: size %ld\n", size);
		return 2;
	}
	if (connect(s, (struct sockaddr *)&a, sizeof(a))) {
		perror("udp_pingpong: connect");
		return 1;
	}
	for (i = 0; i < count; i++) {
		unsigned long long t0 = now_ns();

		ssize_t n;

		if (send(s, buf, (size_t)size, 0) < 0) {
			perror("udp_pingpong: client send");
			return 1;
		}
		deadline = now_ns() + 5000000000ull;
		do
			n = recv(s, buf, sizeof(buf), flags);
		while (n < 0 && errno == EAGAIN && busy && now_ns() < deadline);
		if (n < 0) {
			perror("udp_pingpong: client recv");
			return 1;
		}
		printf("%llu\n", now_ns() - t0);
	}
	return 0;
}
