// SPDX-License-Identifier: GPL-2.0
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/compiler.h>
#include "../tests.h"

/*
 * A known call chain, kept with frame pointers, that spends its time in a
 * system call and a little in user space: the deferred callchain tests
 * compare its stacks recorded with fp and with fp,defer.
 */
noinline void syscallchain_leaf(int fd);
noinline void syscallchain_mid(int fd);
noinline void syscallchain_top(int fd);

static sig_atomic_t done;
static unsigned long sum;
static char buf[256 * 1024];

static void sighandler(int sig __maybe_unused)
{
	WRITE_ONCE(done, 1);
}

noinline void syscallchain_leaf(int fd)
{
	while (!READ_ONCE(done)) {
		if (read(fd, buf, sizeof(buf)) < 0)
			break;
		for (unsigned int i = 0; i < 100000; i++)
			WRITE_ONCE(sum, sum + i);
	}
}

noinline void syscallchain_mid(int fd)
{
	syscallchain_leaf(fd);
}

noinline void syscallchain_top(int fd)
{
	syscallchain_mid(fd);
}

static int syscallchain(int argc, const char **argv)
{
	int sec = 1;
	int fd;

	if (argc > 0)
		sec = atoi(argv[0]);

	fd = open("/dev/zero", O_RDONLY);
	if (fd < 0)
		return 1;

	signal(SIGINT, sighandler);
	signal(SIGALRM, sighandler);
	alarm(sec);

	syscallchain_top(fd);
	close(fd);
	return 0;
}

DEFINE_WORKLOAD(syscallchain);
