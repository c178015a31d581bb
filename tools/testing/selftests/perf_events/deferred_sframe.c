// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED with SFrame tables. This program is built
 * without frame pointers and with SFrame (-Wa,--gsframe), and samples
 * itself with twin task-clock events, one with the bit, one without: in a
 * system call at the bottom of a known chain, and spinning in user mode
 * there (a task with tables has those deferred too where a table covers
 * the code: only the deferred walk reads tables). The deferred samples
 * must be joined with records that hold the chain's own return addresses;
 * their twins, walked in place by frame pointers (zeroed there), stop at
 * the first frame. Without tables, or in code no table covers, user-mode
 * samples are walked in place again.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <linux/prctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "../unwind_deferred/sframe_chain.h"

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME		0x6474e554
#endif

#define PERIOD_NS		200000
#define DATA_PAGES		512
#define ROUNDS			30
#define READ_BYTES		(1024 * 1024)
#define READ_IOVS		4
#define SPIN_LOOPS		2000000UL
#define MIN_JOINED		10

struct twins {
	struct ring r[2];	/* [0] with the bit, [1] walked in place */
};

static void open_twins(struct __test_metadata *_metadata, struct twins *tw)
{
	int d;

	for (d = 0; d < 2; d++) {
		struct perf_event_attr attr =
			sample_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, PERIOD_NS,
				    d ? 0 : PERF_SAMPLE_CALLCHAIN_DEFERRED);

		open_ring(_metadata, &tw->r[d], &attr, 0, -1, DATA_PAGES);
	}
}

static void enable_twins(struct twins *tw, bool on)
{
	unsigned long req = on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE;

	ioctl(tw->r[0].fd, req, 0);
	ioctl(tw->r[1].fd, req, 0);
}

static void drain_twins(struct twins *tw)
{
	ring_drain(&tw->r[0]);
	ring_drain(&tw->r[1]);
}

static void close_twins(struct twins *tw)
{
	close_ring(&tw->r[0]);
	close_ring(&tw->r[1]);
}

/* The record of cookie in r, NULL if none. */
static const struct ring_record *record_of(const struct ring *r, __u64 cookie)
{
	size_t i;

	for (i = 0; i < r->nr_rec; i++)
		if (r->rec[i].type == PERF_RECORD_CALLCHAIN_DEFERRED &&
		    r->rec[i].cookie == cookie)
			return &r->rec[i];
	return NULL;
}

/* The user part of a sample walked in place; NULL if it has none. */
static const __u64 *user_part(const struct ring_record *s, __u64 *nr)
{
	__u64 k;

	for (k = 0; k < s->nr; k++) {
		if (s->ips[k] == PERF_CONTEXT_USER) {
			*nr = s->nr - k - 1;
			return &s->ips[k + 1];
		}
	}
	*nr = 0;
	return NULL;
}

/*
 * What the samples at the bottom of the chain got: from_ip says whether a
 * user IP is one of the bottom function's (its system call, its loop).
 */
struct verdict {
	int deferred, joined, bad, in_place, carried, twin, twin_long;
	char msg[256];
};

/* Whether ips[0..nr) hold the chain's return addresses after their first. */
static bool is_chain(const __u64 *ips, __u64 nr, const struct chain *c)
{
	int k;

	for (k = 0; k < 3; k++)
		if (nr < (__u64)k + 2 || ips[k + 1] != c->ret[k])
			return false;
	return true;
}

static void judge(const struct twins *tw, const struct chain *c, bool user_mode,
		  bool (*from_ip)(__u64 ip), struct verdict *v)
{
	const struct ring *rd = &tw->r[0], *ri = &tw->r[1];
	pid_t tid = gettid_();
	size_t i;
	int k;

	memset(v, 0, sizeof(*v));
	for (i = 0; i < rd->nr_rec; i++) {
		const struct ring_record *s = &rd->rec[i], *rec;
		const __u64 *ips;
		__u64 nr;

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid ||
		    taken_in_user_mode(s) != user_mode)
			continue;
		/*
		 * Cookie 0: walked in place, which stops at once; or taken
		 * after the stay's walk, before its record reached the
		 * buffer, and carrying that walk (the whole chain).
		 */
		if (!s->cookie) {
			ips = user_part(s, &nr);
			if (!nr || !from_ip(ips[0]))
				continue;
			if (nr == 1)
				v->in_place++;
			else if (is_chain(ips, nr, c))
				v->carried++;
			else if (!v->bad++)
				snprintf(v->msg, sizeof(v->msg),
					 "sample at %#llx, cookie 0, with %llu frames not the chain's",
					 (unsigned long long)s->ip, (unsigned long long)nr);
			continue;
		}
		rec = record_of(rd, s->cookie);
		if (!rec || !rec->nr || !from_ip(rec->ips[0]))
			continue;
		v->deferred++;
		if (user_mode && rec->ips[0] != s->ip) {
			if (!v->bad++)
				snprintf(v->msg, sizeof(v->msg),
					 "sample at %#llx joined with a record from %#llx",
					 (unsigned long long)s->ip,
					 (unsigned long long)rec->ips[0]);
			continue;
		}
		if (is_chain(rec->ips, rec->nr, c)) {
			v->joined++;
			continue;
		}
		for (k = 0; k < 3; k++)
			if (rec->nr < (__u64)k + 2 || rec->ips[k + 1] != c->ret[k])
				break;
		if (!v->bad++) {
			snprintf(v->msg, sizeof(v->msg),
				 "record %#llx: frame %d is %#llx, the chain's %#lx (%llu frames)",
				 (unsigned long long)rec->cookie, k + 1,
				 rec->nr > (__u64)k + 1 ?
				 (unsigned long long)rec->ips[k + 1] : 0ULL,
				 c->ret[k], (unsigned long long)rec->nr);
		}
	}
	for (i = 0; i < ri->nr_rec; i++) {
		const struct ring_record *s = &ri->rec[i];
		const __u64 *ips;
		__u64 nr;

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid ||
		    taken_in_user_mode(s) != user_mode)
			continue;
		ips = user_part(s, &nr);
		if (!nr || !from_ip(ips[0]))
			continue;
		v->twin++;
		v->twin_long += nr > 1;
	}
}

