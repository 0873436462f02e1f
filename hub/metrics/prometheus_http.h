/*  prometheus_http - serves GET /metrics over HTTP (libmicrohttpd).

    When metrics.prometheus.listen is set (HOST:PORT), a libmicrohttpd
    daemon on its own thread answers GET /metrics with the Prometheus text
    of a fresh snapshot (the same text as `fanhub stats --format
    prometheus`), made by the control thread and fetched from the hub's
    own control socket (METRICS), so that this thread never touches state
    owned by another one and parses nothing. Any other path is 404,
    any other method 405.
*/
#ifndef FH_PROMETHEUS_HTTP_H_INCLUDED
#define FH_PROMETHEUS_HTTP_H_INCLUDED

#include "config.h"

#include <stddef.h>

typedef struct fh_prometheus_http fh_prometheus_http_t;

/* NULL with err empty when metrics.prometheus.listen is not set; NULL with
   one line in err when it cannot listen. */
fh_prometheus_http_t *fh_prometheus_http_new (const fh_config_t *config, char *err, size_t errlen);
void fh_prometheus_http_destroy (fh_prometheus_http_t **self_p);

/* HOST:PORT as listening: with port 0 configured, the port chosen. */
const char *fh_prometheus_http_address (const fh_prometheus_http_t *self);
/* The control endpoint as bound (a tcp port '*' chosen at bind), for the
   requests from now on; only the first call counts. Safe with NULL. */
void fh_prometheus_http_set_control (fh_prometheus_http_t *self, const char *endpoint);

/* Connections refused so far because CONNECTION_LIMIT were open (every
   listener of the process). */
uint64_t fh_prometheus_http_refused (void);

#endif
