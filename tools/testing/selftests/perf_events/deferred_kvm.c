// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED on a KVM vCPU thread. KVM_RUN runs task
 * work before each guest entry while it holds the vCPU's mutex
 * (xfer_to_guest_mode_handle_work()), where no deferred walk may run: the
 * samples taken in the kernel in KVM's run loop (their callchain passes
 * through kvm_arch_vcpu_ioctl_run()) are walked in place, cookie 0 and
 * the user part inline, and the lockdep test kernel would report a walk
 * run under the mutex. (Samples of the system call before the run loop
 * may be deferred: their walk runs before KVM takes the mutex.)
 *
 * The guest is 16-bit real-mode code that executes CPUID, which KVM
 * handles in the kernel, a thousand times, then HLT, which ends KVM_RUN.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "../kselftest_harness.h"
#include "deferred_kallsyms.h"
#include "deferred_ring.h"
#include "deferred_util.h"

#define PERIOD_NS	200000	/* cpu-clock period */
#define DATA_PAGES	64
#define GUEST_SIZE	0x10000
#define GUEST_CODE	0x1000
#define MIN_SAMPLES	20	/* kernel-mode samples in the run loop */
#define MAX_RUNS	64
#define RUN_SECONDS	10.0

/* mov $1000, %si; 1: cpuid; dec %si; jnz 1b; hlt */
static const unsigned char guest_code[] = {
	0xbe, 0xe8, 0x03, 0x0f, 0xa2, 0x4e, 0x75, 0xfb, 0xf4,
};

struct vm {
	int kvm, vm, vcpu;
	struct kvm_run *run;
	size_t run_size;
	void *mem;
};

static void vm_create(struct __test_metadata *_metadata, struct vm *v)
{
	struct kvm_userspace_memory_region region = {
		.guest_phys_addr = 0,
		.memory_size = GUEST_SIZE,
	};
	struct kvm_sregs sregs;
	struct kvm_regs regs = { .rip = GUEST_CODE, .rflags = 0x2 };
	int size;

	v->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (v->kvm < 0 && (errno == ENOENT || errno == ENODEV || errno == ENXIO))
		SKIP(return, "/dev/kvm: %s (needs KVM and virtualization)",
		     strerror(errno));
	ASSERT_LE(0, v->kvm) TH_LOG("/dev/kvm: %s", strerror(errno));
	v->vm = ioctl(v->kvm, KVM_CREATE_VM, 0);
	ASSERT_LE(0, v->vm) TH_LOG("KVM_CREATE_VM: %s", strerror(errno));
	v->mem = mmap(NULL, GUEST_SIZE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, v->mem);
	memcpy((char *)v->mem + GUEST_CODE, guest_code, sizeof(guest_code));
	region.userspace_addr = (unsigned long)v->mem;
	ASSERT_EQ(0, ioctl(v->vm, KVM_SET_USER_MEMORY_REGION, &region))
		TH_LOG("KVM_SET_USER_MEMORY_REGION: %s", strerror(errno));
	v->vcpu = ioctl(v->vm, KVM_CREATE_VCPU, 0);
	ASSERT_LE(0, v->vcpu) TH_LOG("KVM_CREATE_VCPU: %s", strerror(errno));
	size = ioctl(v->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	ASSERT_LT(0, size);
	v->run_size = size;
	v->run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      v->vcpu, 0);
	ASSERT_NE(MAP_FAILED, v->run);

	ASSERT_EQ(0, ioctl(v->vcpu, KVM_GET_SREGS, &sregs));
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	ASSERT_EQ(0, ioctl(v->vcpu, KVM_SET_SREGS, &sregs));
	ASSERT_EQ(0, ioctl(v->vcpu, KVM_SET_REGS, &regs));
}

static void vm_destroy(struct vm *v)
{
	munmap(v->run, v->run_size);
	close(v->vcpu);
	close(v->vm);
	munmap(v->mem, GUEST_SIZE);
	close(v->kvm);
}

/* Whether kernel-mode sample @s was taken in [start, end)'s function. */
static bool taken_under(const struct ring_record *s, unsigned long long start,
			unsigned long long end)
{
	__u64 k;

	for (k = 0; k < s->nr && s->ips[k] != PERF_CONTEXT_USER; k++)
		if (s->ips[k] >= start && s->ips[k] < end)
			return true;
	return false;
}

/* The kernel-mode samples in @r taken in the run loop. */
static int run_loop_samples(const struct ring *r, unsigned long long start,
			    unsigned long long end)
{
	int n = 0;
	size_t i;

	for (i = 0; i < r->nr_rec; i++)
		n += r->rec[i].type == PERF_RECORD_SAMPLE &&
		     taken_in_kernel_mode(&r->rec[i]) &&
		     taken_under(&r->rec[i], start, end);
	return n;
}

TEST(kvm_run_samples_are_walked_in_place)
{
	struct perf_event_attr attr =
		sw_sample_attr(PERF_COUNT_SW_CPU_CLOCK, PERIOD_NS, true);
	int in_run = 0, deferred = 0, no_user = 0, runs = 0;
	double deadline = ring_now() + RUN_SECONDS;
	unsigned long long start, end;
	struct ring r;
	struct vm v;
	size_t i;

	ASSERT_TRUE(kernel_function("kvm_arch_vcpu_ioctl_run", &start, &end))
		TH_LOG("kvm_arch_vcpu_ioctl_run() is not in /proc/kallsyms");
	vm_create(_metadata, &v);
	if (v.kvm < 0)
		return;
	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	do {
		struct kvm_regs regs = { .rip = GUEST_CODE, .rflags = 0x2 };

		ASSERT_EQ(0, ioctl(v.vcpu, KVM_SET_REGS, &regs));
		ASSERT_EQ(0, ioctl(v.vcpu, KVM_RUN, 0))
			TH_LOG("KVM_RUN: %s", strerror(errno));
		ASSERT_EQ(KVM_EXIT_HLT, v.run->exit_reason)
			TH_LOG("want the guest to end at its HLT, exit reason %u",
			       v.run->exit_reason);
		runs++;
		ring_drain(&r);
	} while (run_loop_samples(&r, start, end) < MIN_SAMPLES &&
		 runs < MAX_RUNS && ring_now() < deadline);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];

		if (s->type != PERF_RECORD_SAMPLE || !taken_in_kernel_mode(s) ||
		    !taken_under(s, start, end))
			continue;
		in_run++;
		deferred += s->cookie != 0;
		no_user += !has_user_context(s);
	}
	TH_LOG("%d KVM_RUN calls, %d kernel-mode samples in the run loop",
	       runs, in_run);
	ASSERT_LE(MIN_SAMPLES, in_run)
		TH_LOG("want %d kernel-mode samples in the run loop to judge",
		       MIN_SAMPLES);
	EXPECT_EQ(0, deferred)
		TH_LOG("want every sample in the run loop walked in place, %d of %d deferred",
		       deferred, in_run);
	EXPECT_EQ(0, no_user)
		TH_LOG("want the user part inline, %d of %d without it", no_user, in_run);

	close_ring(&r);
	vm_destroy(&v);
}

TEST_HARNESS_MAIN
