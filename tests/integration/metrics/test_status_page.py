"""The live status page at / of the HTTP listener (issue 26), in a real
headless browser (Debian's chromium) against a real hub that has a
backlog, a spilling consumer, a halted one (a Python worker raised
HaltConsumer: its state and reason shown) and one bus endpoint down.

The figures are made still first (the publisher stops, the consumers'
plugins never return), so STATS taken before and after the browser reads
the page is one moment: each consumer's backlog and each endpoint's state
in the DOM, after the page's script has fetched /status.json and
rewritten them, must be STATS's. The page fetched without JavaScript
(urllib) shows the same figures. The browser's screenshot is saved
(FANHUB_STATUS_SCREENSHOT, e.g. docs/status-page.png)."""
import html.parser
import json
import os
import shutil
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


class Figures(html.parser.HTMLParser):
    """The figures of a status page: {consumer: {key: text}},
    {endpoint: {key: text}}, and whether the script marked it live."""

    def __init__(self, text):
        super().__init__()
        self.consumers, self.endpoints, self.live = {}, {}, False
        self.row = self.key = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-consumer" in a:
            self.row = self.consumers.setdefault(a["data-consumer"], {})
        elif tag == "tr" and "data-endpoint" in a:
            self.row = self.endpoints.setdefault(a["data-endpoint"], {})
        elif "data-f" in a and self.row is not None:
            self.key = a["data-f"]
            self.row[self.key] = ""
        if a.get("id") == "updated" and a.get("data-live") == "1":
            self.live = True

    def handle_endtag(self, tag):
        if tag == "tr":
            self.row = None
        if tag == "td":
            self.key = None

    def handle_data(self, data):
        if self.row is not None and self.key:
            self.row[self.key] += data


def chromium(*args):
    browser = fh.require_tool(shutil.which("chromium"), "chromium", "chromium")
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--virtual-time-budget=10000"] + list(args),
                          capture_output=True, text=True, timeout=fh.DEADLINE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def hang_consumer(name, queue):
    return ("  - name: %s\n    plugin: %s\n    queue: %s\n    options: {consume_ms: forever}\n"
            % (name, os.path.join(fh.TEST_PLUGINS, "hang.so"), queue))


