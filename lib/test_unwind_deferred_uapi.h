/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * The ioctl interface of lib/test_unwind_deferred.c, the test hook of
 * deferred user stack walks, shared with tools/testing/selftests/unwind_deferred.
 * This is a private UAPI of a test hook, so it is not installed with the
 * other UAPI headers. Every structure has the same layout for 32-bit and
 * 64-bit tasks: only __u32/__s32/__u64 fields, each __u64 at an offset that
 * is a multiple of 8, and a size that is a multiple of 8.
 */
#ifndef _LIB_TEST_UNWIND_DEFERRED_UAPI_H
#define _LIB_TEST_UNWIND_DEFERRED_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define UDT_PATH		"/sys/kernel/debug/unwind_deferred_test"

/* The hook's consumers, numbered 0 and 1. */
#define UDT_CONSUMERS		2
/* The most requests one UDT_IOC_REQUEST makes. */
#define UDT_MAX_STEPS		8
/* The most trace entries a result keeps. */
#define UDT_MAX_ENTRIES		64

/* Where a step's request is made from. */
#define UDT_CTX_TASK		0	/* the ioctl itself */
#define UDT_CTX_IRQ		1	/* an irq_work, in hard interrupt context */
#define UDT_CTX_NMI		2	/* a self-NMI */
/*
 * Not a request: run the task's pending task work here, as io_uring's
 * wait does before its system call returns. The stay goes on after its
 * walk, and the steps after this one request in it. @consumer is unused.
 */
#define UDT_CTX_TASK_WORK	3

/**
 * struct udt_step - one unwind_deferred_request() for the calling task
 * @consumer:	in: the consumer that asks, 0 or 1
 * @context:	in: UDT_CTX_*
 * @cookie:	out: the cookie the request returned
 * @ret:	out: what unwind_deferred_request() returned
 * @cpu:	out: the CPU the request ran on
 * @in_hardirq:	out: 1 when in_hardirq() was true at the request (NMI too)
 * @in_nmi:	out: 1 when in_nmi() was true at the request
 */
struct udt_step {
	__u32	consumer;
	__u32	context;
	__u64	cookie;
	__s32	ret;
	__u32	cpu;
	__u32	in_hardirq;
	__u32	in_nmi;
};

/**
 * struct udt_request - requests made within one system call (one kernel stay)
 * @nr_steps:	in: number of steps, 1..UDT_MAX_STEPS
 * @wait_after:	in: after this many steps, block until UDT_IOC_RELEASE (at
 *		most 10 s: the ioctl then fails with ETIMEDOUT); 0: never block
 * @steps:	the requests, made in order
 */
struct udt_request {
	__u32		nr_steps;
	__u32		wait_after;
	struct udt_step	steps[UDT_MAX_STEPS];
};

/* Only tell whether a matching task waits; release nothing. */
#define UDT_RELEASE_PEEK	0x1

/**
 * struct udt_release - wake a task blocked in UDT_IOC_REQUEST
 * @tid:	in: its thread id, 0 for any
 * @flags:	in: UDT_RELEASE_*
 *
 * The ioctl fails with ESRCH when no such task waits.
 */
struct udt_release {
	__u32	tid;
	__u32	flags;
};

/**
 * struct udt_result - what a consumer was called back with since UDT_IOC_RESET
 * @consumer:	in: 0 or 1
 * @calls:	out: number of callbacks
 * @cookie:	out: the cookie of the last callback
 * @tid:	out: thread id of the task of the last callback
 * @tgid:	out: its process id
 * @nr:		out: trace->nr of the last callback (may exceed UDT_MAX_ENTRIES)
 * @walks:	out: user stack walks done since UDT_IOC_RESET, by anyone
 * @reads:	out: the reads of user memory of the last walk, by anyone
 * @__pad:	zero
 * @entries:	out: the first UDT_MAX_ENTRIES entries of the last trace
 */
struct udt_result {
	__u32	consumer;
	__u32	calls;
	__u64	cookie;
	__u32	tid;
	__u32	tgid;
	__u32	nr;
	__u32	walks;
	__u32	reads;
	__u32	__pad;
	__u64	entries[UDT_MAX_ENTRIES];
};

/* Also request for consumer 1 when the armed process then execs. */
#define UDT_ARM_EXEC		0x1
/* Also request for consumers 0 and 1 when it then takes a signal. */
#define UDT_ARM_SIGNAL		0x2
/*
 * Also request for consumer 1 from a self-NMI at the end of that system
 * call's return to user space, past the exit work's last look at the
 * thread flags.
 */
#define UDT_ARM_EXIT_NMI	0x4
/*
 * As UDT_ARM_EXIT_NMI, but the NMI requests nothing itself: what the
 * tests' perf events raised in its handler ask for is all there is.
 */
#define UDT_ARM_EXIT_NMI_ONLY	0x8

