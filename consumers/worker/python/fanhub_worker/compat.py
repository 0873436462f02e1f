"""Stand-ins for the packages a fedmsg, Moksha or fedora-messaging
consumer imports, installed only where the real package is missing, so
that such a consumer runs unchanged:

  fedmsg.consumers.FedmsgConsumer, moksha.hub.api.consumer.Consumer
      a base class: __init__(self, hub) keeps hub and its config, and
      refuses to start when the class's config_key is not true in it (as
      fedmsg does); validate, pre_consume and post_consume do nothing.
  fedora_messaging.exceptions: Nack, Drop, HaltConsumer (fanhub_worker's)
  fedora_messaging.config.conf: {"consumer_config": options.config}, where
      a fedora-messaging consumer reads its settings
  fedora_messaging.api: consume and twisted_consume are not offered: the
      hub is what calls the callable.

Nothing else of those packages is imitated.
"""
import logging
import sys
import types

from fanhub_worker import Drop, HaltConsumer, Nack


class ConfigKeyDisabled(Exception):
    pass


class Consumer:
    """The base of Moksha and fedmsg consumer classes, as far as a consumer
    run by fanhub needs one."""

    topic = None
    config_key = None

    def __init__(self, hub):
        self.hub = hub
        self.log = logging.getLogger(type(self).__module__)
        if self.config_key is not None and not hub.config.get(self.config_key, False):
            raise ConfigKeyDisabled(
                "config_key %r is not true in the consumer's options.config, so the consumer "
                "is disabled (as fedmsg-hub would leave it)" % self.config_key)

    def validate(self, message):
        pass

    def pre_consume(self, message):
        pass

    def post_consume(self, message):
        pass


def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__fanhub_stand_in__ = True
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


def _missing(name):
    try:
        __import__(name)
        return False
    except ImportError:
        return True


def install(config):
    if _missing("moksha.hub.api.consumer"):
        for name in ("moksha", "moksha.hub", "moksha.hub.api"):
            if name not in sys.modules:
                _module(name)
        _module("moksha.hub.api.consumer", Consumer=Consumer)
        sys.modules["moksha.hub.api"].Consumer = Consumer
    if _missing("fedmsg.consumers"):
        if "fedmsg" not in sys.modules:
            _module("fedmsg")
        _module("fedmsg.consumers", FedmsgConsumer=Consumer)
    if _missing("fedora_messaging.exceptions"):
        if "fedora_messaging" not in sys.modules:
            _module("fedora_messaging")
        _module("fedora_messaging.exceptions", Nack=Nack, Drop=Drop, HaltConsumer=HaltConsumer)
    if _missing("fedora_messaging.config"):
        _module("fedora_messaging.config", conf={"consumer_config": config})
