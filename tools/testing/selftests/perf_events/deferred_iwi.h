/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interrupt work interrupts (self-IPIs) of /proc/interrupts, which the
 * deferred walk raises only where no exit work would run it: shared by the
 * selftests that count them (perf_events/deferred_self_interrupt,
 * unwind_deferred/unwind_deferred_test).
 */
#ifndef DEFERRED_IWI_H
#define DEFERRED_IWI_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The number of interrupt work interrupts so far, all CPUs; -1: none. */
static inline long long iwi_count(void)
{
	char *line = NULL, *p, *end;
	long long sum = -1, v;
	size_t cap = 0;
	FILE *f;

	f = fopen("/proc/interrupts", "r");
	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		p = line + strspn(line, " ");
		if (strncmp(p, "IWI:", 4))
			continue;
		/* One column per CPU, then the description. */
		sum = 0;
		for (p += 4;; p = end) {
			v = strtoll(p, &end, 10);
			if (end == p)
				break;
			sum += v;
		}
		break;
	}
	free(line);
	fclose(f);
	return sum;
}

#endif /* DEFERRED_IWI_H */
