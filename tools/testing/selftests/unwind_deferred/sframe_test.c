// SPDX-License-Identifier: GPL-2.0
/*
 * SFrame tables made from .eh_frame by libsframe-eh.so (tools/sframe),
 * for libc and for a program without tables of its own, in the deferred
 * user stack walk, driven through the test hook of
 * lib/test_unwind_deferred.c. Each test runs a child with and without
 * libsframe-eh.so preloaded: a program of this source, run with
 * --sframe-through-libc (main()), asks for a walk through libc's qsort().
 *
 * Built with SFrame (-Wa,--gsframe) and without frame pointers, as
 * sframe_test.h says.
 * Built a second time without SFrame, as sframe_eh_test: the program that
 * program_walked_by_tables_made_from_eh_frame runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "sframe_chain.h"
#include "sframe_test.h"

/*
 * Through libc, which has no SFrame table: qsort() calls back a function
 * that asks for the walk. In a process that preloads libsframe-eh.so
 * (tools/sframe), libc has a table made from its .eh_frame, and the walk
 * goes through qsort()'s frames to the function that called it.
 */
#define THROUGH_LIBC_ARG	"--sframe-through-libc"

struct through_libc {
	int fd;
	struct chain c;
	unsigned long caller_ret;	/* of sort_caller() */
	struct udt_result res;
	long ret;
};

static struct through_libc through_libc_state, *tl = &through_libc_state;

/*
 * Data that reaches megabytes past the code, as gzip's, python3's and
 * perl's does: a table made for the program must not be placed after it.
 * Not static: the compiler keeps it although nothing reads it.
 */
char sframe_big_data[4 << 20];

static NOIPA int cmp_walk(const void *a, const void *b)
{
	struct udt_request req = { };

	if (!tl->ret) {
		add_step(&req, 0, UDT_CTX_TASK);
		tl->ret = sframe_syscall(__NR_ioctl, tl->fd, UDT_IOC_REQUEST,
					 (long)&req, &tl->c.ret[0]);
		if (!tl->ret)
			tl->ret = get_result(tl->fd, 0, &tl->res) ? -errno : 1;
	}
	return *(const int *)a - *(const int *)b;
}

static NOIPA void sort_caller(void)
{
	int v[2] = { 2, 1 };

	tl->caller_ret = (unsigned long)__builtin_return_address(0);
	qsort(v, 2, sizeof(v[0]), cmp_walk);
	asm volatile("" : : "r" (v) : "memory");
}

/* The child: 0 when the walk found sort_caller()'s caller, 1 when not. */
static int through_libc(void)
{
	unsigned int i;

	tl->fd = open(UDT_PATH, O_RDWR | O_CLOEXEC);
	if (tl->fd < 0)
		return 3;
	sort_caller();
	if (tl->ret != 1 || tl->res.tid != sys_gettid() ||
	    tl->res.entries[0] != (unsigned long)sframe_syscall_ip)
		return 2;
	for (i = 1; i < tl->res.nr && i < UDT_MAX_ENTRIES; i++)
		if (tl->res.entries[i] == tl->caller_ret)
			return 0;
	return 1;
}

/* @path: @name in the directory of this program. */
static int sibling(char *path, size_t size, const char *name)
{
	ssize_t n = readlink("/proc/self/exe", path, size - 1);
	char *slash;

	if (n <= 0)
		return -1;
	path[n] = 0;
	slash = strrchr(path, '/');
	if (!slash || (size_t)(slash + 1 - path) + strlen(name) >= size)
		return -1;
	memcpy(slash + 1, name, strlen(name) + 1);
	return access(path, R_OK | X_OK);
}

/* @exe's through_libc(), with @preload preloaded: its status, or -1. */
/* The child's exit status; libsframe-eh.so writes tables of @version. */
static int run_through_libc(const char *exe, const char *preload, int version)
{
	char env[4200], ver[32];
	int status;
	pid_t pid;

	pid = fork();
	if (!pid) {
		char *argv[3], *envp[3];

		argv[0] = (char *)exe;
		argv[1] = THROUGH_LIBC_ARG;
		argv[2] = NULL;
		envp[0] = env;
		envp[1] = ver;
		envp[2] = NULL;
		snprintf(env, sizeof(env), "LD_PRELOAD=%s", preload ? preload : "");
		snprintf(ver, sizeof(ver), "SFRAME_EH_VERSION=%d", version);
		execve(exe, argv, envp);
		_exit(4);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST_F(sframe, libc_walked_by_tables_made_from_eh_frame)
{
	char exe[4096], lib[4096];
	int ret, version;

	ASSERT_EQ(0, sibling(exe, sizeof(exe), "sframe_test"));
	ASSERT_EQ(0, sibling(lib, sizeof(lib), "libsframe-eh.so"))
		TH_LOG("%s: %s", lib, strerror(errno));

	/* libc without a table: the walk does not get through qsort(). */
	ret = run_through_libc(exe, NULL, 3);
	EXPECT_EQ(1, ret) TH_LOG("without tables for libc: child status %d (0: through)", ret);
	for (version = 2; version <= 3; version++) {
		ret = run_through_libc(exe, lib, version);
		EXPECT_EQ(0, ret)
			TH_LOG("libsframe-eh.so v%d: child status %d (1: not through, 2: no walk)",
			       version, ret);
	}
}

/*
 * sframe_eh_test is this program built without SFrame, as Debian builds
 * its programs: libsframe-eh.so makes the program's own table too, which
 * must lie within 2 GiB of its code (a PIE program is mapped far from the
 * libraries, where mmap() places memory by default).
 */
TEST_F(sframe, program_walked_by_tables_made_from_eh_frame)
{
	char exe[4096], lib[4096];
	int ret;

	ASSERT_EQ(0, sibling(exe, sizeof(exe), "sframe_eh_test"))
		TH_LOG("%s: %s", exe, strerror(errno));
	ASSERT_EQ(0, sibling(lib, sizeof(lib), "libsframe-eh.so"))
		TH_LOG("%s: %s", lib, strerror(errno));

	ret = run_through_libc(exe, NULL, 3);
	EXPECT_EQ(1, ret) TH_LOG("without tables: child status %d (0: through)", ret);
	ret = run_through_libc(exe, lib, 3);
	EXPECT_EQ(0, ret)
		TH_LOG("with libsframe-eh.so: child status %d (1: not through, 2: no walk)", ret);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], THROUGH_LIBC_ARG))
		return through_libc();
	return test_harness_run(argc, argv);
}
