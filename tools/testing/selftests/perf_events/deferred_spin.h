/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Time in user mode, sized in loops of a two-instruction spin: shared by
 * the selftests whose tasks must also be sampled outside the kernel
 * (those of deferred_observe.h and deferred_progress.h). Include after
 * deferred_ring.h.
 */
#ifndef DEFERRED_SPIN_H
#define DEFERRED_SPIN_H

#define SPIN_CAL_LOOPS		1000000

/*
 * Spin in user mode for "loops" rounds of a two-instruction loop. noipa
 * rules out inline: unused keeps the includers that do not call it quiet.
 */
static __attribute__((noipa, unused)) void spin_user(unsigned long loops)
{
	if (!loops)
		return;
	asm volatile("1:\tdec %0\n\t"
		     "jnz 1b"
		     : "+r" (loops) : : "cc");
}

/* The loops that take about "seconds", when SPIN_CAL_LOOPS took "t" s. */
static inline unsigned long loops_for(double seconds, double t)
{
	if (t <= 0)
		return SPIN_CAL_LOOPS;
	return SPIN_CAL_LOOPS * seconds / t + 1;
}

/* The number of spin_user() loops that take about "seconds". */
static inline unsigned long spin_loops(double seconds)
{
	double t;

	spin_user(SPIN_CAL_LOOPS);
	t = ring_now();
	spin_user(SPIN_CAL_LOOPS);
	return loops_for(seconds, ring_now() - t);
}

#endif /* DEFERRED_SPIN_H */
