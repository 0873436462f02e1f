/*  status_page - the status page's HTML. See status_page.h.

    Each figure is an element with data-f="KEY" inside a row that names
    its consumer (data-consumer) or endpoint (data-endpoint); the script
    finds them by those names and writes what the server would, with
    formatting functions that mirror s_fmt_* below. */
#include "status_page.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S_CHART_W 160 /* the script's S_CHART_W_TEXT too */
#define S_CHART_H 32
#define S_CHART_W_TEXT "160"
#define S_CHART_SPAN_TEXT "900" /* seconds the chart's width stands for */
#define S_CHART_SPAN 900.0
#define S_CHART_H_TEXT "32"

static const char s_style[]
    = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}"
      "h1{font-size:1.4em;margin:0}h2{font-size:1.1em;margin:1.4em 0 .4em}"
      "table{border-collapse:collapse;background:#fff}"
      "th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right;white-space:nowrap}"
      "th{background:#eee}td:first-child,th:first-child{text-align:left}"
      ".state-running,.up{color:#176b2c}.state-spilling{color:#9a6700}"
      ".state-stuck,.state-down,.state-halted,.down{color:#b3261e;font-weight:bold}"
      ".reason{display:block;white-space:normal;max-width:22em;font-size:.85em;color:#b3261e}"
      ".reason:empty{display:none}.sub{margin-left:.5em;color:#666;font-size:.85em}"
      "svg{vertical-align:middle}polyline{fill:none;stroke:#1f5fbf;stroke-width:1.5}"
      "#meta span{margin-right:1.2em}ul{padding-left:1.2em}code{font-size:.95em}"
      ".warning{color:#9a6700}.error{color:#b3261e}#updated{color:#666;font-size:.9em}";

/* The script: fetches /status.json every 2 s and writes each figure as
   the server did. */
static const char s_script[]
    = "'use strict';\n"
      "function num(v){return v===null||v===undefined?'\\u2014':String(Math.round(v));}\n"
      "function rate(v){return (v||0).toFixed(1);}\n"
      "function secs(v){if(v===null||v===undefined)return '\\u2014';"
      "if(v<0.001)return (v*1e6).toFixed(0)+' \\u00b5s';if(v<1)return (v*1e3).toFixed(1)+' ms';"
      "if(v<120)return v.toFixed(1)+' s';if(v<7200)return (v/60).toFixed(0)+' min';"
      "return (v/3600).toFixed(1)+' h';}\n"
      "function bytes(v){if(v<1024)return v+' B';if(v<1048576)return (v/1024).toFixed(1)+' KiB';"
      "if(v<1073741824)return (v/1048576).toFixed(1)+' MiB';return (v/1073741824).toFixed(1)+' "
      "GiB';}\n"
      "function drain(c){if(c.backlog===0)return '\\u2014';"
      "return c.status.drain_seconds===null?'not draining':secs(c.status.drain_seconds);}\n"
      "function points(h,step){var m=Math.max.apply(null,h.concat([1]));var n=h.length;"
      "return h.map(function(v,i){return Math.max(0," S_CHART_W_TEXT
      "*(1-(n-1-i)*step/" S_CHART_SPAN_TEXT ")).toFixed(1)+','+"
      "(" S_CHART_H_TEXT "-1-(" S_CHART_H_TEXT "-2)*v/m).toFixed(1);}).join(' ');}\n"
      "function set(row,key,text){var e=row.querySelector('[data-f=\"'+key+'\"]');"
      "if(e&&e.textContent!==text)e.textContent=text;return e;}\n"
      "function consumer(row,c){var s=c.status;var e=set(row,'state',s.state);"
      "e.className='state-'+s.state;set(row,'reason',s.reason||'');"
      "set(row,'rate_in',rate(s.rate_in));"
      "set(row,'rate_out',rate(s.rate_out));set(row,'backlog',num(c.backlog));"
      "set(row,'on_disk',s.on_disk_percent===null?'\\u2014':s.on_disk_percent+' %');"
      "set(row,'spool_bytes',bytes(c.spool_bytes||0));set(row,'in_flight',num(c.in_flight));"
      "set(row,'retried',num(c.retried));set(row,'dead_lettered',num(c.dead_lettered));"
      "set(row,'queue_wait',secs(c.queue_wait&&c.queue_wait.p99));"
      "set(row,'processing',secs(c.processing&&c.processing.p99));set(row,'drain',drain(c));"
      "row.querySelector('polyline').setAttribute('points',"
      "points(s.history.backlog,s.history.step));}\n"
      "function endpoint(row,e,now){var c=set(row,'connected',e.connected?'connected':'not "
      "connected');"
      "c.className=e.connected?'up':'down';set(row,'since',secs(Math.max(0,now-e.since)));"
      "set(row,'last_error',e.last_error||'\\u2014');}\n"
      "function update(j){var now=j.hub.status.now;var rows=0;"
      "j.consumers.forEach(function(c){var r=document.querySelector("
      "'tr[data-consumer=\"'+CSS.escape(c.name)+'\"]');if(r){consumer(r,c);rows++;}});"
      "j.hub.endpoints.forEach(function(e){var r=document.querySelector("
      "'tr[data-endpoint=\"'+CSS.escape(e.endpoint)+'\"]');if(r)endpoint(r,e,now);});"
      "if(rows!==document.querySelectorAll('tr[data-consumer]').length||"
      "rows!==j.consumers.length){location.reload();return;}"
      "set(document,'uptime',secs(j.hub.uptime));"
      "var u=document.getElementById('updated');u.dataset.live='1';"
      "u.textContent='live: updated '+new Date().toISOString().slice(11,19)+' UTC, every 2 s';}\n"
      "function poll(){fetch('/status.json',{cache:'no-store'}).then(function(r){return r.json();})"
      ".then(update).catch(function(){document.getElementById('updated').textContent="
      "'live updates failed; retrying';}).finally(function(){setTimeout(poll,2000);});}\n"
      "poll();\n";

