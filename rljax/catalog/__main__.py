import sys

from rljax.catalog import main

sys.exit(main())
