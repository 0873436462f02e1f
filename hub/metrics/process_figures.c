/*  process_figures - the process_* metrics. See process_figures.h. */
#include "process_figures.h"

#include "fs.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Seconds since the epoch at which this process started, or 0. */
static double
s_read_start_time (void)
{
    double boot = 0;
    FILE *file = fopen ("/proc/stat", "r");
    if (file) {
        char line[256];
        while (fgets (line, sizeof line, file))
            if (sscanf (line, "btime %lf", &boot) == 1)
                break;
        fclose (file);
    }
    char err[256];
    char *text = fh_fs_read_file ("/proc/self/stat", 65536, NULL, err, sizeof err);
    if (!text)
        return 0;
    /* The command name may hold spaces and parentheses: count from the last ')'. */
    const char *field = strrchr (text, ')');
    /* After ')' come the state (field 3) and so on; starttime is field 22. */
    for (int skip = 0; skip < 20 && field; skip++)
        field = strchr (field + 1, ' ');
    unsigned long long ticks = field ? strtoull (field + 1, NULL, 10) : 0;
    free (text);
    if (!field)
        return 0;
    long hz = sysconf (_SC_CLK_TCK);
    return boot > 0 && hz > 0 ? boot + (double) ticks / (double) hz : 0;
}

/* The start time does not change: read once per process. */
static pthread_once_t s_start_once = PTHREAD_ONCE_INIT;
static double s_start;

static void
s_start_init (void)
{
    s_start = s_read_start_time ();
}

static int64_t
s_open_fds (void)
{
    DIR *dir = opendir ("/proc/self/fd");
    if (!dir)
        return 0;
    int64_t count = 0;
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (entry->d_name[0] != '.')
            count++;
    closedir (dir);
    return count > 0 ? count - 1 : 0; /* not the one opendir holds */
}

void
fh_process_read (fh_process_t *out)
{
    *out = (fh_process_t){0};
    pthread_once (&s_start_once, s_start_init);
    out->start_time = s_start;
    struct rusage usage;
    if (getrusage (RUSAGE_SELF, &usage) == 0)
        out->cpu = (double) (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                   + (double) (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    FILE *file = fopen ("/proc/self/statm", "r");
    unsigned long long pages = 0, resident = 0;
    if (file) {
        if (fscanf (file, "%llu %llu", &pages, &resident) != 2)
            pages = resident = 0;
        fclose (file);
    }
    long page = sysconf (_SC_PAGESIZE);
    if (page > 0) {
        out->virtual_bytes = (int64_t) (pages * (unsigned long long) page);
        out->resident_bytes = (int64_t) (resident * (unsigned long long) page);
    }
    out->open_fds = s_open_fds ();
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        out->max_fds = (int64_t) limit.rlim_cur;
}

void
fh_process_figures (fh_metrics_item_t *item, const fh_process_t *reading)
{
    fh_metrics_set_real (item, FH_M_PROCESS_START_TIME, reading->start_time);
    fh_metrics_set_real (item, FH_M_PROCESS_CPU, reading->cpu);
    fh_metrics_set_int (item, FH_M_PROCESS_VIRTUAL, reading->virtual_bytes);
    fh_metrics_set_int (item, FH_M_PROCESS_RESIDENT, reading->resident_bytes);
    fh_metrics_set_int (item, FH_M_PROCESS_OPEN_FDS, reading->open_fds);
    if (reading->max_fds > 0)
        fh_metrics_set_int (item, FH_M_PROCESS_MAX_FDS, reading->max_fds);
}