def on_disk(c):
    """The backlog's share on disk (in messages) as the page shows it."""
    if not c["backlog"]:
        return "\u2014"
    return "%d %%" % ((min(c["spool_messages"], c["backlog"]) * 200 + c["backlog"])
                      // (2 * c["backlog"]))


def figures_of(stats):
    consumers = {c["name"]: (str(c["backlog"]), on_disk(c)) for c in stats["consumers"]}
    endpoints = {e["endpoint"]: "connected" if e["connected"] else "not connected"
                 for e in stats["hub"]["endpoints"]}
    return consumers, endpoints


def test_page_in_a_browser_matches_stats():
    wd = fh.Workdir()
    pub = fh.Publisher()
    down = "tcp://127.0.0.1:%d" % fh.free_port()
    listen = "127.0.0.1:%d" % fh.free_port()
    halter = fh.PythonConsumer(wd, "halter", topics="[org.test.halt]")
    config = ("name: bus-a\nbus:\n  connect: [%s, %s]\n  connect_warning: 0.5\n"
              "state_dir: %s\nmetrics:\n  prometheus:\n    listen: \"%s\"\nconsumers:\n"
              "  - {name: fast, plugin: \"null\"}\n%s%s%s"
              % (pub.endpoint, down, json.dumps(wd.file("state")), listen,
                 hang_consumer("archive", "{capacity: 1000, overflow: drop-newest}"),
                 hang_consumer("spiller", "{capacity: 20, overflow: spill}"), halter.yaml()))
    hub = fh.Hub(wd, config, env=halter.env())
    base = "http://" + listen
    try:
        pub.wait_subscribed(hub=hub)
        n = 300  # the first halts "halter"; every consumer but it takes all
        pub.send("org.test.halt", '{"halt": true}')
        for i in range(n - 1):
            pub.send("org.fedoraproject.prod.buildsys.build.state.change", '{"i": %d}' % i)

        def still():
            s = hub.stats()
            spiller = hub.consumer(s, "spiller")
            return (hub.consumer(s, "fast")["completed"] == n
                    and hub.consumer(s, "archive")["enqueued"] == n
                    and spiller["enqueued"] == n and spiller["spool_handoff"] == 0
                    and spiller["spool_bytes"] > 0 and hub.consumer(s, "halter")["state"] == 2
                    and any(e["last_error"] for e in s["hub"]["endpoints"]))
        fh.wait_for(still, "the figures to settle", hub=hub)
        hub.wait_log("bus: %s has not connected for" % down)

        before = figures_of(hub.stats())
        dom = Figures(chromium("--user-data-dir=" + wd.file("chromium"), "--dump-dom", base + "/"))
        after = figures_of(hub.stats())
        assert before == after, (before, after)
        consumers, endpoints = before
        assert dom.live, "the page's script did not run"
        assert {k: (v["backlog"], v["on_disk"]) for k, v in dom.consumers.items()} == consumers, \
            dom.consumers
        assert {k: v["connected"] for k, v in dom.endpoints.items()} == endpoints, dom.endpoints
        assert consumers["archive"] == (str(n - 1), "0 %"), consumers
        assert consumers["fast"] == ("0", "\u2014"), consumers
        # The spiller holds at most 20 in memory (its capacity), the rest
        # of its backlog on disk.
        assert consumers["spiller"][0] == str(n - 1), consumers
        assert 100 * (n - 21) // (n - 1) <= int(consumers["spiller"][1].split()[0]) < 100, \
            consumers
        assert dom.consumers["spiller"]["state"] == "spilling", dom.consumers["spiller"]
        assert dom.consumers["fast"]["state"] == "running"
        assert dom.consumers["fast"]["reason"] == ""
        halted = {"state": "halted", "reason": "halted by worker 0: asked to halt"}
        assert {k: dom.consumers["halter"][k] for k in halted} == halted, dom.consumers["halter"]
        assert endpoints[down] == "not connected" and endpoints[pub.endpoint] == "connected"
        assert dom.endpoints[down]["last_error"] == "connection refused or unreachable"

        # Without JavaScript: the server's HTML has the same figures.
        with urllib.request.urlopen(base + "/", timeout=30) as r:
            assert r.headers["Content-Type"].startswith("text/html")
            page = r.read().decode()
        plain = Figures(page)
        assert {k: (v["backlog"], v["on_disk"]) for k, v in plain.consumers.items()} == consumers
        assert {k: v["connected"] for k, v in plain.endpoints.items()} == endpoints
        assert {k: plain.consumers["halter"][k] for k in halted} == halted, plain.consumers
        assert "src=" not in page and "<link" not in page and "@import" not in page  # self-contained
        assert "bus: %s has not connected for" % down in page  # recent warnings

        shot = os.environ.get("FANHUB_STATUS_SCREENSHOT") or wd.file("status-page.png")
        chromium("--user-data-dir=" + wd.file("chromium"), "--window-size=1500,560",
                 "--hide-scrollbars", "--screenshot=" + os.path.abspath(shot), base + "/")
        with open(shot, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_consumer_added_again_starts_afresh():
    """A consumer removed by a reload and added again under its name
    starts with counters at 0: the page shows no rate and no history
    from its predecessor (it showed 1.8e18 msg/s, the counters'
    difference wrapped around), even once it has counted past it. Takes
    a status step or two (10 s each)."""
    wd = fh.Workdir()
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        config = ("bus:\n  connect: [%s]\nconsumers:\n  - {name: b, plugin: \"null\"}\n"
                  % pub.endpoint)
        again = '  - {name: again, plugin: "null"}\n'
        hub = cleanup.add(fh.Hub(wd, config + again))

        def status(name):
            return hub.consumer(json.loads(hub.request("STATUS")), name)["status"]

        pub.wait_subscribed(hub=hub)
        for _ in range(500):
            pub.send("org.test.again", "{}")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "again")["completed"] == 500,
                    "the messages consumed", hub=hub)
        # Two samples of the 500 (the history holds the samples, then now):
        # the rates are taken from a sample a step old, the first of them.
        samples = len(status("again")["history"]["backlog"])
        fh.wait_for(lambda: len(status("again")["history"]["backlog"]) > samples + 1,
                    "two status samples after the messages", hub=hub)
        for text, count in ((config, 1), (config + again, 2)):
            with open(hub.config, "w") as f:
                f.write(text + "control: %s\n" % hub.control)
            status_code, out, err = fh.run(["reload", "-e", hub.control])
            assert status_code == 0 and "%d consumer" % count in out, (out, err)
        # More than its predecessor had: counts alone cannot tell them apart.
        for _ in range(600):
            pub.send("org.test.again", "{}")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "again")["completed"] == 600,
                    "the messages consumed again", hub=hub)
        fresh = status("again")
        # Now, and at most one sample taken since the reload; a rate, if
        # any, from that sample: 600 messages in half a second or more.
        assert len(fresh["history"]["backlog"]) <= 2, fresh
        assert fresh["rate_in"] <= 1200 and fresh["rate_out"] <= 1200, fresh
        assert hub.stop() == 0, hub.log()[-3000:]
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_page_in_a_browser_matches_stats, test_consumer_added_again_starts_afresh])
