/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where a kernel function's text is, from /proc/kallsyms (root): for the
 * selftests that aim at one function (failslab's stack filter in
 * unwind_deferred/unwind_deferred_test, the KVM run loop in a sample's
 * callchain in perf_events/deferred_kvm).
 */
#ifndef DEFERRED_KALLSYMS_H
#define DEFERRED_KALLSYMS_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/*
 * The text of the kernel function @name, [*start, *end): up to the next
 * symbol of /proc/kallsyms. False when it is not there.
 */
static inline bool kernel_function(const char *name, unsigned long long *start,
				   unsigned long long *end)
{
	char line[256], sym[128], type;
	unsigned long long addr;
	FILE *f;

	*start = 0;
	*end = ~0ULL;
	f = fopen("/proc/kallsyms", "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %127s", &addr, &type, sym) == 3 &&
		    !strcmp(sym, name))
			*start = addr;
	rewind(f);
	while (*start && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %127s", &addr, &type, sym) == 3 &&
		    addr > *start && addr < *end)
			*end = addr;
	fclose(f);
	return *start && *end != ~0ULL;
}

#endif /* DEFERRED_KALLSYMS_H */
