// SPDX-License-Identifier: GPL-2.0
/*
 * PID 1 of the test VM. The root filesystem is the host's, read-only over
 * 9p. Mount what the tests need, run the one command the host left in the
 * shared output folder as root, report its exit status and power off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>

static void mount_or_warn(const char *src, const char *dir, const char *type,
			  unsigned long flags, const char *opts)
{
	if (mount(src, dir, type, flags, opts))
		fprintf(stderr, "guest-init: mount %s on %s: %s\n", type, dir,
			strerror(errno));
}

static void power_off(void)
{
	/* The serial port sends what the tty holds only after the write. */
	tcdrain(STDOUT_FILENO);
	sync();
	reboot(RB_POWER_OFF);
	/* Without ACPI power-off, QEMU's -no-reboot turns a reset into an exit. */
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}

int main(void)
{
	const char *out = getenv("vmrun_out");
	char path[4096], status[64];
	int wstatus = 0, code;
	pid_t cmd, pid;
	int fd;

	mount_or_warn("proc", "/proc", "proc", 0, NULL);
	mount_or_warn("sysfs", "/sys", "sysfs", 0, NULL);
	mount_or_warn("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	/* What udev makes on other systems: bash's <(...) opens /dev/fd/N. */
	if (symlink("/proc/self/fd", "/dev/fd") && errno != EEXIST)
		perror("guest-init: /dev/fd");
	mount_or_warn("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	mount_or_warn("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
	/*
	 * The guest's own scratch space is /run. /tmp stays the host's (the
	 * repository may live there) but becomes writable: an overlay whose
	 * upper half is in the guest's memory.
	 */
	mount_or_warn("tmpfs", "/run", "tmpfs", 0, "mode=0755");
	mkdir("/run/tmp-upper", 01777);
	mkdir("/run/tmp-work", 0700);
	mount_or_warn("overlay", "/tmp", "overlay", 0,
		      "lowerdir=/tmp,upperdir=/run/tmp-upper,workdir=/run/tmp-work");

	if (!out) {
		fprintf(stderr, "guest-init: no vmrun_out= on the command line\n");
		power_off();
	}
	mount_or_warn("vmout", out, "9p", 0, "trans=virtio,version=9p2000.L");

	fd = open("/dev/console", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}

	snprintf(path, sizeof(path), "%s/cmd", out);
	cmd = fork();
	if (cmd == 0) {
		setsid();
		setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
		setenv("HOME", "/run", 1);
		setenv("TMPDIR", "/tmp", 1);
		execl("/bin/bash", "bash", path, (char *)NULL);
		perror("guest-init: exec /bin/bash");
		_exit(127);
	}

	/* Reap everything (orphans come to PID 1) until the command ends. */
	while ((pid = wait(&wstatus)) != cmd) {
		if (pid < 0 && errno != EINTR) {
			wstatus = 127 << 8;
			break;
		}
	}
	code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
	printf("guest-init: exit status %d\n", code);
	fflush(stdout);

	snprintf(path, sizeof(path), "%s/status", out);
	snprintf(status, sizeof(status), "%d\n", code);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, status, strlen(status)) < 0)
			perror("guest-init: write status");
		close(fd);
	}
	power_off();
	return 0;
}