/* The same formatting as the script's. */
static void
s_fmt_secs (FILE *out, const json_t *value)
{
    double v = json_number_value (value);
    if (!json_is_number (value))
        fputs ("\u2014", out);
    else if (v < 0.001)
        fprintf (out, "%.0f \u00b5s", v * 1e6);
    else if (v < 1)
        fprintf (out, "%.1f ms", v * 1e3);
    else if (v < 120)
        fprintf (out, "%.1f s", v);
    else if (v < 7200)
        fprintf (out, "%.0f min", v / 60);
    else
        fprintf (out, "%.1f h", v / 3600);
}

static void
s_fmt_bytes (FILE *out, double v)
{
    if (v < 1024)
        fprintf (out, "%.0f B", v);
    else if (v < 1048576)
        fprintf (out, "%.1f KiB", v / 1024);
    else if (v < 1073741824)
        fprintf (out, "%.1f MiB", v / 1048576);
    else
        fprintf (out, "%.1f GiB", v / 1073741824);
}

/* Text into HTML (element content or a quoted attribute). */
static void
s_escape (FILE *out, const char *text)
{
    for (const char *p = text ? text : ""; *p; p++)
        switch (*p) {
        case '&': fputs ("&amp;", out); break;
        case '<': fputs ("&lt;", out); break;
        case '>': fputs ("&gt;", out); break;
        case '"': fputs ("&quot;", out); break;
        case '\'': fputs ("&#39;", out); break;
        default: fputc (*p, out);
        }
}

static double
s_num (const json_t *object, const char *key)
{
    return json_number_value (json_object_get (object, key));
}

static const char *
s_str (const json_t *object, const char *key)
{
    const char *text = json_string_value (json_object_get (object, key));
    return text ? text : "";
}

/* The backlog chart: an inline SVG polyline, the newest point at the
   right edge, the width 15 minutes. */
static void
s_chart (FILE *out, const json_t *chart)
{
    const json_t *history = json_object_get (chart, "backlog");
    double step = json_number_value (json_object_get (chart, "step"));
    size_t n = json_array_size (history);
    double max = 1;
    for (size_t i = 0; i < n; i++)
        max = fmax (max, json_number_value (json_array_get (history, i)));
    fprintf (out,
             "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
             "aria-label=\"backlog, last 15 minutes\"><rect width=\"100%%\" height=\"100%%\" "
             "fill=\"#eef2f8\"/><polyline points=\"",
             S_CHART_W, S_CHART_H, S_CHART_W, S_CHART_H);
    for (size_t i = 0; i < n; i++) {
        double v = json_number_value (json_array_get (history, i));
        fprintf (out, "%s%.1f,%.1f", i ? " " : "",
                 fmax (0, S_CHART_W * (1 - (double) (n - 1 - i) * step / S_CHART_SPAN)),
                 S_CHART_H - 1 - (S_CHART_H - 2) * v / max);
    }
    fputs ("\"/></svg>", out);
}

