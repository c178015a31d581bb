// SPDX-License-Identifier: GPL-2.0
/*
 * Test hook for deferred user stack walks (kernel/unwind/deferred.c), driven
 * by tools/testing/selftests/unwind_deferred through ioctls on
 * /sys/kernel/debug/unwind_deferred_test: the tests ask for walks from task,
 * hard interrupt and NMI context, at a chosen system call, exec or signal
 * delivery, and read back what two test consumers were called with.
 * It exists only for those tests; it never belongs in a production kernel.
 */

#define pr_fmt(fmt) "unwind_deferred_test: " fmt

#include <linux/atomic.h>
#include <linux/bitmap.h>
#include <linux/compat.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/init.h>
#include <linux/irq_work.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/unwind_deferred.h>
#include <linux/wait.h>

#include <asm/apic.h>
#include <asm/nmi.h>

#include <trace/events/sched.h>
#include <trace/events/signal.h>
#include <trace/events/syscalls.h>
#include <trace/events/unwind.h>

#include "test_unwind_deferred_uapi.h"

/* How long an IRQ or NMI step waits for its interrupt, in microseconds. */
#define UDT_SPIN_US		USEC_PER_SEC
/* How long a REQUEST waits for its RELEASE. */
#define UDT_WAIT_TIMEOUT	(10 * HZ)

/**
 * struct udt_consumer - a test consumer and what it was called back with
 * @consumer:	registered with the deferral core at boot
 * @calls:	callbacks since the last reset
 * @cookie:	the cookie of the last callback
 * @tid:	thread id of the task of the last callback
 * @tgid:	its process id
 * @nr:		trace->nr of the last callback
 * @entries:	the first UDT_MAX_ENTRIES entries of the last trace
 *
 * Everything but @consumer is protected by udt_lock.
 */
struct udt_consumer {
	struct unwind_work	consumer;
	u32			calls;
	u64			cookie;
	pid_t			tid;
	pid_t			tgid;
	unsigned int		nr;
	unsigned long		entries[UDT_MAX_ENTRIES];
};

/**
 * struct udt_armed - the process armed by UDT_IOC_ARM
 * @tgid:	its thread group id (global), 0 when nothing is armed
 * @nr:		the system call number it is armed for
 * @compat:	whether @nr is a compat system call number
 * @flags:	UDT_ARM_*
 * @res:	what the armed points did
 */
struct udt_armed {
	pid_t			tgid;
	int			nr;
	bool			compat;
	u32			flags;
	struct udt_arm_result	res;
};

/**
 * struct udt_waiter - a task blocked in UDT_IOC_REQUEST
 * @list:	entry in udt_waiters
 * @tid:	its thread id, as its own PID namespace sees it
 * @released:	set by UDT_IOC_RELEASE
 */
struct udt_waiter {
	struct list_head	list;
	pid_t			tid;
	bool			released;
};

/**
 * struct udt_call - one step made from interrupt or NMI context
 * @step:	the step, filled in by the interrupt
 * @task:	the task that asked: the interrupt must have interrupted it
 * @work:	the irq_work of an IRQ step
 * @done:	set by the interrupt once @step is filled in
 */
struct udt_call {
	struct udt_step		*step;
	struct task_struct	*task;
	struct irq_work		work;
	bool			done;
};

/*
 * udt_lock protects the results, the armed state and the waiters. It is
 * taken with interrupts off, because the signal_deliver probe runs under
 * the (hard interrupt safe) siglock. It is never taken in NMI context.
 */
static DEFINE_SPINLOCK(udt_lock);
static struct udt_consumer udt_consumers[UDT_CONSUMERS];
static struct udt_armed udt_armed;
static LIST_HEAD(udt_waiters);
static int udt_walks_base;

/* Walks done since boot, counted from their tracepoint. */
static atomic_t udt_walks = ATOMIC_INIT(0);
/* The reads of user memory of the last walk. */
static atomic_t udt_last_reads = ATOMIC_INIT(0);

static void udt_probe_walk(void *data, u64 cookie, unsigned int nr,
			   unsigned int reads)
{
	atomic_set(&udt_last_reads, reads);
	atomic_inc(&udt_walks);
}

static DECLARE_WAIT_QUEUE_HEAD(udt_release_wq);

