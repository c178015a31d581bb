// SPDX-License-Identifier: GPL-2.0
/*
 * The workloads of make bench-record: a fixed amount of work done at the
 * bottom of a user call chain of a chosen depth, timed by the program
 * itself so that perf's start and finish do not count.
 *
 *   bench-workload KIND DEPTH UNITS     do UNITS units of work, print
 *                                       "elapsed_ns N cpu_ns N": the
 *                                       time it took, and the CPU time of
 *                                       the process and its children
 *   bench-workload KIND DEPTH -SECONDS  calibrate: do units for about
 *                                       SECONDS, print "units N"
 *
 * KIND:
 *   long-syscall   read 4 MiB of /dev/zero per unit: several samples
 *                  share each kernel stay
 *   short-syscall  getppid() 100 times per unit: most samples are in
 *                  user mode or in a stay of their own
 *   user-loop      a loop in user mode, no system calls
 *   user-loop-table  the same loop in a process that has an SFrame table
 *                  for other code (prctl(PR_SFRAME)): its samples are
 *                  walked in place, as without the table
 *   threads        64 threads, each read 4 KiB and loops a little per
 *                  unit, at the same depth
 *   fork-exec      fork, exec this program (KIND "exit") and wait, per
 *                  unit
 *
 * Built with frame pointers and without sibling calls: every level of the
 * chain keeps its frame, as in the demo workload. make bench-record also
 * builds it with the system call inline (-DBENCH_INLINE_SYSCALL), once with
 * frame pointers (bench-workload-fp) and once without them and with SFrame
 * tables (bench-workload-sframe), to weigh the two walks.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LONG_READ	(4 << 20)
#define SHORT_READ	4096
#define NR_THREADS	64

/* The patched kernel's <linux/prctl.h>; the distribution's has none. */
#ifndef PR_SFRAME
#define PR_SFRAME	0x53465241
#define PR_SFRAME_ADD	1
struct prctl_sframe {
	uint64_t sframe_start, sframe_size, text_start, text_size;
};
#endif

static const char *self;
static int zero_fd;
static char *long_buf;
static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * CPU time of this process (exact) and of its reaped children (fork-exec):
 * the interrupts that sample it and the deferred work on its way back to
 * user space are charged to it, perf record's own work is not.
 */
static double cpu_time(void)
{
	struct timespec ts;
	struct rusage ru;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	getrusage(RUSAGE_CHILDREN, &ru);
	return ts.tv_sec + ts.tv_nsec / 1e9 +
	       ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/*
 * The raw system call: libc's read() wrapper keeps no frame. Built with
 * -DBENCH_INLINE_SYSCALL (make bench-record's SFrame builds), the system
 * call instruction is here: libc has no SFrame tables to walk syscall()
 * by, in a program without frame pointers.
 */
static long sys_read(int fd, void *buf, size_t len)
{
#ifdef BENCH_INLINE_SYSCALL
	long ret = SYS_read;

	__asm__ volatile("syscall"
			 : "+a" (ret)
			 : "D" ((long)fd), "S" (buf), "d" (len)
			 : "rcx", "r11", "memory");
	return ret;
#else
	return syscall(SYS_read, fd, buf, len);
#endif
}

static void read_zero(void *buf, size_t len)
{
	if (sys_read(zero_fd, buf, len) != (long)len) {
		perror("read /dev/zero");
		exit(1);
	}
}

static void spin(unsigned long n)
{
	unsigned long i, s = 0;

	for (i = 0; i < n; i++)
		s += i * i;
	sink = s;
}

struct job {
	const char *kind;
	long units;
};

static void run_units(const struct job *job);

/* One frame per level; the statement after the call keeps it a real call. */
__attribute__((noinline)) static void descend(const struct job *job, int depth)
{
	if (depth > 0)
		descend(job, depth - 1);
	else
		run_units(job);
	__asm__ volatile("" ::: "memory");
}

struct thread_arg {
	struct job job;
	int depth;
};

static void *thread_main(void *p)
{
	struct thread_arg *arg = p;
	char buf[SHORT_READ];
	long i;

	/* The same chain as the other kinds, with a mixed unit at its end. */
	if (arg->depth > 0) {
		arg->depth--;
		return thread_main(arg);
	}
	for (i = 0; i < arg->job.units; i++) {
		read_zero(buf, sizeof(buf));
		spin(20000);
	}
	return NULL;
}

static void run_threads(long units, int depth)
{
	struct thread_arg arg[NR_THREADS];
	pthread_t tid[NR_THREADS];
	int i;

	for (i = 0; i < NR_THREADS; i++) {
		arg[i].job.units = (units + NR_THREADS - 1) / NR_THREADS;
		arg[i].depth = depth;
		if (pthread_create(&tid[i], NULL, thread_main, &arg[i])) {
			perror("pthread_create");
			exit(1);
		}
	}
	for (i = 0; i < NR_THREADS; i++)
		pthread_join(tid[i], NULL);
}

static void fork_exec(void)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (!pid) {
		execl(self, self, "exit", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "bench-workload: child failed\n");
		exit(1);
	}
}

