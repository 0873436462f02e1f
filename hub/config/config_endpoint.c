/*  config_endpoint - the endpoint grammar of the configuration.

    ZeroMQ endpoints as bus.connect, bus.bind, bus.publish and
    metrics.moksha_socket accept them (fh_endpoint_check, config.h), and
    the stricter rule for the control endpoint: a local socket only.
*/
#include "config_internal.h"

#include "value.h"

#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#define S_IPC_PATH_MAX (sizeof (((struct sockaddr_un *) 0)->sun_path) - 1)

/* The reason for an endpoint refused with details; one per thread. */
static _Thread_local char s_reason[160];

const char *
fh_endpoint_tcp_split (const char *addr, const char **host, size_t *host_len, const char **port)
{
    if (*addr == '[') {
        const char *close = strchr (addr, ']');
        if (!close)
            return "missing ']' after the IPv6 address";
        *host = addr + 1;
        *host_len = (size_t) (close - addr - 1);
        if (*host_len == 0)
            return "empty IPv6 address in []";
        if (strcspn (*host, ":]") >= *host_len)
            return "expected an IPv6 address in [], e.g. tcp://[::1]:9940";
        if (close[1] != ':')
            return "expected ':PORT' after the IPv6 address";
        *port = close + 2;
        return NULL;
    }
    const char *colon = strrchr (addr, ':');
    if (!colon)
        return "expected tcp://HOST:PORT";
    *host = addr;
    *host_len = (size_t) (colon - addr);
    *port = colon + 1;
    if (*host_len == 0)
        return "empty host in tcp://HOST:PORT";
    if (memchr (addr, ':', *host_len))
        return "IPv6 addresses go in brackets, e.g. tcp://[::1]:9940";
    if (strcspn (addr, "/[]") < *host_len)
        return "invalid character in host";
    return NULL;
}

static const char *
s_tcp_check (const char *addr, bool for_bind)
{
    const char *host, *port;
    size_t host_len;
    const char *why = fh_endpoint_tcp_split (addr, &host, &host_len, &port);
    if (why)
        return why;
    if (host_len == 1 && *host == '*' && !for_bind)
        return "host '*' (every interface) is only for bind";
    if (strcmp (port, "*") == 0)
        return for_bind ? NULL : "port '*' (any free port) is only for bind";
    size_t digits = strspn (port, "0123456789");
    long long value;
    if (digits == 0 || digits > 5 || port[digits] || !fh_value_integer (port, true, &value)
        || value < 1 || value > 65535)
        return "expected a port from 1 to 65535";
    return NULL;
}

const char *
fh_endpoint_check (const char *endpoint, bool for_bind)
{
    if (!endpoint || !*endpoint)
        return "empty endpoint";
    for (const char *c = endpoint; *c; c++)
        if ((unsigned char) *c <= ' ' || *c == 0x7f)
            return "an endpoint cannot contain spaces or control characters";
    const char *sep = strstr (endpoint, "://");
    if (!sep)
        return "expected TRANSPORT://ADDRESS (tcp://HOST:PORT, ipc://PATH "
               "or inproc://NAME)";
    size_t transport = (size_t) (sep - endpoint);
    const char *addr = sep + 3;
    if (transport == 3 && strncmp (endpoint, "tcp", 3) == 0)
        return s_tcp_check (addr, for_bind);
    if (transport == 3 && strncmp (endpoint, "ipc", 3) == 0) {
        if (!*addr)
            return "expected ipc://PATH";
        if (strlen (addr) > S_IPC_PATH_MAX) {
            snprintf (s_reason, sizeof s_reason,
                      "ipc path is %zu bytes, more than the %zu a Unix "
                      "socket path allows",
                      strlen (addr), (size_t) S_IPC_PATH_MAX);
            return s_reason;
        }
        return NULL;
    }
    if (transport == 6 && strncmp (endpoint, "inproc", 6) == 0)
        return *addr ? NULL : "expected inproc://NAME";
    snprintf (s_reason, sizeof s_reason,
              "unsupported transport '%.*s' (use tcp://, ipc:// or inproc://)",
              (int) (transport < 32 ? transport : 32), endpoint);
    return s_reason;
}

/* 127.x.y.z, each part a decimal 0..255. */
static bool
s_is_ipv4_loopback (const char *host, size_t len)
{
    char buf[16];
    if (len >= sizeof buf)
        return false;
    memcpy (buf, host, len);
    buf[len] = '\0';
    unsigned parts[4];
    int used = 0;
    if (sscanf (buf, "%3u.%3u.%3u.%3u%n", &parts[0], &parts[1], &parts[2], &parts[3], &used) != 4
        || (size_t) used != len || strspn (buf, "0123456789.") != len)
        return false;
    return parts[0] == 127 && parts[1] < 256 && parts[2] < 256 && parts[3] < 256;
}

/* The control endpoint: ipc://PATH, or tcp://HOST:PORT (who may reach a
   tcp one: fh_cfg_control_on_loopback and control_curve, in config.c). */
const char *
fh_cfg_control_check (const char *endpoint)
{
    const char *why = fh_endpoint_check (endpoint, true);
    if (why)
        return why;
    if (strncmp (endpoint, "ipc://@", 7) == 0)
        return "an abstract socket (ipc://@NAME) has no owner or mode: any user "
               "could take it; use ipc://PATH";
    if (strncmp (endpoint, "ipc://", 6) == 0)
        return NULL;
    if (strncmp (endpoint, "tcp://", 6) != 0)
        return "the control socket is served on ipc://PATH or on tcp://HOST:PORT";
    const char *host, *port;
    size_t host_len;
    why = fh_endpoint_tcp_split (endpoint + 6, &host, &host_len, &port);
    if (why)
        return why; /* not reached: fh_endpoint_check split it already */
    if (host_len == 1 && *host == '*')
        return "the control endpoint needs an address clients can connect to "
               "(127.0.0.1; off loopback, with control_curve:, the interface's)";
    return NULL; /* a port '*' or 0: the hub logs the one it got ("control: serving") */
}

const char *
fh_config_control_check (const char *endpoint)
{
    if (!endpoint || (strncmp (endpoint, "ipc://", 6) != 0 && strncmp (endpoint, "tcp://", 6) != 0))
        return "expected ipc://PATH or tcp://HOST:PORT (a hub's control endpoint)";
    size_t len = strlen (endpoint);
    if (strncmp (endpoint, "tcp://", 6) == 0 && len > 2 && strcmp (endpoint + len - 2, ":*") == 0)
        return "a client needs the port the hub got: its log says \"control: serving\"";
    return fh_cfg_control_check (endpoint);
}

/* Whether a tcp:// control endpoint is on loopback (127.0.0.0/8,
   localhost, [::1]): only the local users reach it. */
bool
fh_cfg_control_on_loopback (const char *endpoint)
{
    const char *host, *port;
    size_t host_len;
    if (strncmp (endpoint, "tcp://", 6) != 0
        || fh_endpoint_tcp_split (endpoint + 6, &host, &host_len, &port) != NULL)
        return false;
    return (host_len == 9 && strncmp (host, "localhost", 9) == 0)
           || (host_len == 3 && strncmp (host, "::1", 3) == 0 && endpoint[6] == '[')
           || s_is_ipv4_loopback (host, host_len);
}
