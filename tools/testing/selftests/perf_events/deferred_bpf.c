// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED with a BPF overflow program: an event with
 * a BPF_PROG_TYPE_PERF_EVENT program (PERF_EVENT_IOC_SET_BPF) is never
 * deferred. Its samples are walked in place (cookie 0, a PERF_CONTEXT_USER
 * part in the callchain), so that the program's
 * bpf_get_stack(BPF_F_USER_STACK) and bpf_get_stackid(BPF_F_USER_STACK),
 * which read the sample's own callchain, see the user stack, and a sample
 * the program drops leaves no orphan
 * PERF_RECORD_CALLCHAIN_DEFERRED behind. The same event without a program
 * is the control: its samples taken in the kernel are deferred. Samples
 * taken in user mode are walked in place with or without a program: they
 * have no kernel stay whose walk they could share.
 *
 * The programs are raw instructions loaded with bpf(2); no libbpf.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <sys/ioctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"

#define SAMPLE_PERIOD_NS	200000	/* cpu-clock period */
#define DATA_PAGES		64
#define WANT_CALLS		100	/* run until this many samples */
#define MIN_CALLS		50	/* and assert at least this many */
#define RUN_SECONDS		5.0	/* one sampled run, at most */
#define BURN_NS			2000000	/* one round of the user-mode loop */
#define READ_NS			500000	/* and of its reads of /dev/zero */
#define READ_BYTES		(64 << 10)	/* one read() of /dev/zero */
#define STACK_BYTES		256	/* bpf_get_stack() buffer, on the BPF stack */
#define STACKID_DEPTH		32	/* frames per stack of the stack trace map */
#define STACKID_ENTRIES		256
#define MAX_INSNS		64
#define LOG_BYTES		(64 << 10)

/* The program's counters: one array map element of NR_COUNTERS u64s. */
enum {
	CNT_CALLS,		/* program runs */
	CNT_USER,		/* bpf_get_stack() > 0, bpf_get_stackid() >= 0 */
	CNT_ERROR,		/* either returned < 0 */
	CNT_TEXT,		/* the first user address is in this program's text */
	NR_COUNTERS,
};

static const char * const counter_name[NR_COUNTERS] = {
	"calls", "with a user stack", "errors", "starting in our text",
};

/* The instructions these programs need, as tools/include/linux/filter.h. */
#define BPF_MOV64_REG(DST, SRC)						\
	((struct bpf_insn) {						\
		.code = BPF_ALU64 | BPF_MOV | BPF_X,			\
		.dst_reg = DST, .src_reg = SRC, .off = 0, .imm = 0 })

#define BPF_MOV64_IMM(DST, IMM)						\
	((struct bpf_insn) {						\
		.code = BPF_ALU64 | BPF_MOV | BPF_K,			\
		.dst_reg = DST, .src_reg = 0, .off = 0, .imm = IMM })

#define BPF_ALU64_IMM(OP, DST, IMM)					\
	((struct bpf_insn) {						\
		.code = BPF_ALU64 | BPF_OP(OP) | BPF_K,			\
		.dst_reg = DST, .src_reg = 0, .off = 0, .imm = IMM })

#define BPF_LDX_MEM(SIZE, DST, SRC, OFF)				\
	((struct bpf_insn) {						\
		.code = BPF_LDX | BPF_SIZE(SIZE) | BPF_MEM,		\
		.dst_reg = DST, .src_reg = SRC, .off = OFF, .imm = 0 })

#define BPF_ST_MEM(SIZE, DST, OFF, IMM)					\
	((struct bpf_insn) {						\
		.code = BPF_ST | BPF_SIZE(SIZE) | BPF_MEM,		\
		.dst_reg = DST, .src_reg = 0, .off = OFF, .imm = IMM })

#define BPF_ATOMIC_OP(SIZE, OP, DST, SRC, OFF)				\
	((struct bpf_insn) {						\
		.code = BPF_STX | BPF_SIZE(SIZE) | BPF_ATOMIC,		\
		.dst_reg = DST, .src_reg = SRC, .off = OFF, .imm = OP })

#define BPF_JMP_IMM(OP, DST, IMM, OFF)					\
	((struct bpf_insn) {						\
		.code = BPF_JMP | BPF_OP(OP) | BPF_K,			\
		.dst_reg = DST, .src_reg = 0, .off = OFF, .imm = IMM })

