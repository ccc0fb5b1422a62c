import sys

from lachesis.cli import main

sys.exit(main())
