/*  spill_floor - what spooling a message costs at the least, on one CPU.

    The neighbour case (issue 12) asks a log consumer to keep 0.9x of its
    rate while another consumer spills with spool.fsync: always. With the
    hub pinned to one CPU, everything the spill adds shares that CPU with
    the log path, so the case leaves the spill some 11% of the log path's
    CPU per message. This program measures, on its own thread and with
    nothing else in the way (no hand-off, no second thread, no deferred
    completion, caches warm), the work no spill path can skip:

      io       pwrite of a pass of ready records, then fdatasync: the
               kernel's share
      append   fh_spool_append_batch of a pass (the hub's spool: encoding,
               CRC-32C, the same pwrite and fdatasync)
      spill    what spilling adds to a message: reading its frames, then
               append
      release  releasing the messages afterwards (their libzmq frames and
               memory): not added by spilling, as a message's last holder
               pays it anyway, but paid on the spool writer's thread when
               that holder is the writer

    Messages are made like the bench's: [topic, body of --size bytes,
    8-byte stamp], in libzmq frames of their own, made before each pass and
    outside the timing. One untimed pass goes first (the segment, the write
    buffer). Approximate in two ways: io is measured on a file of its own,
    a figure to compare with append, not a part of it, and without the
    kernel's work on other threads (interrupts, writeback); release frees
    plain messages, where the hub may also return them to its cache and
    let go of a deferred completion. The real writer also reads the wall
    clock's offset once a message, left out here.

    usage: spill_floor --dir DIR [--size N] [--topic T] [--pass N]
                       [--passes N]

    DIR is made when missing; a spool and a raw file are written in it
    (left for the caller to remove), and a spool already there is appended
    to. Prints one JSON line:
      {"pass":..,"passes":..,"record_bytes":..,"io_ns":..,"append_ns":..,
       "spill_ns":..,"release_ns":..}
    each an average of thread CPU time (CLOCK_THREAD_CPUTIME_ID) per message.
*/
#include "message.h"
#include "spool.h"
#include "spool_record.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define FRAMES 3

static int64_t
s_thread_cpu_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
s_usage (FILE *out)
{
    fprintf (out, "usage: spill_floor --dir DIR [--size N] [--topic T] [--pass N] "
                  "[--passes N]\n");
    return out == stdout ? 0 : 2;
}

/* A whole number >= min from an option, or -1. */
static long
s_number (const char *text, long min)
{
    char *end;
    errno = 0;
    long value = strtol (text, &end, 10);
    return errno || end == text || *end || value < min ? -1 : value;
}

/* A message as the hub holds one: its frames are libzmq's. */
static fh_msg_t *
s_message (const char *topic, size_t size, uint64_t seq)
{
    zmq_msg_t frames[FRAMES];
    size_t sizes[FRAMES] = {strlen (topic), size, 8};
    for (int i = 0; i < FRAMES; i++) {
        if (zmq_msg_init_size (&frames[i], sizes[i]) != 0) {
            while (i-- > 0)
                zmq_msg_close (&frames[i]);
            return NULL;
        }
        memset (zmq_msg_data (&frames[i]), 'm', sizes[i]);
    }
    memcpy (zmq_msg_data (&frames[0]), topic, sizes[0]);
    fh_msg_t *msg = fh_msg_new (frames, FRAMES, seq, 0);
    for (int i = 0; i < FRAMES; i++)
        zmq_msg_close (&frames[i]);
    if (msg)
        atomic_store (&msg->holders, 1);
    return msg;
}

/* The kernel's share: one pass of `bytes` ready bytes, written and synced. */
static int64_t
s_io_pass (int fd, const uint8_t *bytes, size_t size, off_t at)
{
    int64_t start = s_thread_cpu_ns ();
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite (fd, bytes + done, size - done, at + (off_t) done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC; /* as the spool reads a short write of 0 */
            return -1;
        }
        done += (size_t) n;
    }
    if (fdatasync (fd) != 0)
        return -1;
    return s_thread_cpu_ns () - start;
}