#define BPF_JMP_REG(OP, DST, SRC, OFF)					\
	((struct bpf_insn) {						\
		.code = BPF_JMP | BPF_OP(OP) | BPF_X,			\
		.dst_reg = DST, .src_reg = SRC, .off = OFF, .imm = 0 })

#define BPF_EMIT_CALL(FUNC)						\
	((struct bpf_insn) {						\
		.code = BPF_JMP | BPF_CALL,				\
		.dst_reg = 0, .src_reg = 0, .off = 0, .imm = FUNC })

#define BPF_EXIT_INSN()							\
	((struct bpf_insn) {						\
		.code = BPF_JMP | BPF_EXIT,				\
		.dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0 })

/* This program's text, from the default linker script. */
extern char __executable_start[], etext[];

static bool in_text(__u64 addr)
{
	return addr >= (unsigned long)__executable_start &&
	       addr < (unsigned long)etext;
}

/* A program under construction; jumps are emitted first, landed later. */
struct prog {
	struct bpf_insn insn[MAX_INSNS];
	int n;
};

static int emit(struct prog *p, struct bpf_insn insn)
{
	if (p->n < MAX_INSNS)
		p->insn[p->n] = insn;
	return p->n++;
}

/* The jump at index "jmp" goes to the next instruction emitted. */
static void land(struct prog *p, int jmp)
{
	if (jmp < MAX_INSNS)
		p->insn[jmp].off = p->n - jmp - 1;
}

static void emit_ld_imm64(struct prog *p, int dst, int src, __u64 imm)
{
	emit(p, (struct bpf_insn) {
		.code = BPF_LD | BPF_DW | BPF_IMM,
		.dst_reg = dst, .src_reg = src, .imm = (__u32)imm });
	emit(p, (struct bpf_insn) { .imm = (__u32)(imm >> 32) });
}

/* With r0 the map value: value[counter] += src, atomically. */
static void emit_count(struct prog *p, int counter, int src)
{
	emit(p, BPF_ATOMIC_OP(BPF_DW, BPF_ADD, BPF_REG_0, src, counter * 8));
}

/*
 * The overflow program. With get_stack it calls
 * bpf_get_stack(ctx, buf, STACK_BYTES, BPF_F_USER_STACK) with buf on its
 * stack and counts what came back; it always counts its calls, and returns
 * keep (1: output the sample, 0: drop it).
 */
static void build_prog(struct prog *p, int map_fd, bool get_stack, int keep)
{
	int key_off = get_stack ? -STACK_BYTES - 4 : -4;
	int out, no_user, no_error, no_text, marker, below, above;

	memset(p, 0, sizeof(*p));
	if (get_stack) {
		emit(p, BPF_MOV64_REG(BPF_REG_2, BPF_REG_10));
		emit(p, BPF_ALU64_IMM(BPF_ADD, BPF_REG_2, -STACK_BYTES));
		emit(p, BPF_MOV64_IMM(BPF_REG_3, STACK_BYTES));
		emit(p, BPF_MOV64_IMM(BPF_REG_4, BPF_F_USER_STACK));
		emit(p, BPF_EMIT_CALL(BPF_FUNC_get_stack));
		emit(p, BPF_MOV64_REG(BPF_REG_7, BPF_REG_0));

		/*
		 * r8 = is the first user address in our text? In 6.12 the
		 * stack starts with the PERF_CONTEXT_USER marker (the skip
		 * stops at it), then the user IP; allow for either layout.
		 */
		emit(p, BPF_MOV64_IMM(BPF_REG_8, 0));
		emit(p, BPF_LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_10, -STACK_BYTES));
		marker = emit(p, BPF_JMP_IMM(BPF_JNE, BPF_REG_1,
					     (int)PERF_CONTEXT_USER, 0));
		emit(p, BPF_LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_10, -STACK_BYTES + 8));
		land(p, marker);
		emit_ld_imm64(p, BPF_REG_2, 0, (unsigned long)__executable_start);
		emit_ld_imm64(p, BPF_REG_3, 0, (unsigned long)etext);
		below = emit(p, BPF_JMP_REG(BPF_JLT, BPF_REG_1, BPF_REG_2, 0));
		above = emit(p, BPF_JMP_REG(BPF_JGE, BPF_REG_1, BPF_REG_3, 0));
		emit(p, BPF_MOV64_IMM(BPF_REG_8, 1));
		land(p, below);
		land(p, above);
	}

	/* r0 = the map's element 0 */
	emit(p, BPF_ST_MEM(BPF_W, BPF_REG_10, key_off, 0));
	emit(p, BPF_MOV64_REG(BPF_REG_2, BPF_REG_10));
	emit(p, BPF_ALU64_IMM(BPF_ADD, BPF_REG_2, key_off));
	emit_ld_imm64(p, BPF_REG_1, BPF_PSEUDO_MAP_FD, map_fd);
	emit(p, BPF_EMIT_CALL(BPF_FUNC_map_lookup_elem));
	out = emit(p, BPF_JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 0));

	emit(p, BPF_MOV64_IMM(BPF_REG_1, 1));
	emit_count(p, CNT_CALLS, BPF_REG_1);
	if (get_stack) {
		no_user = emit(p, BPF_JMP_IMM(BPF_JSLE, BPF_REG_7, 0, 0));
		emit_count(p, CNT_USER, BPF_REG_1);
		land(p, no_user);
		no_error = emit(p, BPF_JMP_IMM(BPF_JSGE, BPF_REG_7, 0, 0));
		emit_count(p, CNT_ERROR, BPF_REG_1);
		land(p, no_error);
		no_text = emit(p, BPF_JMP_IMM(BPF_JEQ, BPF_REG_8, 0, 0));
		emit_count(p, CNT_TEXT, BPF_REG_1);
		land(p, no_text);
	}

	land(p, out);
	emit(p, BPF_MOV64_IMM(BPF_REG_0, keep));
	emit(p, BPF_EXIT_INSN());
}

