/* process.c - slotd_build_info and the process_* / data-directory metrics read at scrape time. */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "metrics_internal.h"

#ifndef SLOTD_GIT_COMMIT
#define SLOTD_GIT_COMMIT "unknown"
#endif

const char metrics_build_commit[] = SLOTD_GIT_COMMIT;

int metrics_build_info_register(struct metrics_registry *r, const char *version, const char *commit)
{
    const char *names[] = {"version", "commit"};
    const char *values[] = {version, commit};
    struct metrics_family *f = NULL;
    int rc = metrics_gauge_family_new(
        r, "slotd_build_info",
        "Always 1; the labels name the version (git describe) and commit slotd was built from.", 2,
        names, &f);
    if (rc != METRICS_OK)
        return rc;
    struct metrics_gauge *g = metrics_gauge_get(f, values);
    if (g == NULL)
        return METRICS_EINVALID;
    metrics_gauge_set(g, 1);
    return METRICS_OK;
}

int metrics_process_enable(struct metrics_registry *r, const char *data_dir)
{
    if (data_dir != NULL && strlen(data_dir) >= sizeof(r->data_dir))
        return METRICS_EINVALID;
    pthread_mutex_lock(&r->mu);
    r->process = true;
    snprintf(r->data_dir, sizeof(r->data_dir), "%s", data_dir != NULL ? data_dir : "");
    pthread_mutex_unlock(&r->mu);
    return METRICS_OK;
}

/* Reads a small /proc file into buf (NUL-terminated). Returns bytes read, -1 on error. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t got = fread(buf, 1, n - 1, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed)
        return -1;
    buf[got] = '\0';
    return (ssize_t)got;
}

/* The system's boot time (seconds since the epoch) from /proc/stat's "btime" line, or -1. */
static long long boot_time_s(void)
{
    char buf[16384];
    if (read_small("/proc/stat", buf, sizeof(buf)) < 0)
        return -1;
    const char *p = strstr(buf, "\nbtime ");
    return p != NULL ? strtoll(p + 7, NULL, 10) : -1;
}

/* Entries in /proc/self/fd other than the directory's own descriptor, or -1. */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] != '.')
            n++;
    }
    closedir(d);
    return n - 1; /* the descriptor opendir holds */
}

static void put_sample(FILE *f, const char *name, const char *type, const char *help, double v)
{
    char num[40];
    metrics__format_double(v, num, sizeof(num));
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, type, name, num);
}

/* Fields 14 (utime), 15 (stime), 22 (starttime) and 24 (rss) of /proc/self/stat. The second
 * field (comm) may hold spaces and parentheses, so fields are counted from the last ')'. */
struct proc_stat {
    unsigned long long utime, stime, starttime;
    long long rss_pages;
};

static int read_proc_stat(struct proc_stat *out)
{
    char buf[4096];
    if (read_small("/proc/self/stat", buf, sizeof(buf)) < 0)
        return -1;
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    p++;
    /* After ')': field 3 is the state. Walk to field 14. */
    int field = 2;
    char *save = NULL;
    bool got_start = false, got_rss = false;
    for (char *tok = strtok_r(p, " ", &save); tok != NULL && field < 24;
         tok = strtok_r(NULL, " ", &save)) {
        field++;
        if (field == 14)
            out->utime = strtoull(tok, NULL, 10);
        else if (field == 15)
            out->stime = strtoull(tok, NULL, 10);
        else if (field == 22) {
            out->starttime = strtoull(tok, NULL, 10);
            got_start = true;
        } else if (field == 24) {
            out->rss_pages = strtoll(tok, NULL, 10);
            got_rss = true;
        }
    }
    return got_start && got_rss ? 0 : -1;
}

/* The LevelDB databases store/ keeps in the data directory (store/store.c's db_names). */
static const char *const store_dbs[] = {"fsm", "raftlog"};
#define STORE_DB_FILES_MAX 100000 /* files counted per database at one scrape */

/* Bytes of the regular files in directory data_dir/db (not recursive: LevelDB keeps a flat
 * directory), or -1 when it cannot be read or holds more than STORE_DB_FILES_MAX entries. */
static long long store_db_bytes(const char *data_dir, const char *db)
{
    char path[METRICS_DATA_DIR_MAX + 16];
    snprintf(path, sizeof(path), "%s/%s", data_dir, db);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    long long bytes = 0;
    long n = 0;
    struct stat st;
    for (struct dirent *e; (e = readdir(d)) != NULL && bytes >= 0;) {
        if (++n > STORE_DB_FILES_MAX)
            bytes = -1;
        else if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            bytes += (long long)st.st_size;
    }
    closedir(d);
    return bytes;
}

static void store_bytes_render(FILE *f, const char *data_dir)
{
    bool head = false;
    for (size_t i = 0; data_dir[0] != '\0' && i < sizeof(store_dbs) / sizeof(store_dbs[0]); i++) {
        long long bytes = store_db_bytes(data_dir, store_dbs[i]);
        if (bytes < 0)
            continue;
        if (!head)
            fputs("# HELP slotd_store_bytes Bytes of the files of each LevelDB database in the "
                  "data directory (db=\"fsm\": the slot groups' rows; db=\"raftlog\": their raft "
                  "logs).\n# TYPE slotd_store_bytes gauge\n",
                  f);
        head = true;
        fprintf(f, "slotd_store_bytes{db=\"%s\"} %lld\n", store_dbs[i], bytes);
    }
}

/* Called by metrics_registry_render with r->mu held. A value that cannot be read is left out
 * (its family too), so a scrape never reports a made-up number. */
void metrics__process_render(FILE *f, const struct metrics_registry *r)
{
    long ticks = sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    struct proc_stat st;
    if (ticks > 0 && page > 0 && read_proc_stat(&st) == 0) {
        put_sample(f, "process_cpu_seconds_total", "counter",
                   "Total user and system CPU time spent in seconds.",
                   (double)(st.utime + st.stime) / (double)ticks);
        put_sample(f, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                   (double)st.rss_pages * (double)page);
        long long btime = boot_time_s();
        if (btime >= 0)
            put_sample(f, "process_start_time_seconds", "gauge",
                       "Start time of the process since unix epoch in seconds.",
                       (double)btime + (double)st.starttime / (double)ticks);
    }
    long fds = open_fds();
    if (fds >= 0)
        put_sample(f, "process_open_fds", "gauge", "Number of open file descriptors.", (double)fds);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        put_sample(f, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
                   (double)rl.rlim_cur);
    struct statvfs vfs;
    if (r->data_dir[0] != '\0' && statvfs(r->data_dir, &vfs) == 0) {
        put_sample(f, "slotd_data_dir_available_bytes", "gauge",
                   "Bytes an unprivileged process may still write on the data directory's "
                   "filesystem.",
                   (double)vfs.f_bavail * (double)vfs.f_frsize);
        put_sample(f, "slotd_data_dir_size_bytes", "gauge",
                   "Size of the data directory's filesystem in bytes.",
                   (double)vfs.f_blocks * (double)vfs.f_frsize);
    }
    store_bytes_render(f, r->data_dir);
}
