"""``python -m lachesis``: the same command line as ``lachesis`` (:mod:`lachesis.cli`)."""
import sys

from lachesis.cli import main

sys.exit(main())
