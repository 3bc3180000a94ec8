/* The TLS workload of the side-by-side tests (sslsnoop, ssllatency):
 *
 *   ssl CERT KEY N   a TLS server (a child process) and its client (this
 *                    process) over a socketpair: one SSL_do_handshake
 *                    each, then N SSL_write of 5 bytes by the client and
 *                    N SSL_read of them by the server
 *
 * It prints "ready PID" and waits for a line on stdin before working,
 * then "server PID" and "done"; both exit when stdin closes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <openssl/ssl.h>

static SSL *tls(int server, const char *cert, const char *key, int fd) {
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!ctx)
		exit(3);
	if (server && (SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1 ||
		       SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1))
		exit(4);
	SSL *s = SSL_new(ctx);
	if (!s)
		exit(5);
	SSL_set_fd(s, fd);
	if (server)
		SSL_set_accept_state(s);
	else
		SSL_set_connect_state(s);
	return s;
}

int main(int argc, char **argv) {
	if (argc != 4)
		return 2;
	long n = atol(argv[3]);
	printf("ready %d\n", getpid());
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	int sv[2], worked[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(worked) != 0)
		return 1;
	pid_t server = fork();
	if (server == 0) {
		close(sv[0]);
		SSL *s = tls(1, argv[1], argv[2], sv[1]);
		if (SSL_do_handshake(s) != 1)
			_exit(6);
		char buf[5];
		for (long i = 0; i < n; i++)
			if (SSL_read(s, buf, sizeof buf) != 5)
				_exit(7);
		/* Worked; it lives as long as the client (a tracer may name
		 * its addresses when it prints). */
		if (write(worked[1], "w", 1) != 1)
			_exit(8);
		while (fgets(line, sizeof line, stdin))
			;
		_exit(0);
	}
	close(sv[1]);
	SSL *c = tls(0, 0, 0, sv[0]);
	if (SSL_do_handshake(c) != 1)
		return 8;
	for (long i = 0; i < n; i++)
		if (SSL_write(c, "bs-42", 5) != 5)
			return 9;
	char w;
	if (read(worked[0], &w, 1) != 1)
		return 10;
	printf("server %d\ndone\n", server);
	fflush(stdout);
	while (fgets(line, sizeof line, stdin))
		;
	int status;
	waitpid(server, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 11;
}