/* udt_mutex serialises the limit checks. */
static DEFINE_MUTEX(udt_mutex);
static struct unwind_work udt_extra[UNWIND_MAX_CONSUMERS + 1];

/* The NMI step this CPU waits for, if any. */
static DEFINE_PER_CPU(struct udt_call *, udt_nmi_call);

/*
 * UDT_ARM_EXIT_NMI: the thread whose armed system call is on its way out,
 * and the NMI step made at the end of that return to user space. Written
 * there, with interrupts off and lockdep counting them on already, where
 * udt_lock may not be taken; read under it by UDT_IOC_ARM_RESULT, made
 * later by the same process.
 */
static struct task_struct *udt_exit_nmi_task;
static u32 udt_exit_nmi_consumer;
static struct udt_step udt_exit_nmi_step;
static bool udt_exit_nmi_hit;

static void udt_callback(struct unwind_work *consumer,
			 struct unwind_stacktrace *trace, u64 cookie)
{
	struct udt_consumer *uc = container_of(consumer, struct udt_consumer,
					       consumer);
	unsigned int nr = min_t(unsigned int, trace->nr, UDT_MAX_ENTRIES);
	unsigned long flags;

	spin_lock_irqsave(&udt_lock, flags);
	uc->calls++;
	uc->cookie = cookie;
	uc->tid = task_pid_vnr(current);
	uc->tgid = task_tgid_vnr(current);
	uc->nr = trace->nr;
	if (nr)
		memcpy(uc->entries, trace->entries, nr * sizeof(*uc->entries));
	memset(uc->entries + nr, 0, (UDT_MAX_ENTRIES - nr) * sizeof(*uc->entries));
	spin_unlock_irqrestore(&udt_lock, flags);
}

/* The extra consumers of the limit check are never asked for anything. */
static void udt_extra_callback(struct unwind_work *consumer,
			       struct unwind_stacktrace *trace, u64 cookie)
{
	WARN_ONCE(1, "extra consumer called back\n");
}

/*
 * Make @step's request for current, here, in whatever context this is; a
 * step of no consumer (UDT_ARM_EXIT_NMI_ONLY) only notes the context.
 */
static void udt_request_here(struct udt_step *step)
{
	struct unwind_work *consumer;
	u64 cookie = 0;

	step->in_hardirq = !!in_hardirq();
	step->in_nmi = !!in_nmi();
	step->cpu = raw_smp_processor_id();
	step->ret = 0;
	if (step->consumer < UDT_CONSUMERS) {
		consumer = &udt_consumers[step->consumer].consumer;
		step->ret = unwind_deferred_request(consumer, &cookie);
	}
	step->cookie = cookie;
}

/* Interrupt side of an IRQ or NMI step. */
static void udt_call_here(struct udt_call *call)
{
	if (current == call->task)
		udt_request_here(call->step);
	else
		call->step->ret = -ESTALE;	/* interrupted another task */
	/* Pairs with smp_load_acquire() in udt_spin_until_done(). */
	smp_store_release(&call->done, true);
}

/*
 * Wait, preemption disabled, for an interrupt this CPU sent itself. It
 * comes within microseconds; the bound only keeps a broken setup from
 * hanging the CPU.
 */
static bool udt_spin_until_done(struct udt_call *call)
{
	unsigned int us;

	for (us = 0; us < UDT_SPIN_US; us++) {
		/* Pairs with smp_store_release() in udt_call_here(). */
		if (smp_load_acquire(&call->done))
			return true;
		udelay(1);
	}
	/* As above. */
	return smp_load_acquire(&call->done);
}

static void udt_irq_work_func(struct irq_work *work)
{
	udt_call_here(container_of(work, struct udt_call, work));
}

/*
 * An irq_work queued on this CPU runs in hard interrupt context (a self-IPI
 * on x86) as soon as interrupts are on, which they are: preemption stays
 * off until it ran, so it interrupts this task and not another one.
 */
static void udt_request_from_irq(struct udt_step *step)
{
	struct udt_call call = {
		.step	= step,
		.task	= current,
		.work	= IRQ_WORK_INIT_HARD(udt_irq_work_func),
	};

	preempt_disable();
	irq_work_queue(&call.work);
	udt_spin_until_done(&call);
	preempt_enable();
	/* The work is on this stack: it must be finished before we return. */
	irq_work_sync(&call.work);
}