/*
 * The overflow program of the stack id test: bpf_get_stackid(ctx,
 * stack_map, BPF_F_USER_STACK | BPF_F_REUSE_STACKID), counted as CNT_USER
 * when it found a user stack (an id, >= 0), CNT_ERROR when not (-EFAULT:
 * none in the callchain); it keeps every sample. Without
 * BPF_F_REUSE_STACKID a stack whose hash bucket holds another one fails
 * with -EEXIST, and a hundred distinct stacks in 256 buckets collide
 * often: that would count hash collisions, not missing user stacks.
 */
static void build_stackid_prog(struct prog *p, int map_fd, int stack_map_fd)
{
	int out, no_user, no_error;

	memset(p, 0, sizeof(*p));
	emit_ld_imm64(p, BPF_REG_2, BPF_PSEUDO_MAP_FD, stack_map_fd);
	emit(p, BPF_MOV64_IMM(BPF_REG_3,
			      BPF_F_USER_STACK | BPF_F_REUSE_STACKID));
	emit(p, BPF_EMIT_CALL(BPF_FUNC_get_stackid));
	emit(p, BPF_MOV64_REG(BPF_REG_7, BPF_REG_0));

	emit(p, BPF_ST_MEM(BPF_W, BPF_REG_10, -4, 0));
	emit(p, BPF_MOV64_REG(BPF_REG_2, BPF_REG_10));
	emit(p, BPF_ALU64_IMM(BPF_ADD, BPF_REG_2, -4));
	emit_ld_imm64(p, BPF_REG_1, BPF_PSEUDO_MAP_FD, map_fd);
	emit(p, BPF_EMIT_CALL(BPF_FUNC_map_lookup_elem));
	out = emit(p, BPF_JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 0));
	emit(p, BPF_MOV64_IMM(BPF_REG_1, 1));
	emit_count(p, CNT_CALLS, BPF_REG_1);
	no_user = emit(p, BPF_JMP_IMM(BPF_JSLT, BPF_REG_7, 0, 0));
	emit_count(p, CNT_USER, BPF_REG_1);
	land(p, no_user);
	no_error = emit(p, BPF_JMP_IMM(BPF_JSGE, BPF_REG_7, 0, 0));
	emit_count(p, CNT_ERROR, BPF_REG_1);
	land(p, no_error);
	land(p, out);
	emit(p, BPF_MOV64_IMM(BPF_REG_0, 1));
	emit(p, BPF_EXIT_INSN());
}

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/*
 * A map of @type, one key of a u32; -1 with errno set on failure, so that
 * the caller can tell a kernel without bpf(2) from a broken one.
 */
