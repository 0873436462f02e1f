"""A plugin's own figures (ABI 1.6: host->metric_new, metric_add,
metric_set), for real: the `metered` test plugin registers a counter and
a gauge, and a running hub shows them under its consumer in `fanhub
stats` (the table's detail and the JSON), on Prometheus' HTTP endpoint
(with the consumer label) and in a real collectd (the unixsock push,
stored by collectd's csv plugin: the fixture of test_collectd.py). A
plugin that asks for bad names or a duplicate is refused, with the
host's reasons in the error that stops the hub.

Every wait is for a condition, with a deadline; nothing asserts timing."""
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import test_collectd as tc

N = 7
BODY = '{"i":%d,"pad":"xxxxxxxx"}'


def config(pub, wd, collectd_socket, bad=False):
    return ("bus:\n  connect: [%s]\n"
            "metrics:\n  interval: 1\n  prometheus:\n    listen: \"127.0.0.1:0\"\n"
            "  collectd: {socket: %s, interval: 1}\n"
            "consumers:\n  - name: meter\n    plugin: %s/metered.so\n"
            "    options: {bad: %s}\n"
            % (pub.endpoint, json.dumps(collectd_socket), fh.TEST_PLUGINS,
               "true" if bad else "false"))


def scrape(hub):
    listen = hub.bound("prometheus: serving http://", r"(\S+)/metrics")
    with urllib.request.urlopen("http://%s/metrics" % listen, timeout=30) as response:
        return response.read().decode()


def test_a_plugins_figures_reach_stats_prometheus_and_collectd():
    wd = fh.Workdir()
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        collectd = cleanup.add(tc.Collectd(wd, tc.collectd_conf(wd)))
        hub = cleanup.add(fh.Hub(wd, config(pub, wd, collectd.socket)))
        fh.wait_for(lambda: pub.sock.poll(100), "the hub to subscribe", hub=hub)
        pub.sock.recv()
        for i in range(N):
            pub.send("org.fanhub.test.metered", BODY % i)
        last = len(BODY % (N - 1))

        def counted():
            stats = tc.hub_stats(hub.control)
            return stats["consumers"][0]["completed"] == N and stats
        stats = fh.wait_for(counted, "%d messages consumed" % N, hub=hub)
        own = stats["consumers"][0]["plugin_metrics"]
        assert own["bodies"] == {"type": "counter", "value": N,
                                 "help": "Messages metered consumed.",
                                 "prometheus": "fanhub_plugin_metered_bodies_total"}, own
        assert own["last_body_bytes"]["type"] == "gauge", own
        assert own["last_body_bytes"]["value"] == last, own

        # The terminal's detail of the consumer lists them.
        status, out, err = fh.run(["stats", "-e", hub.control, "--consumer", "meter"])
        assert status == 0, err
        assert "plugin bodies" in out and " %d" % N in out, out
        assert "plugin last_body_bytes" in out, out

        text = scrape(hub)
        assert ("# HELP fanhub_plugin_metered_bodies_total Messages metered consumed.\n"
                "# TYPE fanhub_plugin_metered_bodies_total counter\n"
                'fanhub_plugin_metered_bodies_total{consumer="meter"} %d\n' % N) in text, text
        assert "# TYPE fanhub_plugin_metered_last_body_bytes gauge\n" in text, text
        assert ('fanhub_plugin_metered_last_body_bytes{consumer="meter"} %d\n' % last) in text, \
            text

        # collectd: a type instance under the consumer's plugin instance.
        host = tc.collectd_host_of_this_machine()
        tc.wait_csv(wd, host, "meter", "derive-plugin_bodies", N, hub=hub, collectd=collectd)
        tc.wait_csv(wd, host, "meter", "gauge-plugin_last_body_bytes", last, hub=hub,
                    collectd=collectd)
        assert "[error]" not in collectd.log(), collectd.log()
        assert hub.stop() == 0, hub.log()
        collectd.stop()
    wd.cleanup()


def test_bad_names_and_duplicates_are_refused():
    wd = fh.Workdir()
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        path = wd.write("bad.yaml", config(pub, wd, wd.file("none.sock"), bad=True))
        status, _, err = fh.run(["run", "-c", path])
        assert status != 0, err
        for says in ("metric 'Bad-Name': it must start with a lowercase letter",
                     "metric 'seen_total': it must not end in _total",
                     "metric 'odd': kind is neither",
                     "metric 'twice': registered already for this consumer"):
            assert says in err, (says, err)
    wd.cleanup()


if __name__ == "__main__":
    if not tc.find_collectd():
        fh.skip_all("collectd is missing: scripts/deps installs it (Debian package collectd-core)")
    fh.main([test_a_plugins_figures_reach_stats_prometheus_and_collectd,
             test_bad_names_and_duplicates_are_refused])