/*
 * The NMI side of an NMI step. Every local NMI (perf's, the watchdog's)
 * passes here: claim only the NMI that this CPU armed.
 */
static int udt_nmi_handler(unsigned int type, struct pt_regs *regs)
{
	struct udt_call *call;

	if (!this_cpu_read(udt_nmi_call))
		return NMI_DONE;
	/* Against udt_request_from_nmi() giving up on this NMI. */
	call = this_cpu_xchg(udt_nmi_call, NULL);
	if (!call)
		return NMI_DONE;
	udt_call_here(call);
	return NMI_HANDLED;
}

/*
 * A real NMI, sent to this CPU through its local APIC (the ICR: the
 * self-IPI shorthand of x2APIC is for fixed vectors only).
 */
static void udt_send_nmi_self(void)
{
	__apic_send_IPI_mask(cpumask_of(smp_processor_id()), NMI_VECTOR);
}

static void udt_request_from_nmi(struct udt_step *step)
{
	struct udt_call call = {
		.step	= step,
		.task	= current,
	};

	preempt_disable();
	this_cpu_write(udt_nmi_call, &call);
	udt_send_nmi_self();
	if (!udt_spin_until_done(&call)) {
		/*
		 * If the handler has not taken the call yet, take it back so
		 * that a late NMI cannot write to this stack. If it has, it
		 * ran to its end before we got here: it interrupted us.
		 */
		if (this_cpu_xchg(udt_nmi_call, NULL))
			step->ret = -ETIME;
	}
	preempt_enable();
}

static void udt_run_step(struct udt_step *step)
{
	switch (step->context) {
	case UDT_CTX_TASK:
		preempt_disable();	/* so that step->cpu is where it ran */
		udt_request_here(step);
		preempt_enable();
		break;
	case UDT_CTX_IRQ:
		udt_request_from_irq(step);
		break;
	case UDT_CTX_NMI:
		udt_request_from_nmi(step);
		break;
	case UDT_CTX_TASK_WORK:
		/* Task context, no lock held: the walk may run here. */
		task_work_run();
		step->ret = 0;
		break;
	}
}

/* Block until UDT_IOC_RELEASE names this task, for a bounded time. */
static int udt_wait_for_release(void)
{
	struct udt_waiter waiter = { .tid = task_pid_vnr(current) };
	bool released;
	long left;

	spin_lock_irq(&udt_lock);
	list_add_tail(&waiter.list, &udt_waiters);
	spin_unlock_irq(&udt_lock);

	left = wait_event_interruptible_timeout(udt_release_wq,
						READ_ONCE(waiter.released),
						UDT_WAIT_TIMEOUT);

	spin_lock_irq(&udt_lock);
	list_del(&waiter.list);
	released = waiter.released;
	spin_unlock_irq(&udt_lock);

	if (released)
		return 0;
	return left < 0 ? -EINTR : -ETIMEDOUT;
}

static long udt_ioctl_request(void __user *uarg)
{
	struct udt_request req;
	unsigned int i;
	long ret = 0;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (!req.nr_steps || req.nr_steps > UDT_MAX_STEPS ||
	    req.wait_after > req.nr_steps)
		return -EINVAL;
	for (i = 0; i < req.nr_steps; i++) {
		struct udt_step *step = &req.steps[i];

		if (step->consumer >= UDT_CONSUMERS ||
		    step->context > UDT_CTX_TASK_WORK)
			return -EINVAL;
		step->cookie = 0;
		step->ret = -EINPROGRESS;
		step->cpu = 0;
		step->in_hardirq = 0;
		step->in_nmi = 0;
	}

	for (i = 0; i < req.nr_steps; i++) {
		udt_run_step(&req.steps[i]);
		if (i + 1 == req.wait_after) {
			ret = udt_wait_for_release();
			if (ret)
				break;
		}
	}

	if (copy_to_user(uarg, &req, sizeof(req)))
		return -EFAULT;
	return ret;
}

