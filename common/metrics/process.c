/* The standard process_* metrics, read from /proc at each scrape. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"

static struct metric *cpu, *rss, *vsz, *fds, *max_fds, *start_time, *threads;

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the descriptor of the directory itself */
}

static void process_collect(void *ud)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	double tick = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
	struct rlimit rl;

	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = 0;
		fclose(f);
		/* fields after the command name, which may hold spaces: skip to the last ')' */
		char *p = strrchr(buf, ')');
		unsigned long utime, stime, vsize;
		long nthreads, rsspages;
		unsigned long long starttime;
		if (p && sscanf(p + 2,
				"%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d "
				"%ld %*d %llu %lu %ld",
				&utime, &stime, &nthreads, &starttime, &vsize, &rsspages) == 6) {
			metric_set(cpu, (double)(utime + stime) / tick);
			metric_set(rss, (double)rsspages * page);
			metric_set(vsz, (double)vsize);
			metric_set(threads, (double)nthreads);
			/* boot time + start ticks */
			FILE *s = fopen("/proc/stat", "re");
			char line[256];
			while (s && fgets(line, sizeof(line), s))
				if (strncmp(line, "btime ", 6) == 0) {
					double btime = 0;
					sscanf(line + 6, "%lf", &btime);
					metric_set(start_time, btime + (double)starttime / tick);
					break;
				}
			if (s)
				fclose(s);
		}
	}
	int n = count_fds();
	if (n >= 0)
		metric_set(fds, n);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		metric_set(max_fds, (double)rl.rlim_cur);
}

void metrics_register_process(void)
{
	cpu = metric_counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", NULL);
	rss = metric_gauge("process_resident_memory_bytes", "Resident memory size in bytes.", NULL);
	vsz = metric_gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", NULL);
	fds = metric_gauge("process_open_fds", "Number of open file descriptors.", NULL);
	max_fds = metric_gauge("process_max_fds", "Maximum number of open file descriptors.", NULL);
	start_time = metric_gauge("process_start_time_seconds",
				  "Start time of the process since unix epoch in seconds.", NULL);
	threads = metric_gauge("process_threads", "Number of OS threads in the process.", NULL);
	metrics_add_collector(process_collect, NULL);
}
