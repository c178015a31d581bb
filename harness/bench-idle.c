// SPDX-License-Identifier: GPL-2.0
/*
 * The cost of the feature when nobody profiles (harness/bench-idle): run in
 * a VM whose clock counts instructions (QEMU's -icount, 1 ns each), with no
 * perf event open, on the base kernel and on this one. Prints one line per
 * operation: its name and the instructions one takes, the median of
 * BENCH_IDLE_REPEATS timed batches. Timed is the CPU time of this process
 * and of its children: the time the guest waits for its disk (the host's
 * root over 9p) is the host's, and varies.
 *   getpid		a getpid() system call
 *   mmap-elf		mmap() of an ELF file's first page, executable, and
 *			munmap() (the mmap of a program or a library)
 *   fork-exec		fork(), exec of /bin/true, wait
 *   uprobe-hit		a call of a function with a uprobe on it (a
 *			tracefs uprobe event, enabled: no perf event)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_IDLE_REPEATS	7
#define TRACEFS			"/sys/kernel/tracing"
#define UPROBE_GROUP		"bench_idle"

/* CPU time of this process and of its children waited for, in ns. */
static double now_ns(void)
{
	struct timespec ts;
	struct rusage ru;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	getrusage(RUSAGE_CHILDREN, &ru);
	return ts.tv_sec * 1e9 + ts.tv_nsec +
	       (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median over the repeats of op's cost per call, in batches of n. */
static double measure(void (*op)(void), int n)
{
	double per_op[BENCH_IDLE_REPEATS];
	int r, i;

	for (i = 0; i < n / 10 + 1; i++)	/* warm up */
		op();
	for (r = 0; r < BENCH_IDLE_REPEATS; r++) {
		double start = now_ns();

		for (i = 0; i < n; i++)
			op();
		per_op[r] = (now_ns() - start) / n;
	}
	qsort(per_op, BENCH_IDLE_REPEATS, sizeof(per_op[0]), cmp_double);
	return per_op[BENCH_IDLE_REPEATS / 2];
}

static void op_getpid(void)
{
	syscall(SYS_getpid);
}

static int elf_fd = -1;

static void op_mmap_elf(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, elf_fd, 0);

	if (p == MAP_FAILED) {
		perror("bench-idle: mmap");
		exit(1);
	}
	munmap(p, 4096);
}

static void op_fork_exec(void)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		perror("bench-idle: fork");
		exit(1);
	}
	if (!pid) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "bench-idle: /bin/true failed\n");
		exit(1);
	}
}

/* The function the uprobe is on: kept whole and called. */
__attribute__((noipa)) void bench_idle_probed(void)
{
	asm volatile("" ::: "memory");
}

static void op_uprobe_hit(void)
{
	bench_idle_probed();
}

static int write_file(const char *path, const char *text, int flags)
{
	int fd = open(path, O_WRONLY | flags);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The file offset of bench_idle_probed() in this program, from its maps. */
static long probed_offset(char *path, size_t size)
{
	unsigned long addr = (unsigned long)bench_idle_probed;
	unsigned long start, end, pgoff;
	char line[512], perms[8];
	long offset = -1;
	FILE *maps = fopen("/proc/self/maps", "r");

	if (!maps)
		return -1;
	while (fgets(line, sizeof(line), maps)) {
		int n = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms,
			   &pgoff, &n) < 4 || !n)
			continue;
		if (addr < start || addr >= end)
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, size, "%s", line + n);
		offset = addr - start + pgoff;
		break;
	}
	fclose(maps);
	return offset;
}

static int uprobe_on(void)
{
	char path[256], probe[512];
	long offset = probed_offset(path, sizeof(path));

	if (offset < 0)
		return -1;
	snprintf(probe, sizeof(probe), "p:%s/probed %s:%#lx\n", UPROBE_GROUP, path,
		 offset);
	if (write_file(TRACEFS "/uprobe_events", probe, O_APPEND))
		return -1;
	return write_file(TRACEFS "/events/" UPROBE_GROUP "/probed/enable", "1", 0);
}

static void uprobe_off(void)
{
	write_file(TRACEFS "/events/" UPROBE_GROUP "/probed/enable", "0", 0);
	write_file(TRACEFS "/uprobe_events", "-:" UPROBE_GROUP "/probed\n", O_APPEND);
}

int main(int argc, char **argv)
{
	elf_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (elf_fd < 0) {
		perror("bench-idle: /proc/self/exe");
		return 1;
	}
	printf("getpid %.1f\n", measure(op_getpid, 20000));
	printf("mmap-elf %.1f\n", measure(op_mmap_elf, 5000));
	printf("fork-exec %.1f\n", measure(op_fork_exec, 40));
	if (uprobe_on()) {
		fprintf(stderr, "bench-idle: cannot set a uprobe through %s: %s\n",
			TRACEFS, strerror(errno));
		uprobe_off();
		return 1;
	}
	printf("uprobe-hit %.1f\n", measure(op_uprobe_hit, 5000));
	uprobe_off();
	return 0;
}
