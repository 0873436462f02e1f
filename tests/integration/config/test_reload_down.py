"""`fanhub reload` tells the truth: a reload that adds a consumer whose
start fails for now (a Python consumer whose constructor raises
ConnectionRefusedError) is applied, but the consumer is down; the reload
exits 3 and names the consumer and the reason, the log says the same, and
the status page shows the last reload's time and result."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

DOWN_MODULE = """class Consumer:
    \"\"\"A consumer whose broker is not up: its constructor fails for now.\"\"\"
    def __init__(self, *args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused: the broker at 127.0.0.1:1 "
                                     "is not up yet")

    def __call__(self, message):
        pass
"""


def test_reload_adding_a_down_consumer():
    wd = fh.Workdir()
    down_dir = wd.file("modules-down")
    os.makedirs(down_dir)
    with open(os.path.join(down_dir, "broker_down.py"), "w") as f:
        f.write(DOWN_MODULE)
    fine = "  - {name: fine, plugin: \"null\"}\n"
    v1 = fh.bus_hub_yaml({"connect": ["tcp://127.0.0.1:%d" % fh.free_port()]}, fine)
    with fh.Cleanup() as cleanup:
        hub = cleanup.add(fh.Hub(wd, v1))
        hub.wait_ready()
        # A reload that changes nothing is up: exit 0.
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 0 and "1 consumer" in out, (status, out, err)
        v2 = v1 + ("  - name: down\n    plugin: python\n    topics: [org.test.down]\n"
                   "    options: {callable: \"broker_down:Consumer\", path: [%s],"
                   " restart_delay: 50ms, restart_delay_max: 200ms}\n" % json.dumps(down_dir))
        with open(hub.config, "w") as f:
            f.write(v2 + "control: %s\n" % hub.control)
        before = time.time()
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 3, (status, out, err)
        assert "reloaded" in out and "2 consumers" in out, (out, err)
        assert "fanhub reload: consumer 'down' is down: worker 0: refused to start" in err, err
        assert "Connection refused" in err, err
        # Applied: the consumer is there, down; the hub goes on.
        fh.wait_for(lambda: hub.consumer(hub.stats(), "down")["state"] == 1, "down is down",
                    hub=hub)
        assert "reloaded" in hub.log() and "not up: consumer 'down' is down" in hub.log(), \
            hub.log()
        status_json = json.loads(hub.request("STATUS"))["hub"]["status"]
        assert status_json["last_reload"].startswith("DOWN reloaded"), status_json
        assert status_json["last_reload_time"] >= before - 1, status_json
        # A refused reload is still 1; DOWN is applied, so the gauge stays 1.
        assert hub.stats()["hub"]["config_last_reload_successful"] == 1
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_reload_adding_a_down_consumer])