int
main (int argc, char **argv)
{
    const char *dir = NULL, *topic = "org.fanhub.bench.message";
    long size = 100, pass = 5000, passes = 40;
    static const struct option options[] = {{"dir", required_argument, NULL, 'd'},
                                            {"size", required_argument, NULL, 's'},
                                            {"topic", required_argument, NULL, 't'},
                                            {"pass", required_argument, NULL, 'p'},
                                            {"passes", required_argument, NULL, 'n'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long (argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 'd': dir = optarg; break;
        case 's': size = s_number (optarg, 0); break;
        case 't': topic = optarg; break;
        case 'p': pass = s_number (optarg, 1); break;
        case 'n': passes = s_number (optarg, 1); break;
        case 'h': return s_usage (stdout);
        default: return s_usage (stderr);
        }
    }
    if (!dir || size < 0 || pass < 1 || passes < 1 || optind != argc)
        return s_usage (stderr);
    if (mkdir (dir, 0750) != 0 && errno != EEXIST) {
        fprintf (stderr, "spill_floor: %s: %s\n", dir, strerror (errno));
        return 1;
    }

    fh_msg_t **batch = calloc ((size_t) pass, sizeof *batch);
    fh_spool_entry_t *entries = calloc ((size_t) pass, sizeof *entries);
    fanhub_bytes_t *frames = calloc ((size_t) pass * FRAMES, sizeof *frames);
    size_t record = FH_RECORD_HEADER + FH_RECORD_MESSAGE_FIXED + 4 * FRAMES + strlen (topic)
                    + (size_t) size + 8;
    uint8_t *ready = malloc ((size_t) pass * record);
    if (!batch || !entries || !frames || !ready) {
        fprintf (stderr, "spill_floor: out of memory\n");
        return 1;
    }
    memset (ready, 'r', (size_t) pass * record);

    char path[4096], err[1024];
    snprintf (path, sizeof path, "%s/raw", dir);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0) {
        fprintf (stderr, "spill_floor: %s: %s\n", path, strerror (errno));
        return 1;
    }
    snprintf (path, sizeof path, "%s/spool", dir);
    fh_spool_options_t spool_options = {.fsync = FH_SPOOL_FSYNC_ALWAYS};
    fh_spool_t *spool = fh_spool_open (path, &spool_options, NULL, err, sizeof err);
    if (!spool) {
        fprintf (stderr, "spill_floor: %s\n", err);
        return 1;
    }

    int64_t io_ns = 0, append_ns = 0, spill_ns = 0, release_ns = 0;
    uint64_t seq = 1;
    /* Pass 0 is the warm-up: not counted. */
    for (long p = 0; p <= passes; p++) {
        int64_t io
            = s_io_pass (fd, ready, (size_t) pass * record, (off_t) p * pass * (off_t) record);
        if (io < 0) {
            fprintf (stderr, "spill_floor: %s/raw: %s\n", dir, strerror (errno));
            return 1;
        }

        for (long i = 0; i < pass; i++)
            if (!(batch[i] = s_message (topic, (size_t) size, seq++))) {
                fprintf (stderr, "spill_floor: out of memory\n");
                return 1;
            }
        int64_t start = s_thread_cpu_ns ();
        for (long i = 0; i < pass; i++) {
            fanhub_bytes_t *mine = frames + i * FRAMES;
            for (int f = 0; f < FRAMES; f++)
                mine[f] = fh_msg_frame (batch[i], (size_t) f);
            entries[i]
                = (fh_spool_entry_t){.seq = batch[i]->seq, .frames = mine, .frame_count = FRAMES};
        }
        int64_t appending = s_thread_cpu_ns ();
        if (fh_spool_append_batch (spool, entries, (size_t) pass) != (size_t) pass) {
            for (long i = 0; i < pass; i++)
                if (entries[i].rc != 0) {
                    fprintf (stderr, "spill_floor: the spool refused record %ld: rc %d, %s\n", i,
                             entries[i].rc, strerror (entries[i].error));
                    break;
                }
            return 1;
        }
        int64_t appended = s_thread_cpu_ns ();
        for (long i = 0; i < pass; i++)
            fh_msg_release (batch[i], NULL);
        int64_t released = s_thread_cpu_ns ();
        if (p == 0)
            continue;
        io_ns += io;
        append_ns += appended - appending;
        spill_ns += appended - start;
        release_ns += released - appended;
    }
    double count = (double) pass * (double) passes;
    printf ("{\"pass\":%ld,\"passes\":%ld,\"record_bytes\":%zu,\"io_ns\":%.1f,"
            "\"append_ns\":%.1f,\"spill_ns\":%.1f,\"release_ns\":%.1f}\n",
            pass, passes, record, (double) io_ns / count, (double) append_ns / count,
            (double) spill_ns / count, (double) release_ns / count);
    fh_spool_close (&spool);
    close (fd);
    free (ready);
    free (frames);
    free (entries);
    free (batch);
    fh_msg_cache_drain ();
    return 0;
}
