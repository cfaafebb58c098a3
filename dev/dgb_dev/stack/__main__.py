"""``python -m dgb_dev.stack ...``: see :mod:`dgb_dev.stack.cli`."""

import sys

from dgb_dev.stack.cli import main

sys.exit(main())