static int create_map(__u32 type, __u32 value_size, __u32 max_entries)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = type;
	attr.key_size = sizeof(__u32);
	attr.value_size = value_size;
	attr.max_entries = max_entries;
	return sys_bpf(BPF_MAP_CREATE, &attr);
}

static void read_counters(struct __test_metadata *_metadata, int map_fd,
			  __u64 *cnt)
{
	union bpf_attr attr;
	__u32 key = 0;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = map_fd;
	attr.key = (unsigned long)&key;
	attr.value = (unsigned long)cnt;
	ASSERT_EQ(0, sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr))
		TH_LOG("BPF_MAP_LOOKUP_ELEM: %s", strerror(errno));
}

static void zero_counters(struct __test_metadata *_metadata, int map_fd)
{
	__u64 zero[NR_COUNTERS] = { 0 };
	union bpf_attr attr;
	__u32 key = 0;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = map_fd;
	attr.key = (unsigned long)&key;
	attr.value = (unsigned long)zero;
	ASSERT_EQ(0, sys_bpf(BPF_MAP_UPDATE_ELEM, &attr))
		TH_LOG("BPF_MAP_UPDATE_ELEM: %s", strerror(errno));
}

/* Load p as a perf_event program; on failure, log the verifier's words. */
static int load_prog(struct __test_metadata *_metadata, const struct prog *p)
{
	union bpf_attr attr;
	char *log;
	int fd;

	ASSERT_GE(MAX_INSNS, p->n) TH_LOG("program of %d instructions", p->n);
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_PERF_EVENT;
	attr.insns = (unsigned long)p->insn;
	attr.insn_cnt = p->n;
	attr.license = (unsigned long)"GPL";
	fd = sys_bpf(BPF_PROG_LOAD, &attr);
	if (fd >= 0)
		return fd;

	/* Again, with the verifier's log. */
	log = calloc(1, LOG_BYTES);
	ASSERT_NE(NULL, log);
	attr.log_level = 1;
	attr.log_buf = (unsigned long)log;
	attr.log_size = LOG_BYTES;
	fd = sys_bpf(BPF_PROG_LOAD, &attr);
	if (fd < 0)
		TH_LOG("verifier log:\n%s", log);
	free(log);
	ASSERT_LE(0, fd) TH_LOG("BPF_PROG_LOAD: %s", strerror(errno));
	return fd;
}

static struct perf_event_attr clock_attr(void)
{
	return sample_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK,
			   SAMPLE_PERIOD_NS, PERF_SAMPLE_CALLCHAIN_DEFERRED);
}

static void open_bpf_ring(struct __test_metadata *_metadata, struct ring *r)
{
	struct perf_event_attr attr = clock_attr();
	int fd = perf_open(&attr, 0, -1);

	ASSERT_LE(0, fd) TH_LOG("perf_event_open: %s", strerror(errno));
	ASSERT_EQ(0, ring_map(r, fd, &attr, DATA_PAGES))
		TH_LOG("mmap of %d data pages: %s", DATA_PAGES, strerror(errno));
}

/*
 * Skip when this kernel has no bpf(2); otherwise the counters map, which
 * must exist. Returns -1 after SKIP().
 */
static int counters_or_skip(struct __test_metadata *_metadata)
{
	int map_fd = create_map(BPF_MAP_TYPE_ARRAY,
				NR_COUNTERS * sizeof(__u64), 1);
	int err = errno;

	if (map_fd >= 0)
		return map_fd;
	/* The sysctl comes with bpf(2): CONFIG_BPF_SYSCALL. */
	if (access("/proc/sys/kernel/unprivileged_bpf_disabled", F_OK))
		SKIP(return -1, "no bpf(2) in this kernel (%s)", strerror(err));
	if (err == EPERM)
		SKIP(return -1, "bpf(2) refused: needs CAP_BPF and CAP_PERFMON");
	ASSERT_LE(0, map_fd) TH_LOG("BPF_MAP_CREATE: %s", strerror(err));
	return map_fd;
}

