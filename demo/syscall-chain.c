// SPDX-License-Identifier: GPL-2.0
/*
 * The demo's workload: a known user call chain, several levels deep, that
 * spends most of its time inside system calls:
 *
 *   main -> run_workload -> stage_one -> stage_two -> stage_three -> read
 *
 * Built with frame pointers and without sibling calls, so that every level
 * keeps its frame (syscall-chain); and without frame pointers, with SFrame
 * tables (syscall-chain-sframe), which only the deferred walk reads.
 * Usage: syscall-chain [SECONDS] (default 2).
 */
#include <fcntl.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CHUNK	(1 << 20)

static char buffer[CHUNK];
static long calls;

/* Not a leaf, stage_three() keeps its frame: GCC drops a leaf's frame. */
__attribute__((noinline)) static void count_call(void)
{
	calls++;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Each read of /dev/zero clears a megabyte in the kernel. The system call
 * is made here rather than in libc's read(): that wrapper keeps no frame,
 * so a frame-pointer walk that starts inside it skips its caller, and has
 * no SFrame table. Built with -DDEMO_LIBC_READ (syscall-chain-sframe-libc),
 * it calls libc's read() all the same.
 */
__attribute__((noinline)) static long stage_three(int fd)
{
	long ret;

#ifdef DEMO_LIBC_READ
	ret = read(fd, buffer, CHUNK);
#else
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_read), "D"((long)fd), "S"(buffer),
			   "d"((long)CHUNK)
			 : "rcx", "r11", "memory");
#endif
	count_call();
	return ret;
}

__attribute__((noinline)) static long stage_two(int fd)
{
	long got = stage_three(fd);

	__asm__ volatile("" ::: "memory");
	return got;
}

__attribute__((noinline)) static long stage_one(int fd)
{
	long got = stage_two(fd);

	__asm__ volatile("" ::: "memory");
	return got;
}

__attribute__((noinline)) static long run_workload(int fd, double seconds)
{
	double end = now() + seconds;
	long total = 0;

	while (now() < end) {
		long got = stage_one(fd);

		if (got <= 0)
			return -1;
		total += got;
	}
	return total;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2;
	int fd = open("/dev/zero", O_RDONLY);
	long total;

	if (fd < 0) {
		perror("/dev/zero");
		return 1;
	}
	total = run_workload(fd, seconds);
	close(fd);
	if (total < 0) {
		perror("read");
		return 1;
	}
	printf("syscall-chain: read %ld MiB from /dev/zero in %ld calls\n",
	       total >> 20, calls);
	return 0;
}