static void run_units(const struct job *job)
{
	long i, j;

	for (i = 0; i < job->units; i++) {
		if (!strcmp(job->kind, "long-syscall")) {
			read_zero(long_buf, LONG_READ);
		} else if (!strcmp(job->kind, "short-syscall")) {
			for (j = 0; j < 100; j++)
				syscall(SYS_getppid);
		} else if (!strcmp(job->kind, "user-loop") ||
			   !strcmp(job->kind, "user-loop-table")) {
			spin(100000);
		} else if (!strcmp(job->kind, "fork-exec")) {
			fork_exec();
		}
	}
}

/*
 * Give the process an SFrame table (version 2: one function of one page
 * with no rows) for a page of code of its own that nothing runs: a task
 * with tables, whose loop no table covers.
 */
static void register_other_table(void)
{
	unsigned char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *t = page + 4096;
	struct prctl_sframe arg;
	int32_t start;
	uint32_t u32;
	uint16_t magic = 0xdee2;

	if (page == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(page, 0xcc, 4096);			/* int3: never run */
	memcpy(t, &magic, 2);
	t[2] = 2;					/* version 2 */
	t[3] = 1;					/* FDEs sorted */
	t[4] = 3;					/* x86-64, little endian */
	t[6] = (unsigned char)-8;			/* return address at CFA - 8 */
	u32 = 1;
	memcpy(t + 8, &u32, 4);				/* one FDE */
	u32 = 20;
	memcpy(t + 24, &u32, 4);			/* FREs after it */
	start = -4096;					/* the page, from the table */
	memcpy(t + 28, &start, 4);
	u32 = 4096;
	memcpy(t + 32, &u32, 4);			/* its size */
	if (mprotect(page, 4096, PROT_READ | PROT_EXEC)) {
		perror("mprotect");
		exit(1);
	}
	arg = (struct prctl_sframe){
		.sframe_start = (uintptr_t)t, .sframe_size = 48,
		.text_start = (uintptr_t)page, .text_size = 4096,
	};
	if (prctl(PR_SFRAME, PR_SFRAME_ADD, &arg, sizeof(arg), 0)) {
		perror("prctl(PR_SFRAME_ADD)");
		exit(1);
	}
}

static void run(const char *kind, int depth, long units)
{
	struct job job = { .kind = kind, .units = units };

	if (!strcmp(kind, "threads"))
		run_threads(units, depth);
	else
		descend(&job, depth);
}

int main(int argc, char **argv)
{
	double start, start_cpu, seconds;
	long units;
	int depth;

	self = argv[0];
	if (argc == 2 && !strcmp(argv[1], "exit"))
		return 0;
	if (argc != 4) {
		fprintf(stderr, "usage: bench-workload KIND DEPTH UNITS|-SECONDS\n");
		return 2;
	}
	depth = atoi(argv[2]);
	if (strcmp(argv[1], "long-syscall") && strcmp(argv[1], "short-syscall") &&
	    strcmp(argv[1], "user-loop") && strcmp(argv[1], "user-loop-table") &&
	    strcmp(argv[1], "threads") && strcmp(argv[1], "fork-exec")) {
		fprintf(stderr, "bench-workload: unknown kind %s\n", argv[1]);
		return 2;
	}
	if (depth < 0 || depth > 1000) {
		fprintf(stderr, "bench-workload: depth %d out of range\n", depth);
		return 2;
	}
	zero_fd = open("/dev/zero", O_RDONLY);
	long_buf = malloc(LONG_READ);
	if (zero_fd < 0 || !long_buf) {
		perror("bench-workload");
		return 1;
	}
	/* Touch the buffer once: page faults are not the work measured. */
	read_zero(long_buf, LONG_READ);
	if (!strcmp(argv[1], "user-loop-table"))
		register_other_table();

	if (argv[3][0] == '-') {
		/* Calibration: double the units until they take long enough. */
		seconds = atof(argv[3] + 1);
		for (units = 1;; units *= 2) {
			start = now();
			run(argv[1], depth, units);
			if (now() - start >= seconds / 4)
				break;
		}
		printf("units %ld\n", (long)(units * seconds / (now() - start)) + 1);
		return 0;
	}
	units = atol(argv[3]);
	start = now();
	start_cpu = cpu_time();
	run(argv[1], depth, units);
	printf("elapsed_ns %.0f cpu_ns %.0f\n", (now() - start) * 1e9,
	       (cpu_time() - start_cpu) * 1e9);
	return 0;
}