static void attach_prog(struct __test_metadata *_metadata, struct ring *r,
			int prog_fd)
{
	ASSERT_EQ(0, ioctl(r->fd, PERF_EVENT_IOC_SET_BPF, prog_fd))
		TH_LOG("PERF_EVENT_IOC_SET_BPF: %s; want it to work, samples walked in place",
		       strerror(errno));
}

/* The workload: user-mode loops under a few frames, and some system calls. */
struct work {
	int zero_fd;
	char *buf;
	unsigned long loops;	/* one burn3() round: ~BURN_NS */
	unsigned long reads;	/* read()s per round: ~READ_NS */
	long rounds;
	int bad_reads;
};

static __attribute__((noipa)) void burn3(unsigned long loops)
{
	asm volatile("1:\tdec %0\n\t"
		     "jnz 1b"
		     : "+r" (loops) : : "cc");
}

static __attribute__((noipa)) void burn2(struct work *w)
{
	unsigned long i;

	burn3(w->loops);
	for (i = 0; i < w->reads; i++)
		if (read(w->zero_fd, w->buf, READ_BYTES) != READ_BYTES)
			w->bad_reads++;
}

static __attribute__((noipa)) void burn1(struct work *w)
{
	burn2(w);
	syscall(SYS_getppid);
	w->rounds++;
}

static void work_init(struct __test_metadata *_metadata, struct work *w)
{
	double t;

	memset(w, 0, sizeof(*w));
	w->zero_fd = open("/dev/zero", O_RDONLY);
	ASSERT_LE(0, w->zero_fd) TH_LOG("/dev/zero: %s", strerror(errno));
	w->buf = malloc(READ_BYTES);
	ASSERT_NE(NULL, w->buf);
	memset(w->buf, 1, READ_BYTES);	/* no page faults while sampled */

	w->loops = 1000000;
	t = ring_now();
	burn3(w->loops);
	t = ring_now() - t;
	if (t > 0)
		w->loops = w->loops * (BURN_NS / 1e9) / t + 1;

	/* About a fifth of the time in the kernel, below the same frames. */
	w->reads = 1;
	ASSERT_EQ(READ_BYTES, read(w->zero_fd, w->buf, READ_BYTES));
	t = ring_now();
	ASSERT_EQ(READ_BYTES, read(w->zero_fd, w->buf, READ_BYTES));
	t = ring_now() - t;
	if (t > 0 && t < READ_NS / 1e9)
		w->reads = READ_NS / 1e9 / t;
}

static void work_fini(struct work *w)
{
	free(w->buf);
	close(w->zero_fd);
}

/*
 * Sample the workload with r's event until WANT_CALLS samples: program
 * runs when map_fd >= 0 (counters[] holds them on return), samples in the
 * buffer otherwise.
 */
static void sample_work(struct __test_metadata *_metadata, struct work *w,
			struct ring *r, int map_fd, __u64 *counters)
{
	double deadline;
	__u64 seen;

	memset(counters, 0, NR_COUNTERS * sizeof(*counters));
	w->rounds = 0;
	ASSERT_EQ(0, ioctl(r->fd, PERF_EVENT_IOC_ENABLE, 0));
	deadline = ring_now() + RUN_SECONDS;
	do {
		burn1(w);
		ASSERT_EQ(0, w->bad_reads) TH_LOG("read of /dev/zero failed");
		ring_drain(r);
		if (map_fd >= 0) {
			read_counters(_metadata, map_fd, counters);
			seen = counters[CNT_CALLS];
		} else {
			seen = r->nr_samples;
		}
	} while (seen < WANT_CALLS && ring_now() < deadline);
	ASSERT_EQ(0, ioctl(r->fd, PERF_EVENT_IOC_DISABLE, 0));

	/* Disabled: nothing runs or writes any more. */
	if (map_fd >= 0)
		read_counters(_metadata, map_fd, counters);
	ring_drain(r);
	EXPECT_EQ(0, r->nr_malformed) TH_LOG("malformed: %s", r->why);
}

/* What the buffer holds. */
struct ring_stats {
	int samples;
	int deferred;		/* samples with cookie != 0 */
	int with_user;		/* samples with PERF_CONTEXT_USER */
	int in_text;		/* of those: first user address in our text */
	int user_mode;		/* samples that interrupted user mode */
	int user_deferred;	/* of those: with a cookie */
	int bad_user_ip;	/* of those: no user part starting at ip */
	int records;		/* PERF_RECORD_CALLCHAIN_DEFERRED */
	__u64 lost;
	char first_deferred[96];
	char first_without_user[96];
	char first_bad_user_ip[128];
	char first_record[96];
};