static void
s_consumer_row (FILE *out, const json_t *c)
{
    const json_t *status = json_object_get (c, "status");
    const char *state = s_str (status, "state");
    fputs ("<tr data-consumer=\"", out);
    s_escape (out, s_str (c, "name"));
    fputs ("\"><td>", out);
    s_escape (out, s_str (c, "name"));
    /* The reason (a down or halted plugin's last error) under the state,
       so that it reads without the script too. */
    fprintf (out, "</td><td><span data-f=\"state\" class=\"state-%s\">%s</span>", state, state);
    fputs ("<span data-f=\"reason\" class=\"reason\">", out);
    s_escape (out, s_str (status, "reason"));
    fputs ("</span></td>", out);
    fprintf (out, "<td data-f=\"rate_in\">%.1f</td><td data-f=\"rate_out\">%.1f</td>",
             s_num (status, "rate_in"), s_num (status, "rate_out"));
    fprintf (out, "<td data-f=\"backlog\">%.0f</td><td>", s_num (c, "backlog"));
    s_chart (out, json_object_get (status, "history"));
    /* On disk: the backlog's share (messages), its bytes beside it. */
    fputs ("</td><td><span data-f=\"on_disk\">", out);
    const json_t *share = json_object_get (status, "on_disk_percent");
    if (json_is_integer (share))
        fprintf (out, "%lld %%", (long long) json_integer_value (share));
    else
        fputs ("\u2014", out);
    fputs ("</span><span data-f=\"spool_bytes\" class=\"sub\">", out);
    s_fmt_bytes (out, s_num (c, "spool_bytes"));
    fprintf (out,
             "</span></td><td data-f=\"in_flight\">%.0f</td><td data-f=\"retried\">%.0f</td>"
             "<td data-f=\"dead_lettered\">%.0f</td><td data-f=\"queue_wait\">",
             s_num (c, "in_flight"), s_num (c, "retried"), s_num (c, "dead_lettered"));
    s_fmt_secs (out, json_object_get (json_object_get (c, "queue_wait"), "p99"));
    fputs ("</td><td data-f=\"processing\">", out);
    s_fmt_secs (out, json_object_get (json_object_get (c, "processing"), "p99"));
    fputs ("</td><td data-f=\"drain\">", out);
    const json_t *drain = json_object_get (status, "drain_seconds");
    if (s_num (c, "backlog") == 0)
        fputs ("\u2014", out);
    else if (json_is_null (drain))
        fputs ("not draining", out);
    else
        s_fmt_secs (out, drain);
    fputs ("</td></tr>\n", out);
}

static void
s_endpoint_row (FILE *out, const json_t *e, double now_s)
{
    bool up = json_is_true (json_object_get (e, "connected"));
    fputs ("<tr data-endpoint=\"", out);
    s_escape (out, s_str (e, "endpoint"));
    fputs ("\"><td>", out);
    s_escape (out, s_str (e, "endpoint"));
    fprintf (out, "</td><td>%s</td><td data-f=\"connected\" class=\"%s\">%s</td>",
             s_str (e, "kind"), up ? "up" : "down", up ? "connected" : "not connected");
    fputs ("<td data-f=\"since\">", out);
    json_t *ago = json_real (fmax (0, now_s - s_num (e, "since")));
    s_fmt_secs (out, ago);
    json_decref (ago);
    fputs ("</td><td data-f=\"last_error\">", out);
    const char *error = s_str (e, "last_error");
    s_escape (out, *error ? error : "\u2014");
    fputs ("</td></tr>\n", out);
}