static long udt_ioctl_release(void __user *uarg)
{
	struct udt_release rel;
	struct udt_waiter *waiter;
	long ret = -ESRCH;

	if (copy_from_user(&rel, uarg, sizeof(rel)))
		return -EFAULT;
	if (rel.flags & ~UDT_RELEASE_PEEK)
		return -EINVAL;

	spin_lock_irq(&udt_lock);
	list_for_each_entry(waiter, &udt_waiters, list) {
		if (waiter->released || (rel.tid && waiter->tid != rel.tid))
			continue;
		if (!(rel.flags & UDT_RELEASE_PEEK))
			WRITE_ONCE(waiter->released, true);
		ret = 0;
		break;
	}
	spin_unlock_irq(&udt_lock);

	/* The waiter may be gone already; the queue is static. */
	if (!ret && !(rel.flags & UDT_RELEASE_PEEK))
		wake_up_all(&udt_release_wq);
	return ret;
}

static long udt_ioctl_result(void __user *uarg)
{
	struct udt_consumer *uc;
	struct udt_result *res;
	unsigned int i;
	long ret = 0;

	res = kzalloc(sizeof(*res), GFP_KERNEL);
	if (!res)
		return -ENOMEM;
	if (copy_from_user(&res->consumer, uarg, sizeof(res->consumer))) {
		ret = -EFAULT;
		goto out;
	}
	if (res->consumer >= UDT_CONSUMERS) {
		ret = -EINVAL;
		goto out;
	}
	uc = &udt_consumers[res->consumer];

	spin_lock_irq(&udt_lock);
	res->calls = uc->calls;
	res->cookie = uc->cookie;
	res->tid = uc->tid;
	res->tgid = uc->tgid;
	res->nr = uc->nr;
	for (i = 0; i < UDT_MAX_ENTRIES; i++)
		res->entries[i] = uc->entries[i];
	res->walks = atomic_read(&udt_walks) - udt_walks_base;
	res->reads = atomic_read(&udt_last_reads);
	spin_unlock_irq(&udt_lock);

	if (copy_to_user(uarg, res, sizeof(*res)))
		ret = -EFAULT;
out:
	kfree(res);
	return ret;
}

/*
 * Claim an armed point for current: true when current belongs to the armed
 * process, @want is armed and @hit has not fired yet. Records the hit.
 */
static bool udt_claim(u32 want, u32 hit)
{
	unsigned long flags;
	bool claimed;

	if (likely(READ_ONCE(udt_armed.tgid) != current->tgid))
		return false;

	spin_lock_irqsave(&udt_lock, flags);
	claimed = udt_armed.tgid == current->tgid &&
		  (udt_armed.flags & want) == want &&
		  (udt_armed.res.hits & (UDT_HIT_SYSCALL | hit)) == UDT_HIT_SYSCALL;
	if (claimed)
		udt_armed.res.hits |= hit;
	spin_unlock_irqrestore(&udt_lock, flags);
	return claimed;
}

static void udt_probe_sys_enter(void *data, struct pt_regs *regs, long id)
{
	struct unwind_work *consumer = &udt_consumers[0].consumer;
	unsigned long flags;
	bool claimed;
	u64 cookie;
	int ret;

	if (likely(READ_ONCE(udt_armed.tgid) != current->tgid))
		return;

	spin_lock_irqsave(&udt_lock, flags);
	claimed = udt_armed.tgid == current->tgid &&
		  !(udt_armed.res.hits & UDT_HIT_SYSCALL) &&
		  id == udt_armed.nr && in_compat_syscall() == udt_armed.compat;
	if (claimed) {
		udt_armed.res.hits |= UDT_HIT_SYSCALL;
		udt_armed.res.tid = task_pid_vnr(current);
		if (udt_armed.flags & (UDT_ARM_EXIT_NMI | UDT_ARM_EXIT_NMI_ONLY)) {
			udt_exit_nmi_consumer = 1;
			if (udt_armed.flags & UDT_ARM_EXIT_NMI_ONLY)
				udt_exit_nmi_consumer = UDT_CONSUMERS;
			WRITE_ONCE(udt_exit_nmi_task, current);
		}
	}
	spin_unlock_irqrestore(&udt_lock, flags);
	if (!claimed)
		return;

	ret = unwind_deferred_request(consumer, &cookie);

	spin_lock_irqsave(&udt_lock, flags);
	udt_armed.res.syscall_ret = ret;
	udt_armed.res.syscall_cookie = cookie;
	spin_unlock_irqrestore(&udt_lock, flags);
}

