"""Stand-in (tests only) for fedora_messaging.config
(fedora-infra/fedora-messaging fedora_messaging/config.py at
48c5ccbc96cfbb12a73992d3a34699c87ef44db0): conf is a LazyConfig, a dict
that loads its file on the first read unless `loaded` is set: the file
$FEDORA_MESSAGING_CONF names, else /etc/fedora-messaging/config.toml
(here JSON, not TOML: Python 3.9 reads no TOML), over DEFAULTS, whose
consumer_config is {}. Each load is recorded (upstream_record.py)."""
import copy
import json
import os

from upstream_record import record

DEFAULTS = {"amqp_url": "amqp://", "callback": None, "consumer_config": {},
            "publish_priority": None, "topic_prefix": ""}


class LazyConfig(dict):
    loaded = False

    def __getitem__(self, *args, **kw):
        if not self.loaded:
            self.load_config()
        return super().__getitem__(*args, **kw)

    def get(self, *args, **kw):
        if not self.loaded:
            self.load_config()
        return super().get(*args, **kw)

    def update(self, *args, **kw):
        if not self.loaded:
            self.load_config()
        return super().update(*args, **kw)

    def load_config(self, config_path=None):
        self.loaded = True
        config = copy.deepcopy(DEFAULTS)
        if config_path is None:
            config_path = os.environ.get("FEDORA_MESSAGING_CONF",
                                         "/etc/fedora-messaging/config.toml")
        record("config.load_config", path=config_path)
        if os.path.exists(config_path):
            with open(config_path) as f:
                config.update(json.load(f))
        self.update(config)
        return self


conf = LazyConfig()