/**
 * struct udt_arm - arm the calling process for its next system call @nr
 * @nr:		in: the system call number, in the caller's ABI
 * @flags:	in: UDT_ARM_*
 *
 * When a thread of the calling process enters system call @nr (the
 * sys_enter tracepoint), consumer 0 requests there, from task context.
 * With UDT_ARM_EXEC, consumer 1 requests when that process then execs
 * (the sched_process_exec tracepoint, after the new image is set up);
 * with UDT_ARM_SIGNAL, consumer 0 and then consumer 1 request when it then
 * takes a signal (the signal_deliver tracepoint, which comes after the
 * task work that get_signal() runs first); with UDT_ARM_EXIT_NMI, consumer
 * 1 requests from an NMI that the thread sends itself at the very end of
 * that system call's exit_to_user_mode(), as if the NMI had come in a
 * return thunk on the way to user mode (with UDT_ARM_EXIT_NMI_ONLY, that
 * NMI requests nothing). Each point fires once.
 * UDT_IOC_RESET disarms.
 */
struct udt_arm {
	__u32	nr;
	__u32	flags;
};

/* What fired since UDT_IOC_ARM. */
#define UDT_HIT_SYSCALL		0x1
#define UDT_HIT_EXEC		0x2
#define UDT_HIT_SIGNAL		0x4
#define UDT_HIT_EXIT_NMI	0x8

/**
 * struct udt_arm_result - the requests the armed points made
 * @hits:		UDT_HIT_* of the points that fired
 * @tid:		thread id of the thread that entered the system call
 * @syscall_cookie:	consumer 0's cookie at the system call
 * @syscall_ret:	consumer 0's unwind_deferred_request() return there
 * @exec_ret:		consumer 1's return at exec
 * @exec_cookie:	consumer 1's cookie at exec
 * @signal_ret:		each consumer's return at signal delivery
 * @signal_cookie:	each consumer's cookie at signal delivery
 * @exit_nmi_ret:	consumer 1's return in the NMI at the end of the exit
 *			(0 with UDT_ARM_EXIT_NMI_ONLY)
 * @exit_nmi_in_nmi:	1 when in_nmi() was true there
 * @exit_nmi_cookie:	consumer 1's cookie there
 */
struct udt_arm_result {
	__u32	hits;
	__u32	tid;
	__u64	syscall_cookie;
	__s32	syscall_ret;
	__s32	exec_ret;
	__u64	exec_cookie;
	__s32	signal_ret[UDT_CONSUMERS];
	__u64	signal_cookie[UDT_CONSUMERS];
	__s32	exit_nmi_ret;
	__u32	exit_nmi_in_nmi;
	__u64	exit_nmi_cookie;
};

/**
 * struct udt_limit - register consumers until the core refuses
 * @max:		UNWIND_MAX_CONSUMERS
 * @registered:		consumers the hook could register besides its own two
 * @refusal:		what the first refused registration returned
 * @reregister:		registering again after unregistering one (0: it worked)
 * @refusal_again:	registering one more after that (the limit again)
 * @distinct_slots:	1 when every registered consumer, the hook's own two
 *			included, had its own slot below @max
 *
 * The hook unregisters the extra consumers before it returns.
 */
struct udt_limit {
	__u32	max;
	__u32	registered;
	__s32	refusal;
	__s32	reregister;
	__s32	refusal_again;
	__u32	distinct_slots;
};

/**
 * struct udt_reuse - a consumer's bit taken by another within one stay
 * @first_ret:		the first consumer's request (0: queued)
 * @second_ret:		the second one's request, after the first one was
 *			called back and cancelled, in the same stay (0: queued)
 * @same_bit:		1 when the second consumer got the first one's bit
 * @first_calls:	callbacks of the first consumer
 * @second_calls:	callbacks of the second consumer
 * @second_nr:		trace->nr of the second consumer's callback
 *
 * The hook registers both consumers, runs the task work after each
 * request (the walk, in the system call), and cancels both before it
 * returns.
 */
struct udt_reuse {
	__s32	first_ret;
	__s32	second_ret;
	__u32	same_bit;
	__u32	first_calls;
	__u32	second_calls;
	__u32	second_nr;
};

#define UDT_IOC_MAGIC		0xDC

/* Forget every result, disarm, and count walks from now on. */
#define UDT_IOC_RESET		_IO(UDT_IOC_MAGIC, 0x00)
#define UDT_IOC_REQUEST		_IOWR(UDT_IOC_MAGIC, 0x01, struct udt_request)
#define UDT_IOC_RELEASE		_IOWR(UDT_IOC_MAGIC, 0x02, struct udt_release)
#define UDT_IOC_RESULT		_IOWR(UDT_IOC_MAGIC, 0x03, struct udt_result)
#define UDT_IOC_ARM		_IOWR(UDT_IOC_MAGIC, 0x04, struct udt_arm)
#define UDT_IOC_ARM_RESULT	_IOWR(UDT_IOC_MAGIC, 0x05, struct udt_arm_result)
#define UDT_IOC_LIMIT		_IOWR(UDT_IOC_MAGIC, 0x06, struct udt_limit)
#define UDT_IOC_REUSE		_IOR(UDT_IOC_MAGIC, 0x07, struct udt_reuse)

#endif /* _LIB_TEST_UNWIND_DEFERRED_UAPI_H */
