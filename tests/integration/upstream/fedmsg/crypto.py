"""Stand-in (tests only) for fedmsg.crypto.validate (fedora-infra/fedmsg
fedmsg/crypto/__init__.py at 6583d58b10a0e304f79991d247fad9048b01253e):
true when the message carries a signature and a certificate that check
out. Here a "signature" is "signed:" followed by the msg_id, so that a
test can sign and tamper without X.509."""
from upstream_record import record


def validate(message, **config):
    ok = (isinstance(message.get("certificate"), str)
          and message.get("signature") == "signed:%s" % message.get("msg_id"))
    record("crypto.validate", msg_id=message.get("msg_id"), ok=ok)
    return ok