/* After the new image is set up: its registers are the ones walked. */
static void udt_probe_exec(void *data, struct task_struct *p, pid_t old_pid,
			   struct linux_binprm *bprm)
{
	struct unwind_work *consumer = &udt_consumers[1].consumer;
	unsigned long flags;
	u64 cookie;
	int ret;

	if (!udt_claim(UDT_ARM_EXEC, UDT_HIT_EXEC))
		return;

	ret = unwind_deferred_request(consumer, &cookie);

	spin_lock_irqsave(&udt_lock, flags);
	udt_armed.res.exec_ret = ret;
	udt_armed.res.exec_cookie = cookie;
	spin_unlock_irqrestore(&udt_lock, flags);
}

/*
 * get_signal() runs the pending walk and ends the stay before it dequeues a
 * signal (a handler's frame rewrites the user registers), so requests here
 * start a new stay, walked before the frame is set up. Called under the
 * siglock.
 */
static void udt_probe_signal_deliver(void *data, int sig,
				     struct kernel_siginfo *info,
				     struct k_sigaction *ka)
{
	u64 cookie[UDT_CONSUMERS];
	int ret[UDT_CONSUMERS];
	unsigned long flags;
	int i;

	if (!udt_claim(UDT_ARM_SIGNAL, UDT_HIT_SIGNAL))
		return;

	for (i = 0; i < UDT_CONSUMERS; i++)
		ret[i] = unwind_deferred_request(&udt_consumers[i].consumer,
						 &cookie[i]);

	spin_lock_irqsave(&udt_lock, flags);
	for (i = 0; i < UDT_CONSUMERS; i++) {
		udt_armed.res.signal_ret[i] = ret[i];
		udt_armed.res.signal_cookie[i] = cookie[i];
	}
	spin_unlock_irqrestore(&udt_lock, flags);
}

/**
 * unwind_test_exit_to_user_mode - the end of a return to user space
 *
 * Context: the very end of exit_to_user_mode(), past the exit work's last
 * look at the thread flags and the end of the stay (unwind_reset_info()),
 * interrupts off until user mode.
 *
 * For the thread of a system call armed with UDT_ARM_EXIT_NMI, a request
 * from an NMI that interrupts this function: ordinary kernel text, as a
 * return thunk after it is (UDT_ARM_EXIT_NMI_ONLY: the NMI only, for the
 * events raised in its handler). The walk must still run before any user
 * instruction, in a stay of its own, and find the stack of the system call.
 */
void unwind_test_exit_to_user_mode(void)
{
	if (likely(READ_ONCE(udt_exit_nmi_task) != current))
		return;
	WRITE_ONCE(udt_exit_nmi_task, NULL);

	udt_exit_nmi_step = (struct udt_step){
		.consumer	= udt_exit_nmi_consumer,
		.context	= UDT_CTX_NMI,
		.ret		= -EINPROGRESS,
	};
	udt_request_from_nmi(&udt_exit_nmi_step);
	WRITE_ONCE(udt_exit_nmi_hit, true);
}

static void udt_exit_nmi_reset(void)
{
	WRITE_ONCE(udt_exit_nmi_task, NULL);
	WRITE_ONCE(udt_exit_nmi_hit, false);
}

static long udt_ioctl_arm(void __user *uarg)
{
	struct udt_arm arm;

	if (copy_from_user(&arm, uarg, sizeof(arm)))
		return -EFAULT;
	if (arm.flags & ~(UDT_ARM_EXEC | UDT_ARM_SIGNAL | UDT_ARM_EXIT_NMI |
			  UDT_ARM_EXIT_NMI_ONLY) ||
	    arm.nr > INT_MAX)
		return -EINVAL;

	spin_lock_irq(&udt_lock);
	udt_exit_nmi_reset();
	udt_armed.res = (struct udt_arm_result){ };
	udt_armed.nr = arm.nr;
	udt_armed.compat = in_compat_syscall();
	udt_armed.flags = arm.flags;
	WRITE_ONCE(udt_armed.tgid, current->tgid);
	spin_unlock_irq(&udt_lock);
	return 0;
}

