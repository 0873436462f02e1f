/*  status_page - the live status page at / of the HTTP listener.

    One self-contained HTML page (inline CSS, inline SVG charts, inline
    script; no external asset), rendered on the server from the STATUS
    answer (status.h), so every figure reads without JavaScript. With
    JavaScript the page fetches /status.json (the same answer) every 2 s
    and rewrites the figures and charts in place with the same formatting.
    docs/status-page.md shows it.
*/
#ifndef FH_STATUS_PAGE_H_INCLUDED
#define FH_STATUS_PAGE_H_INCLUDED

#include <jansson.h>

/* The page for one STATUS answer (parsed); the caller's to free, NULL
   when out of memory. */
char *fh_status_page_html (const json_t *status);

#endif
