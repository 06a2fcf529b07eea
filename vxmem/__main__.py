"""``python -m vxmem``: the ``vxmem`` command (see :mod:`vxmem.cli`)."""

import sys

from .cli import main

sys.exit(main())