/* The head of the page and the hub's line. */
static void
s_header (FILE *out, const json_t *hub)
{
    const json_t *status = json_object_get (hub, "status");
    const char *name = s_str (hub, "name");
    fputs ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           "<meta name=\"viewport\" content=\"width=device-width\"><title>fanhub",
           out);
    fputs (*name ? " " : "", out);
    s_escape (out, name);
    fprintf (out, "</title><style>%s</style></head>\n<body>\n<h1>fanhub", s_style);
    fputs (*name ? " " : "", out);
    s_escape (out, name);
    fputs ("</h1>\n<p id=\"meta\"><span>version ", out);
    s_escape (out, s_str (hub, "version"));
    fprintf (out, "</span><span>pid %.0f</span><span>uptime <b data-f=\"uptime\">",
             s_num (hub, "pid"));
    s_fmt_secs (out, json_object_get (hub, "uptime"));
    fputs ("</b></span><span>config <code>", out);
    s_escape (out, s_str (status, "config_file"));
    fputs ("</code></span><span>last reload: ", out);
    const char *reload = s_str (status, "last_reload");
    time_t when = (time_t) s_num (status, "last_reload_time");
    struct tm tm;
    char stamp[40] = "";
    if (*reload && when > 0 && gmtime_r (&when, &tm))
        strftime (stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC: ", &tm);
    fputs (stamp, out);
    s_escape (out, *reload ? reload : "none since start");
    fputs ("</span></p>\n", out);
}

static void
s_tables (FILE *out, const json_t *status, double now_s)
{
    const json_t *consumers = json_object_get (status, "consumers");
    fputs ("<h2>Consumers</h2>\n<table id=\"consumers\"><thead><tr><th>consumer</th>"
           "<th>state</th><th>in/s</th><th>out/s</th><th>backlog</th><th>backlog, 15 min</th>"
           "<th>on disk, % of backlog</th><th>in "
           "flight</th><th>retried</th><th>dead-lettered</th>"
           "<th>p99 wait</th><th>p99 processing</th><th>time to drain</th></tr></thead>"
           "<tbody>\n",
           out);
    for (size_t i = 0; i < json_array_size (consumers); i++)
        s_consumer_row (out, json_array_get (consumers, i));
    fputs ("</tbody></table>\n<h2>Bus endpoints</h2>\n<table id=\"endpoints\"><thead><tr>"
           "<th>endpoint</th><th>kind</th><th>state</th><th>for</th><th>last error</th></tr>"
           "</thead><tbody>\n",
           out);
    const json_t *endpoints = json_object_get (json_object_get (status, "hub"), "endpoints");
    for (size_t i = 0; i < json_array_size (endpoints); i++)
        s_endpoint_row (out, json_array_get (endpoints, i), now_s);
    fputs ("</tbody></table>\n", out);
}

static void
s_warnings (FILE *out, const json_t *hub)
{
    const json_t *warnings = json_object_get (json_object_get (hub, "status"), "recent_warnings");
    fputs ("<h2>Recent warnings</h2>\n<ul id=\"warnings\">", out);
    if (json_array_size (warnings) == 0)
        fputs ("<li>none since start</li>", out);
    for (size_t i = json_array_size (warnings); i > 0; i--) {
        const json_t *w = json_array_get (warnings, i - 1);
        time_t when = (time_t) s_num (w, "time");
        struct tm tm;
        char stamp[32] = "";
        if (gmtime_r (&when, &tm))
            strftime (stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
        fprintf (out, "<li class=\"%s\">%s ", s_str (w, "level"), stamp);
        s_escape (out, s_str (w, "text"));
        fputs ("</li>", out);
    }
    fputs ("</ul>\n", out);
}

char *
fh_status_page_html (const json_t *status)
{
    /* "for": from the answer's own time, as the script does. */
    double now_s = s_num (json_object_get (json_object_get (status, "hub"), "status"), "now");
    char *page = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&page, &size);
    if (!out)
        return NULL;
    const json_t *hub = json_object_get (status, "hub");
    s_header (out, hub);
    s_tables (out, status, now_s);
    s_warnings (out, hub);
    fprintf (out,
             "<p id=\"updated\">Rendered by the hub; with JavaScript it updates itself every "
             "2 s from <a href=\"/status.json\">/status.json</a>. The chart holds a point "
             "every 10 s. <a href=\"/metrics\">/metrics</a> <a href=\"/healthz\">/healthz</a> "
             "<a href=\"/readyz\">/readyz</a></p>\n<script>%s</script>\n</body></html>\n",
             s_script);
    if (fclose (out) != 0) {
        free (page);
        return NULL;
    }
    return page;
}