static struct ring_stats count_ring(const struct ring *r)
{
	struct ring_stats st = { 0 };
	size_t i;
	__u64 k;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *rr = &r->rec[i];
		bool user = false, user_mode;

		if (rr->type == PERF_RECORD_LOST)
			st.lost += rr->lost;
		if (rr->type == PERF_RECORD_CALLCHAIN_DEFERRED && !st.records++)
			snprintf(st.first_record, sizeof(st.first_record),
				 "cookie %#llx, %llu ips",
				 (unsigned long long)rr->cookie,
				 (unsigned long long)rr->nr);
		if (rr->type != PERF_RECORD_SAMPLE)
			continue;
		st.samples++;
		if (rr->cookie && !st.deferred++)
			snprintf(st.first_deferred, sizeof(st.first_deferred),
				 "ip %#llx, cookie %#llx",
				 (unsigned long long)rr->ip,
				 (unsigned long long)rr->cookie);
		user_mode = taken_in_user_mode(rr);
		st.user_mode += user_mode;
		st.user_deferred += user_mode && rr->cookie;
		for (k = 0; k < rr->nr && !user; k++) {
			if (rr->ips[k] != PERF_CONTEXT_USER)
				continue;
			user = true;
			st.with_user++;
			st.in_text += k + 1 < rr->nr && in_text(rr->ips[k + 1]);
			/* The in-place walk starts where the sample was taken. */
			if (user_mode &&
			    (k + 1 >= rr->nr || rr->ips[k + 1] != rr->ip) &&
			    !st.bad_user_ip++)
				snprintf(st.first_bad_user_ip,
					 sizeof(st.first_bad_user_ip),
					 "ip %#llx, user part starts %#llx of %llu",
					 (unsigned long long)rr->ip,
					 k + 1 < rr->nr ?
					 (unsigned long long)rr->ips[k + 1] : 0ULL,
					 (unsigned long long)(rr->nr - k - 1));
		}
		if (!user && st.samples - st.with_user == 1)
			snprintf(st.first_without_user,
				 sizeof(st.first_without_user),
				 "ip %#llx, nr %llu, cookie %#llx",
				 (unsigned long long)rr->ip,
				 (unsigned long long)rr->nr,
				 (unsigned long long)rr->cookie);
		if (!user && user_mode && !st.bad_user_ip++)
			snprintf(st.first_bad_user_ip,
				 sizeof(st.first_bad_user_ip),
				 "ip %#llx, no user part in %llu ips, cookie %#llx",
				 (unsigned long long)rr->ip,
				 (unsigned long long)rr->nr,
				 (unsigned long long)rr->cookie);
	}
	return st;
}

static void log_counters(struct __test_metadata *_metadata, const __u64 *cnt,
			 const struct work *w)
{
	TH_LOG("program: %llu %s, %llu %s, %llu %s, %llu %s; %ld rounds",
	       (unsigned long long)cnt[CNT_CALLS], counter_name[CNT_CALLS],
	       (unsigned long long)cnt[CNT_USER], counter_name[CNT_USER],
	       (unsigned long long)cnt[CNT_ERROR], counter_name[CNT_ERROR],
	       (unsigned long long)cnt[CNT_TEXT], counter_name[CNT_TEXT],
	       w->rounds);
}

