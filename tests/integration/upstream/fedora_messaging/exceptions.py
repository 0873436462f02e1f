"""Stand-in (tests only) for fedora_messaging.exceptions
(fedora-infra/fedora-messaging fedora_messaging/exceptions.py at
48c5ccbc96cfbb12a73992d3a34699c87ef44db0): classes of its own, not the
runner's, as the real package's are."""


class BaseException(Exception):
    pass


class ConsumeException(BaseException):
    pass


class Nack(ConsumeException):
    pass


class Drop(ConsumeException):
    pass


class HaltConsumer(ConsumeException):
    def __init__(self, exit_code=0, requeue=False, reason=None, **kwargs):
        super().__init__(reason or "")
        self.exit_code, self.requeue, self.reason = exit_code, requeue, reason


class ValidationError(BaseException):
    pass
