"""The library's logger, ``fencelock``: quiet (a ``NullHandler``) unless the application
configures logging."""

import logging

log = logging.getLogger("fencelock")
log.addHandler(logging.NullHandler())