TEST(bpf_get_stack_sees_user_stack)
{
	__u64 cnt[NR_COUNTERS];
	struct ring_stats st;
	int map_fd, prog_fd;
	struct work w;
	struct prog p;
	struct ring r;

	map_fd = counters_or_skip(_metadata);
	if (map_fd < 0)
		return;
	build_prog(&p, map_fd, true, 1);
	prog_fd = load_prog(_metadata, &p);

	work_init(_metadata, &w);
	open_bpf_ring(_metadata, &r);
	attach_prog(_metadata, &r, prog_fd);
	sample_work(_metadata, &w, &r, map_fd, cnt);
	st = count_ring(&r);
	log_counters(_metadata, cnt, &w);
	TH_LOG("buffer: %d samples (%d of user mode), %d deferred, %d records, %llu lost",
	       st.samples, st.user_mode, st.deferred, st.records,
	       (unsigned long long)st.lost);
	TH_LOG("buffer: %d samples with a user part, %d of them starting in our text",
	       st.with_user, st.in_text);

	ASSERT_LE(MIN_CALLS, cnt[CNT_CALLS])
		TH_LOG("expected the program to run at least %d times", MIN_CALLS);
	/* Samples in system calls have the user stack below them, too. */
	EXPECT_LE(cnt[CNT_CALLS] * 9, cnt[CNT_USER] * 10)
		TH_LOG("want bpf_get_stack() > 0 in 90%% of calls: %llu of %llu, %llu errors",
		       (unsigned long long)cnt[CNT_USER],
		       (unsigned long long)cnt[CNT_CALLS],
		       (unsigned long long)cnt[CNT_ERROR]);
	/*
	 * The program read the very callchain that was written: its first
	 * user address, in our text for samples in burn3(), is the samples'.
	 */
	EXPECT_LE(1, cnt[CNT_TEXT])
		TH_LOG("want user stacks that start in our text [%p, %p), saw none",
		       __executable_start, etext);
	if (!st.lost)
		EXPECT_EQ(st.in_text, cnt[CNT_TEXT])
			TH_LOG("want the program's user stacks to be the samples' ones");

	/* The program kept every sample it saw, and none was deferred. */
	EXPECT_EQ(cnt[CNT_CALLS], st.samples + st.lost)
		TH_LOG("expected one sample per program run that returned 1");
	/* Those in read() would be, but for the program. */
	EXPECT_LT(st.user_mode, st.samples)
		TH_LOG("want samples taken in the kernel, all %d were in user mode",
		       st.samples);
	EXPECT_EQ(0, st.deferred)
		TH_LOG("want cookie 0 with a BPF program, %d of %d had one (first: %s)",
		       st.deferred, st.samples, st.first_deferred);
	EXPECT_EQ(0, st.records)
		TH_LOG("want no deferred records with a BPF program, saw %d (first: %s)",
		       st.records, st.first_record);
	EXPECT_EQ(st.samples, st.with_user)
		TH_LOG("want PERF_CONTEXT_USER in every sample, %d of %d had none (first: %s)",
		       st.samples - st.with_user, st.samples,
		       st.first_without_user);
	EXPECT_EQ(0, st.bad_user_ip)
		TH_LOG("want user-mode samples' user part to start at their IP, %d of %d not (%s)",
		       st.bad_user_ip, st.user_mode, st.first_bad_user_ip);

	close_ring(&r);
	close(prog_fd);
	close(map_fd);
	work_fini(&w);
}

/*
 * bpf_get_stackid(BPF_F_USER_STACK) reads the sample's callchain too: it
 * finds a user stack in samples taken in the kernel as well, none of
 * which is deferred.
 */
TEST(bpf_get_stackid_sees_user_stack)
{
	int map_fd, stack_map_fd, prog_fd;
	__u64 cnt[NR_COUNTERS];
	struct ring_stats st;
	struct work w;
	struct prog p;
	struct ring r;

	map_fd = counters_or_skip(_metadata);
	if (map_fd < 0)
		return;
	stack_map_fd = create_map(BPF_MAP_TYPE_STACK_TRACE,
				  STACKID_DEPTH * sizeof(__u64), STACKID_ENTRIES);
	ASSERT_LE(0, stack_map_fd) TH_LOG("BPF_MAP_CREATE(STACK_TRACE): %s",
					  strerror(errno));
	build_stackid_prog(&p, map_fd, stack_map_fd);
	prog_fd = load_prog(_metadata, &p);

	work_init(_metadata, &w);
	open_bpf_ring(_metadata, &r);
	attach_prog(_metadata, &r, prog_fd);
	sample_work(_metadata, &w, &r, map_fd, cnt);
	st = count_ring(&r);
	log_counters(_metadata, cnt, &w);

	ASSERT_LE(MIN_CALLS, cnt[CNT_CALLS])
		TH_LOG("expected the program to run at least %d times", MIN_CALLS);
	/* As bpf_get_stack() above: system calls have a user stack too. */
	EXPECT_LE(cnt[CNT_CALLS] * 9, cnt[CNT_USER] * 10)
		TH_LOG("want bpf_get_stackid() >= 0 in 90%% of calls: %llu of %llu, %llu errors",
		       (unsigned long long)cnt[CNT_USER],
		       (unsigned long long)cnt[CNT_CALLS],
		       (unsigned long long)cnt[CNT_ERROR]);
	EXPECT_LT(st.user_mode, st.samples)
		TH_LOG("want samples taken in the kernel, all %d were in user mode",
		       st.samples);
	EXPECT_EQ(0, st.deferred)
		TH_LOG("want cookie 0 with a BPF program, %d of %d had one (first: %s)",
		       st.deferred, st.samples, st.first_deferred);

	close_ring(&r);
	close(prog_fd);
	close(stack_map_fd);
	close(map_fd);
	work_fini(&w);
}

