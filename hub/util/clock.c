/*  clock - the wall-clock offset of monotonic time, taken once, and
    RFC 3339 times read. */
#include "clock.h"

#include <pthread.h>
#include <string.h>

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static int64_t s_offset_ns;

static void
s_measure (void)
{
    struct timespec wall;
    int64_t mono = fh_clock_mono_ns ();
    clock_gettime (CLOCK_REALTIME, &wall);
    s_offset_ns = (int64_t) wall.tv_sec * 1000000000 + wall.tv_nsec - mono;
}

int64_t
fh_clock_wall_offset_ns (void)
{
    pthread_once (&s_once, s_measure);
    return s_offset_ns;
}

static int64_t
s_real_now (void *arg)
{
    (void) arg;
    return fh_clock_mono_ns ();
}

static bool
s_real_sleep_until (void *arg, int64_t deadline_ns, atomic_bool *abort)
{
    (void) arg;
    const int64_t slice_ns = 50 * INT64_C (1000000);
    while (!atomic_load (abort)) {
        int64_t left = deadline_ns - fh_clock_mono_ns ();
        if (left <= 0)
            return true;
        if (left > slice_ns)
            left = slice_ns;
        struct timespec ts = {(time_t) (left / 1000000000), (long) (left % 1000000000)};
        nanosleep (&ts, NULL);
    }
    return false;
}

const fh_clock_ops_t fh_clock_real = {s_real_now, s_real_sleep_until, NULL};

static int
s_digits (const char *s, int count)
{
    int value = 0;
    for (int i = 0; i < count; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        value = value * 10 + (s[i] - '0');
    }
    return value;
}

/* Days from 1970-01-01 to the given civil date (proleptic Gregorian):
   Howard Hinnant's days_from_civil, exact without time zones or time_t. */
static int64_t
s_days_from_civil (int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

bool
fh_clock_parse_rfc3339 (const char *text, int64_t *ns_out)
{
    int year = s_digits (text, 4), month = -1, day = -1, hour = -1, minute = -1, second = -1;
    if (year >= 0 && text[4] == '-' && (month = s_digits (text + 5, 2)) >= 0 && text[7] == '-'
        && (day = s_digits (text + 8, 2)) >= 0
        && (text[10] == 'T' || text[10] == 't' || text[10] == ' ')
        && (hour = s_digits (text + 11, 2)) >= 0 && text[13] == ':'
        && (minute = s_digits (text + 14, 2)) >= 0 && text[16] == ':')
        second = s_digits (text + 17, 2);
    static const int month_days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (second < 0 || month < 1 || month > 12 || day < 1 || day > month_days[month - 1] || hour > 23
        || minute > 59 || second > 60)
        return false;
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (month == 2 && day == 29 && !leap)
        return false;
    const char *p = text + 19;
    int64_t frac = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 9)
                frac = frac * 10 + (*p - '0');
        if (digits == 0)
            return false;
        for (; digits < 9; digits++)
            frac *= 10;
    }
    int offset_s = 0;
    size_t rest = strlen (p);
    if ((*p == 'Z' || *p == 'z') && rest == 1)
        offset_s = 0;
    else if ((*p == '+' || *p == '-') && rest == 6 && p[3] == ':') {
        int oh = s_digits (p + 1, 2), om = s_digits (p + 4, 2);
        if (oh < 0 || oh > 23 || om < 0 || om > 59)
            return false;
        offset_s = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
    }
    else
        return false;
    int64_t secs = s_days_from_civil (year, month, day) * 86400 + hour * 3600 + minute * 60 + second
                   - offset_s;
    /* INT64_MAX nanoseconds is 2262-04-11; keep a margin either side. */
    if (secs < INT64_C (-9223372035) || secs > INT64_C (9223372035))
        return false;
    *ns_out = secs * 1000000000 + frac;
    return true;
}
