"""An unreachable bus endpoint is loud (issue 26): a bus.connect endpoint
that has not connected within bus.connect_warning is a warning naming it
and ZeroMQ's cause, repeated while it lasts; connecting is one info line,
a disconnect is info. STATS shows connected, since and last_error.

The unresolvable name is looked up inside a network namespace whose
resolv.conf names a loopback address nothing answers on, so no lookup
leaves the machine. Every wait is for a log line or a figure."""
import os
import shutil
import subprocess

import fanhublib as fh


def config(endpoints, warning=0.3):
    return fh.bus_hub_yaml({"connect": endpoints, "connect_warning": warning})


def warnings_about(hub, address):
    return [line for line in hub.log().splitlines()
            if line.startswith("fanhub: warning: bus: %s has not connected for" % address)]


def test_refused_port_warns_then_connects():
    wd = fh.Workdir()
    port = fh.free_port()
    address = "tcp://127.0.0.1:%d" % port
    with fh.Cleanup() as cleanup:
        hub = cleanup.add(fh.Hub(wd, config([address])))
        hub.wait_ready()
        # The first warning may come before ZeroMQ's first answer ("no
        # answer yet" on a loaded machine); one names the cause.
        fh.wait_for(lambda: any(w.endswith(": connection refused or unreachable; still trying")
                                for w in warnings_about(hub, address)),
                    "the warning naming the cause", hub=hub)
        e = fh.endpoint_stats(hub, address)
        assert e["connected"] is False and e["last_error"] == "connection refused or unreachable", e
        started = e["since"]
        # It repeats while it lasts, each gap longer.
        fh.wait_for(lambda: len(warnings_about(hub, address)) >= 3, "repeated warnings", hub=hub)
        # A publisher appears: one info line, and STATS follows.
        pub = cleanup.add(fh.bind_xpub(address))
        hub.wait_log("fanhub: info: bus: connected to %s" % address)
        e = fh.endpoint_stats(hub, address)
        assert e["connected"] is True and e["since"] > started, e
        fh.wait_for(lambda: pub.poll(0), "the hub's subscription", hub=hub)
        pub.recv()
        warned = len(warnings_about(hub, address))
        # The publisher goes away: info at once, a warning only when it lasts.
        pub.close()
        pub = None
        hub.wait_log("fanhub: info: bus: disconnected from %s; reconnecting" % address)
        assert "warning: bus: disconnected" not in hub.log()
        fh.wait_for(lambda: len(warnings_about(hub, address)) > warned,
                    "the warning after the disconnect", hub=hub)
        assert fh.endpoint_stats(hub, address)["connected"] is False
        status, out, _ = fh.run(["stats", "-e", hub.control, "--format", "prometheus"])
        assert status == 0
        assert 'fanhub_endpoint_since_timestamp_seconds{endpoint="%s",kind="connect"}' % address in out
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


class Netns:
    """A network namespace with its loopback up and a resolv.conf naming
    127.0.0.9, where nothing answers: a name lookup fails at once, inside
    the machine."""

    def __init__(self):
        if os.geteuid() != 0:
            raise fh.Skip("network namespaces need root")
        self.ip = fh.require_tool(shutil.which("ip"), "ip", "iproute2")
        self.name = "fanhub-test-%d" % os.getpid()
        self.etc = "/etc/netns/" + self.name
        subprocess.run([self.ip, "netns", "add", self.name], check=True)
        subprocess.run([self.ip, "-n", self.name, "link", "set", "lo", "up"], check=True)
        os.makedirs(self.etc, exist_ok=True)
        with open(self.etc + "/resolv.conf", "w") as f:
            f.write("nameserver 127.0.0.9\noptions timeout:1 attempts:1\n")

    def prefix(self):
        return [self.ip, "netns", "exec", self.name]

    def close(self):
        subprocess.run([self.ip, "netns", "del", self.name])
        shutil.rmtree(self.etc, ignore_errors=True)


def test_unresolvable_name_warns_with_the_cause():
    netns = Netns()
    wd = fh.Workdir()
    address = "tcp://bus.fanhub.invalid:9940"
    with fh.Cleanup() as cleanup:
        cleanup.add(netns)
        hub = cleanup.add(fh.Hub(wd, config([address]), prefix=netns.prefix()))
        hub.wait_ready()
        fh.wait_for(lambda: any(w.endswith(": name not resolved; still trying")
                                for w in warnings_about(hub, address)),
                    "the warning naming the cause", hub=hub)
        e = fh.endpoint_stats(hub, address)
        assert e["connected"] is False and e["last_error"] == "name not resolved", e
        assert hub.stop() == 0, hub.log()
        # check --connect says so too, from the same namespace.
        proc = subprocess.run(netns.prefix() + [fh.BIN, "check", "--connect", "-c", hub.config],
                              capture_output=True, text=True, timeout=fh.DEADLINE)
        fh.check_sanitizers(proc.stderr, "fanhub check --connect")
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert "  %s: name not resolved; bus.fanhub.invalid does not resolve" % address \
            in proc.stdout, proc.stdout
    wd.cleanup()


def test_check_connect():
    """`fanhub check --connect` tries each endpoint and says what it found."""
    wd = fh.Workdir()
    refused = "tcp://127.0.0.1:%d" % fh.free_port()
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.zmq_peer())
        listening = "tcp://127.0.0.1:%d" % pub.bind_to_random_port("tcp://127.0.0.1")
        path = wd.write("c.yaml", config([listening, refused]))
        status, out, err = fh.run(["check", "-c", path])
        assert status == 0, err  # without --connect nothing is tried
        assert "connect" not in out.lower().replace("connect_warning", ""), out
        status, out, err = fh.run(["check", "--connect", "-c", path])
        assert status == 1, (status, out, err)
        assert "%s: connected" % listening in out, out
        assert "%s: connection refused" % refused in out, out
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_refused_port_warns_then_connects, test_unresolvable_name_warns_with_the_cause,
             test_check_connect])
