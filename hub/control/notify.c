/*  notify - tells systemd how the hub is. See notify.h. */
#include "notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int
fh_notify (const char *fmt, ...)
{
    const char *path = getenv ("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    size_t len = strlen (path);
    if (len >= sizeof address.sun_path || (path[0] != '/' && path[0] != '@'))
        return -1;
    memcpy (address.sun_path, path, len);
    if (path[0] == '@')
        address.sun_path[0] = '\0'; /* the abstract namespace */
    char text[1024];
    va_list args;
    va_start (args, fmt);
    int size = vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    if (size < 0 || (size_t) size >= sizeof text)
        return -1;
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t sent = sendto (fd, text, (size_t) size, MSG_NOSIGNAL, (struct sockaddr *) &address,
                           (socklen_t) (offsetof (struct sockaddr_un, sun_path) + len));
    close (fd);
    return sent == size ? 0 : -1;
}

uint64_t
fh_notify_watchdog_usec (void)
{
    const char *usec = getenv ("WATCHDOG_USEC");
    const char *pid = getenv ("WATCHDOG_PID");
    if (!usec || (pid && strtol (pid, NULL, 10) != (long) getpid ()))
        return 0;
    return strtoull (usec, NULL, 10);
}