static bool at_syscall(__u64 ip)
{
	return ip == (unsigned long)sframe_syscall_ip;
}

static bool in_spin(__u64 ip)
{
	return ip >= (unsigned long)sframe_spin_loop &&
	       ip <= (unsigned long)sframe_spin_end;
}

static void expect_verdict(struct __test_metadata *_metadata,
			   const struct verdict *v, const char *what)
{
	TH_LOG("%s: %d deferred, %d joined with the chain, %d walked in place, %d carried the walk",
	       what, v->deferred, v->joined, v->in_place, v->carried);
	TH_LOG("%s: their twins: %d, %d of them past the first frame",
	       what, v->twin, v->twin_long);
	EXPECT_LE(MIN_JOINED, v->joined)
		TH_LOG("%s: want %d samples joined with the chain's return addresses, saw %d",
		       what, MIN_JOINED, v->joined);
	EXPECT_EQ(0, v->bad) TH_LOG("%s: %d joined with another stack (first: %s)",
				    what, v->bad, v->msg);
	/* Frame pointers alone stop at once: the tables made the difference. */
	EXPECT_LE(MIN_JOINED, v->twin) TH_LOG("%s: want twins walked in place", what);
	EXPECT_EQ(0, v->twin_long)
		TH_LOG("%s: %d twins walked by frame pointers found more than the IP",
		       what, v->twin_long);
}

/* The program's own table and code, from its program headers. */
static int program_table_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct prctl_sframe *arg = data;
	int i;

	for (i = 0; i < info->dlpi_phnum; i++) {
		unsigned long start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;

		if (info->dlpi_phdr[i].p_type == PT_GNU_SFRAME) {
			arg->sframe_start = start;
			arg->sframe_size = info->dlpi_phdr[i].p_memsz;
		}
		if (info->dlpi_phdr[i].p_type == PT_LOAD &&
		    (info->dlpi_phdr[i].p_flags & PF_X)) {
			arg->text_start = start;
			arg->text_size = info->dlpi_phdr[i].p_memsz;
		}
	}
	return 1;	/* the first object is the program */
}

static void program_table(struct prctl_sframe *arg)
{
	memset(arg, 0, sizeof(*arg));
	dl_iterate_phdr(program_table_cb, arg);
}

static bool has_sframe(void)
{
	struct prctl_sframe arg;

	program_table(&arg);
	return arg.sframe_start != 0;
}

/*
 * Sample @rounds runs of the chain with the twins, reading them as it
 * goes; the chain's return value of each run must be @want (0: any).
 */
static void sample_rounds(struct __test_metadata *_metadata, struct twins *tw,
			  struct chain *c, struct chain_call *cc, int rounds,
			  long want)
{
	int i;

	open_twins(_metadata, tw);
	enable_twins(tw, true);
	for (i = 0; i < rounds; i++) {
		long ret = chain_1(c, cc);

		if (want)
			ASSERT_EQ(want, ret);
		drain_twins(tw);
	}
	enable_twins(tw, false);
	drain_twins(tw);
}

TEST(system_call_samples_are_joined_with_the_chain)
{
	struct iovec iov[READ_IOVS];
	struct chain_call cc;
	struct verdict v;
	struct twins tw;
	struct chain c;
	char *buf;
	int fd, i;

	if (!has_sframe())
		SKIP(return, "no PT_GNU_SFRAME in this program (its assembler lacks --gsframe?)");
	fd = open("/dev/zero", O_RDONLY);
	ASSERT_LE(0, fd);
	buf = malloc(READ_BYTES);
	ASSERT_FALSE(!buf);
	memset(buf, 1, READ_BYTES);
	for (i = 0; i < READ_IOVS; i++) {
		iov[i].iov_base = buf;
		iov[i].iov_len = READ_BYTES;
	}
	cc = (struct chain_call) {
		.nr = __NR_readv, .a1 = fd, .a2 = (long)iov, .a3 = READ_IOVS,
	};

	sample_rounds(_metadata, &tw, &c, &cc, ROUNDS,
		      (long)READ_BYTES * READ_IOVS);

	judge(&tw, &c, false, at_syscall, &v);
	expect_verdict(_metadata, &v, "in readv()");
	close_twins(&tw);
	free(buf);
	close(fd);
}

