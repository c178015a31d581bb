// SPDX-License-Identifier: GPL-2.0
/*
 * A livelock of the base kernel: a sampling event on the preemptirq:irq_enable
 * tracepoint of the task itself, period 1, whose file has O_ASYNC set. Every
 * overflow queues the event's irq_work (the SIGIO is sent from there); the
 * irq_work's self-interrupt comes as soon as interrupts are back on, and its
 * own exit enables interrupts, which is the next overflow. The task never runs
 * the instruction after the first sti again.
 *
 * irq-work-storm [PERIOD [TRACEPOINT [OPTIONS]]] prints "irq-work-storm: survived"
 * if it did. TRACEPOINT is irq_enable (the default) or irq_disable; OPTIONS,
 * separated by commas: "defer" adds PERF_SAMPLE_CALLCHAIN_DEFERRED, whose
 * walks on the way out to user space toggle interrupts too; "handler" gives
 * SIGIO a handler (else it is ignored), whose deliveries do; "sample-period"
 * adds PERF_SAMPLE_PERIOD, with which a software or tracepoint event that is
 * not in frequency mode overflows at every hit, whatever its period
 * (perf_swevent_event()): period 1000 then storms as period 1 does.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PERF_SAMPLE_CALLCHAIN_DEFERRED
#define PERF_SAMPLE_CALLCHAIN_DEFERRED	0x2000000U
#endif

/* A handler, so that each SIGIO is delivered: a signal frame each time. */
static void on_sigio(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	const char *tp = argc > 2 ? argv[2] : "irq_enable";
	const char *options = argc > 3 ? argv[3] : "";
	int defer = !!strstr(options, "defer");
	int handler = !!strstr(options, "handler");
	int period_bit = !!strstr(options, "sample-period");
	struct perf_event_attr attr;
	char id_file[128];
	long long id;
	FILE *f;
	int fd, i;

	snprintf(id_file, sizeof(id_file),
		 "/sys/kernel/tracing/events/preemptirq/%s/id", tp);
	f = fopen(id_file, "r");
	if (!f || fscanf(f, "%lld", &id) != 1) {
		perror(id_file);
		return 2;
	}
	fclose(f);

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_TRACEPOINT;
	attr.config = id;
	attr.sample_period = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
	attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
	if (defer)
		attr.sample_type |= PERF_SAMPLE_CALLCHAIN |
				    PERF_SAMPLE_CALLCHAIN_DEFERRED;
	if (period_bit)
		attr.sample_type |= PERF_SAMPLE_PERIOD;
	attr.disabled = 1;
	fd = syscall(__NR_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd < 0) {
		perror("perf_event_open");
		return 2;
	}
	signal(SIGIO, handler ? on_sigio : SIG_IGN);
	if (fcntl(fd, F_SETOWN, getpid()) || fcntl(fd, F_SETFL, O_ASYNC)) {
		perror("fcntl");
		return 2;
	}
	printf("irq-work-storm: %s, period %llu%s%s%s, enabling\n", tp,
	       (unsigned long long)attr.sample_period,
	       period_bit ? ", PERF_SAMPLE_PERIOD" : "",
	       defer ? ", deferred callchains" : "",
	       handler ? ", a SIGIO handler" : "");
	fflush(stdout);
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	for (i = 0; i < 10000; i++)
		syscall(SYS_getppid);
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	printf("irq-work-storm: survived\n");
	return 0;
}
