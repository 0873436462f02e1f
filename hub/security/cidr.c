/*  cidr - IP networks for allow lists. See cidr.h. */
#include "cidr.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Whether the first `prefix` bits of a and b are the same. */
static bool
s_prefix_equal (const unsigned char *a, const unsigned char *b, int prefix)
{
    int whole = prefix / 8, rest = prefix % 8;
    if (memcmp (a, b, (size_t) whole) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char) (0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

int
fh_cidr_parse (const char *text, fh_cidr_t *out, const char **why)
{
    char address[64];
    const char *slash = strchr (text, '/');
    size_t len = slash ? (size_t) (slash - text) : strlen (text);
    if (len == 0 || len >= sizeof address) {
        *why = "not an IP address";
        return -1;
    }
    memcpy (address, text, len);
    address[len] = '\0';
    memset (out, 0, sizeof *out);
    if (inet_pton (AF_INET, address, out->bytes) == 1)
        out->family = AF_INET;
    else if (inet_pton (AF_INET6, address, out->bytes) == 1)
        out->family = AF_INET6;
    else {
        *why = "not an IP address";
        return -1;
    }
    int bits = out->family == AF_INET ? 32 : 128;
    out->prefix = bits;
    if (slash) {
        const char *digits = slash + 1;
        size_t n = strspn (digits, "0123456789");
        if (n == 0 || n > 3 || digits[n] != '\0') {
            *why = "the prefix length after '/' is not a number";
            return -1;
        }
        out->prefix = atoi (digits);
        if (out->prefix > bits) {
            *why = out->family == AF_INET ? "the prefix length of an IPv4 network is 0 to 32"
                                          : "the prefix length of an IPv6 network is 0 to 128";
            return -1;
        }
    }
    unsigned char host[16];
    memcpy (host, out->bytes, sizeof host);
    for (int bit = out->prefix; bit < bits; bit++)
        host[bit / 8] &= (unsigned char) ~(0x80 >> (bit % 8));
    if (memcmp (host, out->bytes, (size_t) bits / 8) != 0) {
        *why = "bits are set past the prefix length (write the network's first address, "
               "as in 10.0.0.0/8)";
        return -1;
    }
    return 0;
}

bool
fh_cidr_match (const fh_cidr_t *net, const char *address)
{
    unsigned char bytes[16];
    if (inet_pton (AF_INET, address, bytes) == 1)
        return net->family == AF_INET && s_prefix_equal (bytes, net->bytes, net->prefix);
    if (inet_pton (AF_INET6, address, bytes) != 1)
        return false;
    if (net->family == AF_INET6)
        return s_prefix_equal (bytes, net->bytes, net->prefix);
    /* An IPv4 peer on a dual-stack socket: ::ffff:a.b.c.d. */
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp (bytes, mapped, sizeof mapped) == 0
           && s_prefix_equal (bytes + 12, net->bytes, net->prefix);
}