TEST(user_mode_samples_are_deferred_and_joined)
{
	struct chain_call cc = { .spin = SPIN_LOOPS };
	struct verdict v;
	struct twins tw;
	struct chain c;

	if (!has_sframe())
		SKIP(return, "no PT_GNU_SFRAME in this program (its assembler lacks --gsframe?)");
	sample_rounds(_metadata, &tw, &c, &cc, ROUNDS, 0);

	judge(&tw, &c, true, in_spin, &v);
	expect_verdict(_metadata, &v, "spinning in user mode");
	EXPECT_EQ(0, v.in_place)
		TH_LOG("want every user-mode sample of a task with tables deferred");
	close_twins(&tw);
}

TEST(without_tables_user_mode_samples_are_walked_in_place)
{
	struct chain_call cc = { .spin = SPIN_LOOPS };
	struct prctl_sframe arg;
	struct verdict v;
	struct twins tw;
	struct chain c;

	if (!has_sframe())
		SKIP(return, "no PT_GNU_SFRAME in this program (its assembler lacks --gsframe?)");
	program_table(&arg);
	ASSERT_NE(0, arg.text_start);
	/* The program's is the process's only table (Debian's libraries have none). */
	ASSERT_EQ(0, prctl(PR_SFRAME, PR_SFRAME_REMOVE, arg.text_start, 0, 0))
		TH_LOG("PR_SFRAME_REMOVE: %s", strerror(errno));

	sample_rounds(_metadata, &tw, &c, &cc, ROUNDS / 3, 0);
	ASSERT_EQ(0, prctl(PR_SFRAME, PR_SFRAME_ADD, &arg, sizeof(arg), 0))
		TH_LOG("PR_SFRAME_ADD: %s", strerror(errno));

	judge(&tw, &c, true, in_spin, &v);
	TH_LOG("no tables: %d deferred, %d walked in place", v.deferred, v.in_place);
	EXPECT_EQ(0, v.deferred) TH_LOG("want no user-mode sample deferred without tables");
	EXPECT_LE(MIN_JOINED, v.in_place) TH_LOG("want user-mode samples walked in place");
	close_twins(&tw);
}

/*
 * Code of a task with tables that no table covers (here generated code, a
 * loop): its user-mode samples are walked in place, as frame pointers
 * allow. Deferring them would cost an interrupt, a kernel entry, a walk
 * and a record each, for a walk that cannot do better there.
 */
static const unsigned char spin_code[] = {
	0xb9, 0x00, 0x00, 0x00, 0x00,	/* mov  $loops,%ecx */
	0xff, 0xc9,			/* dec  %ecx */
	0x75, 0xfc,			/* jnz  dec */
	0xc3,				/* ret */
};

TEST(uncovered_code_of_a_task_with_tables_walked_in_place)
{
	long page = sysconf(_SC_PAGESIZE);
	int i, deferred = 0, in_place = 0;
	uint32_t loops = SPIN_LOOPS;
	unsigned char *code;
	struct twins tw;
	size_t k;

	if (!has_sframe())
		SKIP(return, "no PT_GNU_SFRAME in this program (its assembler lacks --gsframe?)");
	code = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	ASSERT_NE(MAP_FAILED, code);
	memcpy(code, spin_code, sizeof(spin_code));
	memcpy(code + 1, &loops, sizeof(loops));
	ASSERT_EQ(0, mprotect(code, page, PROT_READ | PROT_EXEC));

	open_twins(_metadata, &tw);
	enable_twins(&tw, true);
	for (i = 0; i < ROUNDS; i++) {
		((void (*)(void))code)();
		drain_twins(&tw);
	}
	enable_twins(&tw, false);
	drain_twins(&tw);

	for (k = 0; k < tw.r[0].nr_rec; k++) {
		const struct ring_record *rr = &tw.r[0].rec[k];

		if (rr->type != PERF_RECORD_SAMPLE || rr->ip < (unsigned long)code ||
		    rr->ip >= (unsigned long)code + sizeof(spin_code))
			continue;
		if (rr->cookie)
			deferred++;
		else
			in_place++;
	}
	TH_LOG("in code no table covers: %d deferred, %d walked in place",
	       deferred, in_place);
	EXPECT_EQ(0, deferred)
		TH_LOG("want no user-mode sample deferred where no table covers the code");
	EXPECT_LE(MIN_JOINED, in_place) TH_LOG("want user-mode samples walked in place");
	close_twins(&tw);
	munmap(code, page);
}

TEST_HARNESS_MAIN