static long udt_ioctl_arm_result(void __user *uarg)
{
	struct udt_arm_result res;

	spin_lock_irq(&udt_lock);
	res = udt_armed.res;
	if (READ_ONCE(udt_exit_nmi_hit)) {
		res.hits |= UDT_HIT_EXIT_NMI;
		res.exit_nmi_ret = udt_exit_nmi_step.ret;
		res.exit_nmi_in_nmi = udt_exit_nmi_step.in_nmi;
		res.exit_nmi_cookie = udt_exit_nmi_step.cookie;
	}
	spin_unlock_irq(&udt_lock);

	if (copy_to_user(uarg, &res, sizeof(res)))
		return -EFAULT;
	return 0;
}

/* Was @consumer registered in a slot of its own, below the limit? */
static bool udt_slot_is_new(struct unwind_work *consumer,
			    unsigned long *slots)
{
	int slot = consumer->bit;

	if (slot < 0 || slot >= UNWIND_MAX_CONSUMERS || test_bit(slot, slots))
		return false;
	__set_bit(slot, slots);
	return true;
}

static long udt_ioctl_limit(void __user *uarg)
{
	DECLARE_BITMAP(slots, UNWIND_MAX_CONSUMERS) = { };
	struct udt_limit lim = {
		.max		= UNWIND_MAX_CONSUMERS,
		.reregister	= -ENOENT,
		.refusal_again	= -ENOENT,
		.distinct_slots	= 1,
	};
	int i, n, ret = 0;

	mutex_lock(&udt_mutex);
	for (n = 0; n < ARRAY_SIZE(udt_extra); n++) {
		ret = unwind_deferred_init(&udt_extra[n], udt_extra_callback);
		if (ret)
			break;
	}
	lim.registered = n;
	lim.refusal = ret;

	for (i = 0; i < UDT_CONSUMERS; i++)
		if (!udt_slot_is_new(&udt_consumers[i].consumer, slots))
			lim.distinct_slots = 0;
	for (i = 0; i < n; i++)
		if (!udt_slot_is_new(&udt_extra[i], slots))
			lim.distinct_slots = 0;

	/* A freed slot can be taken again, and only it. */
	if (n && n < ARRAY_SIZE(udt_extra)) {
		unwind_deferred_cancel(&udt_extra[n - 1]);
		lim.reregister = unwind_deferred_init(&udt_extra[n - 1],
						      udt_extra_callback);
		if (lim.reregister) {
			n--;
		} else {
			lim.refusal_again =
				unwind_deferred_init(&udt_extra[n],
						     udt_extra_callback);
			if (!lim.refusal_again)
				n++;
		}
	}

	while (n--)
		unwind_deferred_cancel(&udt_extra[n]);
	mutex_unlock(&udt_mutex);

	if (copy_to_user(uarg, &lim, sizeof(lim)))
		return -EFAULT;
	return 0;
}

/*
 * UDT_IOC_REUSE: its two consumers, what they got, and whether one runs.
 * Not udt_mutex: the walks run in between, with no lock held.
 */
static struct unwind_work udt_reuse_work[2];
static struct udt_reuse udt_reuse;
static atomic_t udt_reuse_busy = ATOMIC_INIT(0);

static void udt_reuse_callback(struct unwind_work *consumer,
			       struct unwind_stacktrace *trace, u64 cookie)
{
	if (consumer == &udt_reuse_work[0]) {
		udt_reuse.first_calls++;
	} else {
		udt_reuse.second_calls++;
		udt_reuse.second_nr = trace->nr;
	}
}

static int udt_request_now(struct unwind_work *consumer)
{
	u64 cookie;
	int ret;

	/* Preemption off, as unwind_deferred_request() wants. */
	preempt_disable();
	ret = unwind_deferred_request(consumer, &cookie);
	preempt_enable();
	return ret;
}

static long udt_ioctl_reuse(void __user *uarg)
{
	struct unwind_work *second;
	struct udt_reuse res;
	int first_bit;

	if (atomic_cmpxchg(&udt_reuse_busy, 0, 1))
		return -EBUSY;
	udt_reuse = (struct udt_reuse){ .first_ret = -ENOENT,
					.second_ret = -ENOENT };
	if (!unwind_deferred_init(&udt_reuse_work[0], udt_reuse_callback)) {
		first_bit = udt_reuse_work[0].bit;
		udt_reuse.first_ret = udt_request_now(&udt_reuse_work[0]);
		/* The walk, in this system call: the stay goes on. */
		task_work_run();
		unwind_deferred_cancel(&udt_reuse_work[0]);

		second = &udt_reuse_work[1];
		if (!unwind_deferred_init(second, udt_reuse_callback)) {
			udt_reuse.same_bit = second->bit == first_bit;
			udt_reuse.second_ret = udt_request_now(second);
			task_work_run();
			unwind_deferred_cancel(second);
		}
	}
	res = udt_reuse;
	atomic_set(&udt_reuse_busy, 0);

	if (copy_to_user(uarg, &res, sizeof(res)))
		return -EFAULT;
	return 0;
}