TEST(filtered_samples_leave_no_records)
{
	static const char * const what[2] = {
		"a program that only counts",
		"a program that calls bpf_get_stack()",
	};
	__u64 cnt[NR_COUNTERS];
	struct ring_stats st;
	int map_fd, prog_fd;
	int get_stack;
	struct work w;
	struct prog p;
	struct ring r;

	map_fd = counters_or_skip(_metadata);
	if (map_fd < 0)
		return;
	work_init(_metadata, &w);

	/* The sample is dropped after perf prepared it, in both cases. */
	for (get_stack = 0; get_stack < 2; get_stack++) {
		zero_counters(_metadata, map_fd);
		build_prog(&p, map_fd, get_stack, 0);
		prog_fd = load_prog(_metadata, &p);
		open_bpf_ring(_metadata, &r);
		attach_prog(_metadata, &r, prog_fd);
		sample_work(_metadata, &w, &r, map_fd, cnt);
		st = count_ring(&r);
		TH_LOG("%s and drops the sample:", what[get_stack]);
		log_counters(_metadata, cnt, &w);

		ASSERT_LE(MIN_CALLS, cnt[CNT_CALLS])
			TH_LOG("expected %s to run at least %d times",
			       what[get_stack], MIN_CALLS);
		EXPECT_EQ(0, st.samples)
			TH_LOG("want no samples when %s returns 0, saw %d",
			       what[get_stack], st.samples);
		EXPECT_EQ(0, st.records)
			TH_LOG("want no deferred records (%s), saw %d (first: %s)",
			       what[get_stack], st.records, st.first_record);

		close_ring(&r);
		close(prog_fd);
	}

	close(map_fd);
	work_fini(&w);
}

TEST(without_bpf_samples_are_deferred)
{
	__u64 cnt[NR_COUNTERS];
	struct ring_stats st;
	struct work w;
	struct ring r;

	work_init(_metadata, &w);
	open_bpf_ring(_metadata, &r);
	sample_work(_metadata, &w, &r, -1, cnt);
	st = count_ring(&r);
	TH_LOG("buffer: %d samples (%d user mode), %d deferred, %d records, %llu lost; %ld rounds",
	       st.samples, st.user_mode, st.deferred, st.records,
	       (unsigned long long)st.lost, w.rounds);

	ASSERT_LE(MIN_CALLS, st.samples)
		TH_LOG("expected at least %d samples", MIN_CALLS);
	/* Otherwise deferral is off, and the tests above prove nothing. */
	EXPECT_LE(1, st.deferred)
		TH_LOG("expected samples with a cookie without a BPF program, none of %d",
		       st.samples);
	EXPECT_LE(st.samples - st.user_mode, 2 * st.deferred)
		TH_LOG("want most kernel-mode samples deferred, %d of %d were",
		       st.deferred, st.samples - st.user_mode);
	EXPECT_LE(1, st.records)
		TH_LOG("expected PERF_RECORD_CALLCHAIN_DEFERRED without a BPF program, saw none");
	/* Not a program's doing: user-mode samples are walked in place anyway. */
	EXPECT_EQ(0, st.user_deferred)
		TH_LOG("want cookie 0 on user-mode samples, %d of %d had one",
		       st.user_deferred, st.user_mode);
	EXPECT_EQ(0, st.bad_user_ip)
		TH_LOG("want user-mode samples' user part to start at their IP, %d of %d not (%s)",
		       st.bad_user_ip, st.user_mode, st.first_bad_user_ip);

	close_ring(&r);
	work_fini(&w);
}

TEST_HARNESS_MAIN
