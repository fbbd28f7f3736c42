"""The stored format's two bases: a user's spec and a stored record, both left out at their defaults."""

from __future__ import annotations

from typing import ClassVar

import msgspec


# gc=False: these are trees of plain data (no cycles), and the services hold them by the hundred thousand in a
# herd. Left to the cycle collector, each full collection walked them all: multi-second pauses in the agent
# and placement at 100,000 staged runs. Their lists and dicts are still tracked; a struct holding nothing
# that could point back at it needs no tracking itself.
#
# omit_defaults: a field at its default is left out when encoded, and read back as that default. A spec left at
# its defaults is about 1 KB of a run record's 1.4 KB, and every record is written three times per run and read by
# every watcher of its bucket; left out, a burst moves half the bytes and the server spends a tenth less CPU
# (docs/decisions-protocol.md, "Built: records and messages leave out the fields at their defaults"). So a
# default is part of the stored format: changing one changes what every record written before means
# (tests/unit/test_stored_defaults.py holds them). People see every field: the doors show records through
# wire.codec.with_defaults() and plain() (`stored_compact`).
class Spec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False, omit_defaults=True):
    """User-written structures: a misspelt field must fail, not vanish."""

    stored_compact: ClassVar[bool] = True


class Record(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """Stored and exchanged records: tolerate unknown fields for rolling upgrades."""

    stored_compact: ClassVar[bool] = True