static long udt_ioctl_reset(void)
{
	unsigned int i;

	spin_lock_irq(&udt_lock);
	for (i = 0; i < UDT_CONSUMERS; i++) {
		struct udt_consumer *uc = &udt_consumers[i];

		uc->calls = 0;
		uc->cookie = 0;
		uc->tid = 0;
		uc->tgid = 0;
		uc->nr = 0;
		memset(uc->entries, 0, sizeof(uc->entries));
	}
	WRITE_ONCE(udt_armed.tgid, 0);
	udt_armed.res = (struct udt_arm_result){ };
	udt_exit_nmi_reset();
	udt_walks_base = atomic_read(&udt_walks);
	spin_unlock_irq(&udt_lock);
	return 0;
}

static long udt_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case UDT_IOC_RESET:
		return udt_ioctl_reset();
	case UDT_IOC_REQUEST:
		return udt_ioctl_request(uarg);
	case UDT_IOC_RELEASE:
		return udt_ioctl_release(uarg);
	case UDT_IOC_RESULT:
		return udt_ioctl_result(uarg);
	case UDT_IOC_ARM:
		return udt_ioctl_arm(uarg);
	case UDT_IOC_ARM_RESULT:
		return udt_ioctl_arm_result(uarg);
	case UDT_IOC_LIMIT:
		return udt_ioctl_limit(uarg);
	case UDT_IOC_REUSE:
		return udt_ioctl_reuse(uarg);
	}
	return -ENOTTY;
}

static const struct file_operations udt_fops = {
	.owner		= THIS_MODULE,
	.unlocked_ioctl	= udt_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static int __init udt_init(void)
{
	int i, ret;

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ret = unwind_deferred_init(&udt_consumers[i].consumer,
					   udt_callback);
		if (ret)
			goto err;
	}
	/*
	 * The probes stay registered from boot on and return at once unless
	 * a task is armed: a tracepoint's first and second probe rewrite its
	 * static call sites, and the tests run under QEMU's TCG, where a CPU
	 * may run into the int3 of such a rewrite after it ended
	 * (harness/lib.sh, hold_tracepoints).
	 * sys_enter then takes every system call through the syscall
	 * tracepoint, which a test kernel can afford.
	 */
	ret = register_trace_unwind_deferred_walk(udt_probe_walk, NULL);
	if (ret)
		goto err;
	ret = register_trace_sys_enter(udt_probe_sys_enter, NULL);
	if (ret)
		goto err_walk;
	ret = register_trace_sched_process_exec(udt_probe_exec, NULL);
	if (ret)
		goto err_sys_enter;
	ret = register_trace_signal_deliver(udt_probe_signal_deliver, NULL);
	if (ret)
		goto err_exec;
	ret = register_nmi_handler(NMI_LOCAL, udt_nmi_handler, 0,
				   "unwind_deferred_test");
	if (ret)
		goto err_signal;
	/*
	 * debugfs's full proxy has no compat_ioctl, which the 32-bit tests
	 * need; the file is never removed, so it needs no proxy.
	 */
	debugfs_create_file_unsafe("unwind_deferred_test", 0600, NULL, NULL,
				   &udt_fops);
	return 0;

err_signal:
	unregister_trace_signal_deliver(udt_probe_signal_deliver, NULL);
err_exec:
	unregister_trace_sched_process_exec(udt_probe_exec, NULL);
err_sys_enter:
	unregister_trace_sys_enter(udt_probe_sys_enter, NULL);
err_walk:
	unregister_trace_unwind_deferred_walk(udt_probe_walk, NULL);
	tracepoint_synchronize_unregister();
err:
	while (i--)
		unwind_deferred_cancel(&udt_consumers[i].consumer);
	pr_err("cannot set up: %d\n", ret);
	return ret;
}
late_initcall(udt_init);
